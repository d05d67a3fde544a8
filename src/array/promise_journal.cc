// Journal file: a sequence of records, each
//   masked crc32c (u32) | payload length (u32) | type (u8) | payload
// with the CRC over type and payload, little-endian (util/coding.h). The first record is the
// header: identity length (u16), identity, the next txn (u64), the framing (u8, 2: every append
// ends with an end record giving its first byte; absent in journals of cairn up to commit ff9fb0b,
// where each record stands alone). Records are only appended, each append followed by
// fdatasync; compaction writes a new file and renames it over the old one.
// Layout documented in man/cairn-format.5 ("Lonestar journal").
#include "array/promise_journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <functional>

#include <fmt/format.h>

#include "util/coding.h"
#include "util/log.h"
#include "util/sync_directory.h"

namespace cairn {
namespace {

enum RecordType : uint8_t {
  kHeader = 1, kBegin = 2, kMark = 3, kDelta = 4, kDone = 5, kDefect = 6, kHighWater = 7, kEnd = 8, kEpoch = 9
};
constexpr uint8_t kFramed = 2;  // the header's framing: appends end with an end record
constexpr size_t kRecordHead = 9;                    // crc, length, type
constexpr uint32_t kMaxRecord = (1u << 30) + 4096;  // a delta of the largest chunk, and some

// The payload bytes of a record of `type`: the same in every record of that type but the header
// and a delta, whose payloads vary (0).
constexpr uint32_t FixedPayload(uint8_t type) {
  switch (type) {
    case kBegin: return 8 + 1 + 4 * kPromiseRoles + 8 + 8;  // txn, mode, disks, offset, length
    case kMark: return 8 + 1 + 1;                            // txn, role, finished
    case kDone: return 8;                                    // txn
    case kDefect: return 4 + 8 + 8 + 1;                      // disk, offset, length, added
    case kHighWater: return 4 + 8;                           // disk, end
    case kEnd: return 8;                                     // the append's first byte
    case kEpoch: return 8;                                   // the epoch
    default: return 0;
  }
}

class Writer {
 public:
  Writer& U8(uint8_t v) { return bytes_.push_back(v), *this; }
  Writer& U16(uint16_t v) { return Put(v, 2); }
  Writer& U32(uint32_t v) { return Put(v, 4); }
  Writer& U64(uint64_t v) { return Put(v, 8); }
  Writer& Bytes(std::span<const uint8_t> b) { return bytes_.insert(bytes_.end(), b.begin(), b.end()), *this; }
  std::span<const uint8_t> bytes() const { return bytes_; }

 private:
  Writer& Put(uint64_t v, int n) {
    for (int i = 0; i < n; i++) bytes_.push_back(uint8_t(v >> (8 * i)));
    return *this;
  }
  std::vector<uint8_t> bytes_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  bool U8(uint8_t* v) { return Take(1) && (*v = b_[at_ - 1], true); }
  bool U32(uint32_t* v) { return Take(4) && (*v = GetFixed32(&b_[at_ - 4]), true); }
  bool U64(uint64_t* v) { return Take(8) && (*v = GetFixed64(&b_[at_ - 8]), true); }
  std::span<const uint8_t> Rest() const { return b_.subspan(at_); }
  bool done() const { return at_ == b_.size(); }

 private:
  bool Take(size_t n) {
    if (b_.size() - at_ < n) return false;
    at_ += n;
    return true;
  }
  std::span<const uint8_t> b_;
  size_t at_ = 0;
};

Status WriteAll(int fd, uint64_t offset, std::span<const uint8_t> data, const std::string& path) {
  for (size_t done = 0; done < data.size();) {
    ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(fmt::format("lonestar journal {}: write", path), errno);
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

// A record of `type` whose payload is `payload` then the pieces of `tail`; the bytes
// returned end with `payload`: the tail (a delta) is written from where it is (see Append).
std::vector<uint8_t> EncodeRecord(uint8_t type, std::span<const uint8_t> payload, BytePieces tail = {}) {
  assert(FixedPayload(type) == 0 || FixedPayload(type) == payload.size() + TotalSize(tail));
  std::vector<uint8_t> record(kRecordHead + payload.size());
  record[8] = type;
  std::copy(payload.begin(), payload.end(), record.begin() + kRecordHead);
  uint32_t crc = Crc32c(std::span(record).subspan(8));
  for (std::span<const uint8_t> piece : tail) crc = Crc32c(piece, crc);
  PutFixed32(&record[4], static_cast<uint32_t>(payload.size() + TotalSize(tail)));
  PutFixed32(&record[0], MaskCrc(crc));
  return record;
}

std::vector<uint8_t> HighWaterRecord(uint32_t disk, uint64_t end) {
  Writer w;
  w.U32(disk).U64(end);
  return EncodeRecord(kHighWater, w.bytes());
}

std::vector<uint8_t> EpochRecord(uint64_t epoch) {
  Writer w;
  w.U64(epoch);
  return EncodeRecord(kEpoch, w.bytes());
}

std::vector<uint8_t> EndRecord(uint64_t append_start) {
  Writer w;
  w.U64(append_start);
  return EncodeRecord(kEnd, w.bytes());
}

std::vector<uint8_t> HeaderPayload(const std::string& identity, uint64_t next_txn) {
  Writer w;
  w.U16(static_cast<uint16_t>(identity.size()))
      .Bytes({reinterpret_cast<const uint8_t*>(identity.data()), identity.size()})
      .U64(next_txn)
      .U8(kFramed);
  return {w.bytes().begin(), w.bytes().end()};
}

// What ReadRecord found.
enum class RecordRead { kIntact, kPastEnd, kBadCrc };

// Reads the record at `at` into `body` (its type, then its payload); it is broken when its
// length runs past the end of the file (or the largest record) or its CRC fails.
Result<RecordRead> ReadRecord(int fd, uint64_t at, uint64_t file_size, const std::string& path,
                              std::vector<uint8_t>* body) {
  uint8_t head[kRecordHead];
  if (file_size - at < kRecordHead) return RecordRead::kPastEnd;
  if (::pread(fd, head, kRecordHead, static_cast<off_t>(at)) != static_cast<ssize_t>(kRecordHead)) {
    return Status::FromErrno(fmt::format("lonestar journal {}: read", path), errno);
  }
  uint32_t length = GetFixed32(&head[4]);
  if (length > kMaxRecord || file_size - at - kRecordHead < length) return RecordRead::kPastEnd;
  body->resize(length + 1);
  (*body)[0] = head[8];
  if (::pread(fd, body->data() + 1, length, static_cast<off_t>(at + kRecordHead)) != static_cast<ssize_t>(length)) {
    return Status::FromErrno(fmt::format("lonestar journal {}: read", path), errno);
  }
  return MaskCrc(Crc32c(*body)) == GetFixed32(&head[0]) ? RecordRead::kIntact : RecordRead::kBadCrc;
}

// Where the first record past `from` starts that is intact (its CRC checks), of a type of fixed
// length, and that `wanted` takes (given where it starts, its type and its payload), if one does.
Result<std::optional<uint64_t>> IntactRecordAfter(
    int fd, uint64_t from, uint64_t file_size, const std::string& path,
    const std::function<Result<bool>(uint64_t, uint8_t, std::span<const uint8_t>)>& wanted) {
  constexpr size_t kWindow = 1 << 20;
  constexpr size_t kLongest = kRecordHead + FixedPayload(kBegin);  // a record may start in one window, end in the next
  std::vector<uint8_t> window(kWindow + kLongest);
  for (uint64_t start = from + 1; start + kRecordHead < file_size; start += kWindow) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(window.size(), file_size - start));
    if (::pread(fd, window.data(), n, static_cast<off_t>(start)) != static_cast<ssize_t>(n)) {
      return Status::FromErrno(fmt::format("lonestar journal {}: read", path), errno);
    }
    for (size_t i = 0; i + kRecordHead <= n && i < kWindow; i++) {
      uint8_t type = window[i + 8];
      uint32_t length = FixedPayload(type);
      if (length == 0 || GetFixed32(&window[i + 4]) != length || i + kRecordHead + length > n) continue;
      if (MaskCrc(Crc32c(std::span(window).subspan(i + 8, 1 + length))) != GetFixed32(&window[i])) continue;
      auto take = wanted(start + i, type, std::span(window).subspan(i + kRecordHead, length));
      if (!take.ok()) return take.status();
      if (*take) return std::optional<uint64_t>(start + i);
    }
  }
  return std::optional<uint64_t>();
}

// Whether the records from `start` to the end record at `end` are all intact, and end there.
Result<bool> WholeAppend(int fd, uint64_t start, uint64_t end, uint64_t file_size, const std::string& path) {
  std::vector<uint8_t> body;
  uint64_t at = start;
  while (at < end) {
    auto read = ReadRecord(fd, at, file_size, path, &body);
    if (!read.ok()) return read.status();
    if (*read != RecordRead::kIntact) return false;
    at += kRecordHead + (body.size() - 1);
  }
  return at == end;
}

// Writes a journal file holding `records` in one append, synced, and renames it to `path`
// (its directory is not synced): a journal is named only once its first append is whole.
Result<int> WriteFresh(const std::string& path, const std::vector<std::vector<uint8_t>>& records, uint64_t* size) {
  const std::string fresh = path + ".new";
  int fd = ::open(fresh.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::FromErrno(fmt::format("lonestar journal: create {}", fresh), errno);
  uint64_t at = 0;
  Status st;
  for (const auto& r : records) {
    if (st.ok()) st = WriteAll(fd, at, r, fresh);
    at += r.size();
  }
  if (st.ok()) st = WriteAll(fd, at, EndRecord(0), fresh);
  at += kRecordHead + FixedPayload(kEnd);
  if (st.ok() && ::fdatasync(fd) != 0) {
    st = Status::FromErrno(fmt::format("lonestar journal {}: fdatasync", fresh), errno);
  }
  if (st.ok() && ::rename(fresh.c_str(), path.c_str()) != 0) {
    st = Status::FromErrno(fmt::format("lonestar journal: rename {}", fresh), errno);
  }
  if (!st.ok()) {
    ::close(fd);
    return st;
  }
  *size = at;
  return fd;
}

}  // namespace

std::optional<ArrayWriteMode> ArrayWriteModeNamed(std::string_view name) {
  for (ArrayWriteMode mode : {ArrayWriteMode::kSerialized, ArrayWriteMode::kDirect, ArrayWriteMode::kDelayed}) {
    if (name == ArrayWriteModeName(mode)) return mode;
  }
  return std::nullopt;
}

std::string_view ArrayWriteModeName(ArrayWriteMode mode) {
  switch (mode) {
    case ArrayWriteMode::kSerialized: return "serialized";
    case ArrayWriteMode::kDirect: return "direct";
    case ArrayWriteMode::kDelayed: return "delayed";
  }
  return "?";
}

Result<std::unique_ptr<PromiseJournal>> PromiseJournal::Create(const std::string& path, const std::string& identity) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) return Status::Exists(fmt::format("lonestar journal {} exists", path));
  uint64_t size = 0;
  auto fd = WriteFresh(path, {EncodeRecord(kHeader, HeaderPayload(identity, 1))}, &size);  // renamed into place
  if (!fd.ok()) return fd.status();
  std::unique_ptr<PromiseJournal> journal(new PromiseJournal(path, identity, *fd));
  journal->size_ = size;
  CAIRN_RETURN_IF_ERROR(SyncDirectoryOf(path));
  return journal;
}

Result<std::unique_ptr<PromiseJournal>> PromiseJournal::Open(const std::string& path, const std::string& identity) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ENOENT) return Status::NotFound(fmt::format("lonestar journal {} is missing", path));
  if (fd < 0) return Status::FromErrno(fmt::format("lonestar journal: open {}", path), errno);
  std::unique_ptr<PromiseJournal> journal(new PromiseJournal(path, identity, fd));
  std::lock_guard lock(journal->mutex_);
  CAIRN_RETURN_IF_ERROR(journal->Replay(false));
  if (!journal->framed_) {  // written by an older cairn: rewritten framed, or else appended to as it is
    if (Status st = journal->CompactLocked(); !st.ok()) {
      LogError("lonestar journal {}: rewriting it with framed appends failed{}: {}", path,
               journal->framed_ ? " at the directory sync (the next append syncs it first)"
                                : " (it stays as it was, each record an append of its own)",
               st.message());
    }
  }
  return journal;
}

Result<PromiseJournal::State> PromiseJournal::Inspect(const std::string& path, const std::string& identity) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ENOENT) return Status::NotFound(fmt::format("lonestar journal {} is missing", path));
  if (fd < 0) return Status::FromErrno(fmt::format("lonestar journal: open {}", path), errno);
  PromiseJournal journal(path, identity, fd);
  std::lock_guard lock(journal.mutex_);
  CAIRN_RETURN_IF_ERROR(journal.Replay(true));
  return journal.state_;
}

PromiseJournal::~PromiseJournal() { ::close(fd_); }

Status PromiseJournal::Replay(bool read_only) {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return Status::FromErrno(fmt::format("lonestar journal {}: stat", path_), errno);
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  // The records of the append being read, applied once its end record is (a framed journal).
  struct Pending {
    uint64_t at;
    uint32_t length;
    std::vector<uint8_t> body;  // a delta's: its type and txn only
  };
  std::vector<Pending> pending;
  bool header_seen = false;
  uint64_t at = 0;
  uint64_t append_start = 0;  // where the append `at` is part of begins
  std::vector<uint8_t> body;
  while (at < file_size) {
    auto read = ReadRecord(fd_, at, file_size, path_, &body);
    if (!read.ok()) return read.status();
    if (*read != RecordRead::kIntact) {
      // An older journal: a record whose length fits but whose CRC fails is damage when more follows.
      if (header_seen && !framed_ && *read == RecordRead::kBadCrc && at + kRecordHead + (body.size() - 1) < file_size) {
        return Damaged(at, "checksum mismatch");
      }
      return CutTornAppend(at, append_start, file_size, header_seen, read_only);
    }
    const uint8_t type = body[0];
    const auto length = static_cast<uint32_t>(body.size() - 1);
    if (!header_seen) {
      CAIRN_RETURN_IF_ERROR(ReplayHeader(at, body));
      header_seen = true;
    } else if (!framed_) {
      CAIRN_RETURN_IF_ERROR(ReplayRecord(at, length, body));
    } else if (type != kEnd) {
      if (type == kDelta) body.resize(std::min<size_t>(body.size(), 1 + 8));
      pending.push_back({at, length, std::move(body)});
      body = {};
    } else {
      Reader r(std::span<const uint8_t>(body).subspan(1));
      uint64_t start = 0;
      if (!r.U64(&start) || !r.done() || start != append_start) {
        return Damaged(at, fmt::format("the end of an append from byte {}, but the append began at byte {}", start,
                                       append_start));
      }
      for (const Pending& p : pending) CAIRN_RETURN_IF_ERROR(ReplayRecord(p.at, p.length, p.body));
      pending.clear();
    }
    at += kRecordHead + length;
    if (!framed_ || type == kEnd) append_start = at;
  }
  if (!header_seen) return Status::Corruption(fmt::format("lonestar journal {} is empty", path_));
  if (append_start != at) return CutTornAppend(at, append_start, file_size, header_seen, read_only);  // no end record
  size_ = at;
  return Status::OK();
}

Status PromiseJournal::Damaged(uint64_t at, const std::string& why) const {
  return Status::Corruption(fmt::format("lonestar journal {}: record at byte {}: {}", path_, at, why));
}

Status PromiseJournal::CutTornAppend(uint64_t broken_at, uint64_t append_start, uint64_t file_size, bool header_seen,
                                     bool read_only) {
  if (!header_seen) return Damaged(broken_at, "no journal header");
  // (The first append was written whole before the file was given its name.)
  if (append_start == 0) return Damaged(broken_at, "the header's append is not whole");
  // Nothing is appended after an append that never returned: what follows a torn one is
  // either nothing or its own bytes. This append's own end with bytes after it, or a whole
  // append after it, means damage instead.
  auto later_append = [&](uint64_t pos, uint8_t type, std::span<const uint8_t> payload) -> Result<bool> {
    if (!framed_) return true;  // (each record an append of its own)
    if (type != kEnd) return false;
    uint64_t start = GetFixed64(payload.data());
    if (start == append_start) return pos + kRecordHead + FixedPayload(kEnd) < file_size;
    if (start < append_start || start >= pos) return false;
    return WholeAppend(fd_, start, pos, file_size, path_);
  };
  auto later = IntactRecordAfter(fd_, append_start, file_size, path_, later_append);
  if (!later.ok()) return later.status();
  if (*later) {
    return Damaged(broken_at, framed_ ? fmt::format("damaged (appends follow, the first ending at byte {})", **later)
                                      : fmt::format("damaged (an intact record follows at byte {})", **later));
  }
  size_ = append_start;
  if (read_only) return Status::OK();
  if (::ftruncate(fd_, static_cast<off_t>(append_start)) != 0 || ::fdatasync(fd_) != 0) {
    return Status::FromErrno(fmt::format("lonestar journal {}: cut a torn append", path_), errno);
  }
  // It never returned success, so nothing relies on it.
  LogWarning("lonestar journal {}: cut off bytes {} to {}, an append a crash left incomplete", path_, append_start,
             file_size);
  return Status::OK();
}

Status PromiseJournal::ReplayHeader(uint64_t at, std::span<const uint8_t> body) {
  if (body[0] != kHeader || body.size() < 3) return Damaged(at, "not a lonestar journal");
  uint16_t n = GetFixed16(&body[1]);
  if (3u + n > body.size()) return Damaged(at, "short header");
  std::string identity(body.begin() + 3, body.begin() + 3 + n);
  if (identity != identity_) {
    return Status::Corruption(fmt::format("lonestar journal {} belongs to {:?}, not {:?}", path_, identity, identity_));
  }
  Reader r(body.subspan(3 + n));
  if (!r.U64(&next_txn_)) return Damaged(at, "short header");
  uint8_t framing = 0;
  if (!r.done() && (!r.U8(&framing) || framing != kFramed || !r.done())) return Damaged(at, "unknown framing");
  framed_ = framing == kFramed;
  return Status::OK();
}

Status PromiseJournal::ReplayRecord(uint64_t at, uint32_t length, std::span<const uint8_t> body) {
  const uint8_t type = body[0];
  Reader r(body.subspan(1));
  if (type == kBegin) {
    Promise p;
    uint8_t mode = 0;
    bool ok = r.U64(&p.txn) && r.U8(&mode);
    for (uint32_t& d : p.disks) ok = ok && r.U32(&d);
    ok = ok && r.U64(&p.offset) && r.U64(&p.length) && r.done() && mode >= 1 && mode <= 3;
    if (!ok) return Damaged(at, "bad promise");
    p.mode = static_cast<ArrayWriteMode>(mode);
    next_txn_ = std::max(next_txn_, p.txn + 1);
    state_.open[p.txn] = p;
  } else if (type == kMark) {
    uint64_t txn = 0;
    uint8_t role = 0, finished = 0;
    if (!r.U64(&txn) || !r.U8(&role) || !r.U8(&finished) || !r.done() || role >= kPromiseRoles) {
      return Damaged(at, "bad mark");
    }
    auto it = state_.open.find(txn);
    if (it == state_.open.end()) return Damaged(at, fmt::format("mark of unknown promise {}", txn));
    (finished ? it->second.finished : it->second.started)[role] = true;
  } else if (type == kDelta) {
    uint64_t txn = 0;
    auto it = r.U64(&txn) ? state_.open.find(txn) : state_.open.end();
    if (it == state_.open.end() || length != 8 + it->second.length) return Damaged(at, "bad delta");
    it->second.has_delta = true;
    delta_at_[txn] = at;
  } else if (type == kDone) {
    uint64_t txn = 0;
    if (!r.U64(&txn) || !r.done()) return Damaged(at, "bad done");
    state_.open.erase(txn);
    delta_at_.erase(txn);
  } else if (type == kDefect) {
    uint32_t disk = 0;
    ByteRange range;
    uint8_t add = 0;
    if (!r.U32(&disk) || !r.U64(&range.offset) || !r.U64(&range.length) || !r.U8(&add) || !r.done()) {
      return Damaged(at, "bad defect range");
    }
    if (add) {
      state_.defects[disk].Add(range);
    } else {
      state_.defects[disk].Remove(range);
      if (state_.defects[disk].empty()) state_.defects.erase(disk);
    }
  } else if (type == kHighWater) {
    uint32_t disk = 0;
    uint64_t end = 0;
    if (!r.U32(&disk) || !r.U64(&end) || !r.done()) return Damaged(at, "bad high-water mark");
    uint64_t& mark = state_.high_water[disk];
    mark = std::max(mark, end);
  } else if (type == kEpoch) {
    uint64_t epoch = 0;
    if (!r.U64(&epoch) || !r.done()) return Damaged(at, "bad epoch");
    state_.epoch = std::max(state_.epoch, epoch);
  } else {
    return Damaged(at, fmt::format("unknown record type {}", type));
  }
  return Status::OK();
}

PromiseJournal::State PromiseJournal::state() const {
  std::lock_guard lock(mutex_);
  return state_;
}

uint64_t PromiseJournal::file_bytes() const {
  std::lock_guard lock(mutex_);
  return size_;
}

Status PromiseJournal::Append(const std::vector<std::vector<uint8_t>>& records, BytePieces tail, uint64_t* first) {
  // A rewrite of the journal leaves behind what a failed append could not cut off.
  if (!unusable_.ok() && !CompactLocked().ok()) return unusable_;
  if (name_unsynced_) {  // what goes into the compacted file counts only once its name is durable
    CAIRN_RETURN_IF_ERROR(SyncDirectoryOf(path_));
    name_unsynced_ = false;
  }
  if (first != nullptr) *first = size_;  // (a compaction above moved it)
  std::vector<uint8_t> bytes;
  for (const auto& r : records) bytes.insert(bytes.end(), r.begin(), r.end());
  Status st = WriteAll(fd_, size_, bytes, path_);
  uint64_t at = size_ + bytes.size();
  for (size_t i = 0; i < tail.size() && st.ok(); i++) {
    st = WriteAll(fd_, at, tail[i], path_);
    at += tail[i].size();
  }
  if (st.ok() && framed_) {
    st = WriteAll(fd_, at, EndRecord(size_), path_);
    at += kRecordHead + FixedPayload(kEnd);
  }
  if (st.ok() && ::fdatasync(fd_) != 0) {
    st = Status::FromErrno(fmt::format("lonestar journal {}: fdatasync", path_), errno);
  }
  if (st.ok()) {
    size_ = at;
    return st;
  }
  // What landed of it must be read neither as records at the next open nor after a shorter
  // next append: it goes, or the journal takes no more.
  if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0 || ::fdatasync(fd_) != 0) {
    unusable_ = Status::IOError(fmt::format("{}; and cutting the failed append off failed too: {}: the journal takes "
                                            "no more records until it is rewritten", st.message(), std::strerror(errno)));
    return unusable_;
  }
  return st;
}

Result<Promise> PromiseJournal::Begin(ArrayWriteMode mode, const std::array<uint32_t, kPromiseRoles>& disks,
                                      uint64_t offset, uint64_t length) {
  std::lock_guard lock(mutex_);
  Promise p;
  p.txn = next_txn_;
  p.mode = mode;
  p.disks = disks;
  p.offset = offset;
  p.length = length;
  Writer w;
  w.U64(p.txn).U8(static_cast<uint8_t>(mode));
  for (uint32_t d : disks) w.U32(d);
  w.U64(offset).U64(length);
  CAIRN_RETURN_IF_ERROR(Append({EncodeRecord(kBegin, w.bytes())}));
  next_txn_++;
  state_.open[p.txn] = p;
  return p;
}

Status PromiseJournal::KeepDelta(uint64_t txn, BytePieces delta) {
  std::lock_guard lock(mutex_);
  auto it = state_.open.find(txn);
  if (it == state_.open.end()) return Status::InvalidArgument(fmt::format("lonestar journal: no promise {}", txn));
  if (it->second.has_delta || TotalSize(delta) != it->second.length) {
    return Status::InvalidArgument(fmt::format("lonestar journal: a delta of {} bytes for promise {} of {}{}",
                                               TotalSize(delta), txn, it->second.length,
                                               it->second.has_delta ? ", which has one" : ""));
  }
  Writer w;
  w.U64(txn);
  uint64_t at = 0;
  CAIRN_RETURN_IF_ERROR(Append({EncodeRecord(kDelta, w.bytes(), delta)}, delta, &at));
  it->second.has_delta = true;
  delta_at_[txn] = at;
  return Status::OK();
}

Status PromiseJournal::Mark(std::span<const uint64_t> txns, PromiseRole role, bool finished) {
  if (txns.empty()) return Status::OK();
  std::lock_guard lock(mutex_);
  std::vector<std::vector<uint8_t>> records;
  for (uint64_t txn : txns) {
    if (!state_.open.contains(txn)) return Status::InvalidArgument(fmt::format("lonestar journal: no promise {}", txn));
    Writer w;
    w.U64(txn).U8(role).U8(finished);
    records.push_back(EncodeRecord(kMark, w.bytes()));
  }
  CAIRN_RETURN_IF_ERROR(Append(records));
  for (uint64_t txn : txns) (finished ? state_.open[txn].finished : state_.open[txn].started)[role] = true;
  return Status::OK();
}

Result<std::vector<uint8_t>> PromiseJournal::LoadDelta(uint64_t txn) {
  std::lock_guard lock(mutex_);
  auto it = delta_at_.find(txn);
  if (it == delta_at_.end()) return Status::NotFound(fmt::format("lonestar journal: promise {} has no delta", txn));
  uint64_t length = state_.open.at(txn).length;
  std::array<uint8_t, kRecordHead + 8> head;  // then the txn
  std::vector<uint8_t> delta(length);
  for (auto [bytes, at] : {std::pair{std::span<uint8_t>(head), it->second},
                           std::pair{std::span<uint8_t>(delta), it->second + head.size()}}) {
    ssize_t n = ::pread(fd_, bytes.data(), bytes.size(), static_cast<off_t>(at));
    if (n != static_cast<ssize_t>(bytes.size())) {
      return Status::FromErrno(fmt::format("lonestar journal {}: read the delta of promise {}", path_, txn),
                               n < 0 ? errno : EIO);
    }
  }
  // Checked again at each load: the parity it goes into must not take damage from the journal.
  // (The CRC covers type, txn and delta, not the length, whose damage would cut the journal
  // there at the next open: refused, the flush that drops it compacts the journal.)
  if (GetFixed32(&head[4]) != 8 + length ||
      UnmaskCrc(GetFixed32(head.data())) != Crc32c(delta, Crc32c(std::span(head).subspan(8)))) {
    return Status::Corruption(fmt::format("lonestar journal {}: the delta of promise {} is damaged", path_, txn));
  }
  return delta;
}

Status PromiseJournal::Done(std::span<const uint64_t> txns) {
  if (txns.empty()) return Status::OK();
  {
    std::lock_guard lock(mutex_);
    std::vector<std::vector<uint8_t>> records;
    for (uint64_t txn : txns) {
      Writer w;
      w.U64(txn);
      records.push_back(EncodeRecord(kDone, w.bytes()));
    }
    CAIRN_RETURN_IF_ERROR(Append(records));
    for (uint64_t txn : txns) {
      state_.open.erase(txn);
      delta_at_.erase(txn);
    }
  }
  CompactIfLarge();
  return Status::OK();
}

Status PromiseJournal::AddDefect(uint32_t disk, ByteRange range) {
  std::lock_guard lock(mutex_);
  Writer w;
  w.U32(disk).U64(range.offset).U64(range.length).U8(1);
  CAIRN_RETURN_IF_ERROR(Append({EncodeRecord(kDefect, w.bytes())}));
  state_.defects[disk].Add(range);
  return Status::OK();
}

Status PromiseJournal::RemoveDefect(uint32_t disk, ByteRange range) {
  {
    std::lock_guard lock(mutex_);
    Writer w;
    w.U32(disk).U64(range.offset).U64(range.length).U8(0);
    CAIRN_RETURN_IF_ERROR(Append({EncodeRecord(kDefect, w.bytes())}));
    state_.defects[disk].Remove(range);
    if (state_.defects[disk].empty()) state_.defects.erase(disk);
  }
  CompactIfLarge();
  return Status::OK();
}

Status PromiseJournal::RaiseHighWater(std::span<const uint32_t> disks, uint64_t end) {
  std::lock_guard lock(mutex_);
  std::vector<std::vector<uint8_t>> records;
  for (uint32_t disk : disks) {
    auto it = state_.high_water.find(disk);
    if (it == state_.high_water.end() || it->second < end) records.push_back(HighWaterRecord(disk, end));
  }
  if (records.empty()) return Status::OK();
  CAIRN_RETURN_IF_ERROR(Append(records));
  for (uint32_t disk : disks) {
    uint64_t& mark = state_.high_water[disk];
    mark = std::max(mark, end);
  }
  return Status::OK();
}

Status PromiseJournal::RaiseEpoch(uint64_t epoch) {
  std::lock_guard lock(mutex_);
  if (epoch <= state_.epoch) return Status::OK();
  CAIRN_RETURN_IF_ERROR(Append({EpochRecord(epoch)}));
  state_.epoch = epoch;
  return Status::OK();
}

uint64_t PromiseJournal::epoch() const {
  std::lock_guard lock(mutex_);
  return state_.epoch;
}

void PromiseJournal::CompactIfLarge() {
  std::lock_guard lock(mutex_);
  if (size_ <= compact_above_) return;
  // What was recorded is durable either way: a failure only leaves the file long, and the
  // next try waits for it to grow a little more.
  if (Status st = CompactLocked(); !st.ok()) {
    compact_above_ = size_ + kCompactAbove / 4;
    LogError("lonestar journal {} ({} bytes) stays as it is until it grows by {} bytes: cannot compact it: {}", path_,
             size_, kCompactAbove / 4, st.message());
    return;
  }
  compact_above_ = kCompactAbove;
}

Status PromiseJournal::Compact() {
  std::lock_guard lock(mutex_);
  return CompactLocked();
}

Status PromiseJournal::CompactLocked() {
  std::vector<std::vector<uint8_t>> records{EncodeRecord(kHeader, HeaderPayload(identity_, next_txn_))};
  if (state_.epoch > 0) records.push_back(EpochRecord(state_.epoch));
  for (const auto& [disk, ranges] : state_.defects) {
    ranges.ForEach([&](ByteRange r) {
      Writer w;
      w.U32(disk).U64(r.offset).U64(r.length).U8(1);
      records.push_back(EncodeRecord(kDefect, w.bytes()));
    });
  }
  for (const auto& [disk, end] : state_.high_water) records.push_back(HighWaterRecord(disk, end));
  std::map<uint64_t, uint64_t> delta_at;  // in the new file
  uint64_t at = 0;
  for (const auto& r : records) at += r.size();
  for (const auto& [txn, p] : state_.open) {
    Writer begin;
    begin.U64(txn).U8(static_cast<uint8_t>(p.mode));
    for (uint32_t d : p.disks) begin.U32(d);
    begin.U64(p.offset).U64(p.length);
    records.push_back(EncodeRecord(kBegin, begin.bytes()));
    at += records.back().size();
    for (size_t role = 0; role < kPromiseRoles; role++) {
      for (bool finished : {false, true}) {
        if (!(finished ? p.finished : p.started)[role]) continue;
        Writer mark;
        mark.U64(txn).U8(static_cast<uint8_t>(role)).U8(finished);
        records.push_back(EncodeRecord(kMark, mark.bytes()));
        at += records.back().size();
      }
    }
    if (auto d = delta_at_.find(txn); d != delta_at_.end()) {
      // Copied as it is, its CRC with it: a delta damaged since it was kept stays detectable.
      // Its length, which the CRC does not cover, is written as it must be.
      std::vector<uint8_t> record(kRecordHead + 8 + p.length);
      ssize_t n = ::pread(fd_, record.data(), record.size(), static_cast<off_t>(d->second));
      if (n != static_cast<ssize_t>(record.size())) {
        return Status::FromErrno(fmt::format("lonestar journal {}: read a delta to keep", path_), n < 0 ? errno : EIO);
      }
      PutFixed32(&record[4], static_cast<uint32_t>(8 + p.length));
      records.push_back(std::move(record));
      delta_at[txn] = at;
      at += records.back().size();
    }
  }
  uint64_t size = 0;
  auto fd = WriteFresh(path_, records, &size);
  if (!fd.ok()) return fd.status();
  ::close(fd_);
  fd_ = *fd;
  size_ = size;
  framed_ = true;
  unusable_ = Status::OK();  // whatever a failed append left is in the old file
  delta_at_ = std::move(delta_at);
  Status synced = SyncDirectoryOf(path_);
  name_unsynced_ = !synced.ok();  // then the next append syncs it first
  return synced;
}

}  // namespace cairn
