#include "maintenance/recover.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "archive/archive.h"
#include "archive/archive_lock.h"
#include "archive/config.h"
#include "archive/private_files.h"
#include "backend/member_table.h"
#include "maintenance/extent_scan.h"
#include "pipeline/logical_payload.h"
#include "pipeline/segment_writer.h"
#include "policy/resolver.h"
#include "util/clock.h"
#include "util/log.h"

namespace cairn {
namespace {

// Segments a file of the node's size is cut into (0 before its segment size is fixed).
uint64_t SegmentCountOf(const MemberNode& node) {
  return node.segment_size > 0 ? (node.size + node.segment_size - 1) / node.segment_size : 0;
}

// lstat: a dangling symlink counts, it is set aside like a file.
bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// The time now (20261127T084500Z), with -2, -3, ... after it when an earlier recover of the
// same second left its backups of `dir` under that name: a backup is never replaced.
std::string BackupSuffix(const std::string& dir) {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y%m%dT%H%M%SZ", &utc);
  for (int n = 1;; n++) {
    std::string suffix = n == 1 ? std::string(text) : fmt::format("{}-{}", text, n);
    bool taken = Exists(dir + "/cache.bak-" + suffix);
    for (const char* part : {"", "-wal", "-shm"}) taken = taken || Exists(dir + "/catalog.db.bak-" + suffix + part);
    if (!taken) return suffix;
  }
}

// Renames, never over an existing file where the filesystem can promise it (NFS cannot:
// there, BackupSuffix checked the name under the archive lock).
Status Rename(const std::string& from, const std::string& to) {
  int rc = ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE);
  if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) rc = ::rename(from.c_str(), to.c_str());
  if (rc != 0) return Status::FromErrno(fmt::format("rename {} to {}", from, to), errno);
  return Status::OK();
}

// Whether the staging cache at `dir` holds files; one that cannot be listed may, so it
// counts as holding some (it is kept aside, never deleted).
bool HasFiles(const std::string& dir) {
  bool any = false;
  Status listed = StagingCache(dir).ForEach([&](const StagingCache::FileInfo&) { any = true; });
  return any || !listed.ok();
}

// How far a catalog numbered inodes and extents, and the generation it was at.
struct IdFloors {
  uint64_t max_ino = 0;
  uint64_t max_extent_id = 0;
  uint64_t epoch = 0;
};

// How far `catalog` numbered, unless a recover that did not finish made it: that one may
// have left a gap (InodeFloor) that its floors do not hold yet.
Result<IdFloors> IdFloorsOf(Catalog& catalog) {
  auto unfinished = catalog.GetMeta(kRecoverUnfinishedMeta);
  if (!unfinished.ok() && !unfinished.status().IsNotFound()) return unfinished.status();
  if (unfinished.ok() && !unfinished->empty()) return Status::Corruption("a recover that did not finish made it");
  IdFloors floors;
  auto max_ino = catalog.MaxInoEverUsed();
  if (!max_ino.ok()) return max_ino.status();
  floors.max_ino = *max_ino;
  auto max_extent_id = catalog.MaxExtentIdEverUsed();
  if (!max_extent_id.ok()) return max_extent_id.status();
  floors.max_extent_id = *max_extent_id;
  auto epoch = catalog.GetMeta("epoch");
  if (!epoch.ok() && !epoch.status().IsNotFound()) return epoch.status();
  if (epoch.ok()) floors.epoch = std::strtoull(epoch->c_str(), nullptr, 10);
  return floors;
}

// What the old catalog, when it still reads, holds that the disks do not: encrypted files'
// data keys (wrapped; without them those files cannot be recovered, a note says why), and how
// far inode numbers, extent ids and generations went, so that none is handed out again (a disk
// missing now may hold ids above every one found on the others).
Status CarryFromOldCatalog(RecoverReport& report, Catalog& fresh) {
  if (report.catalog_backup.empty()) return Status::OK();
  auto old = Catalog::Open(report.catalog_backup, /*read_only=*/true);
  auto keys = old.ok() ? (*old)->AllFileKeys() : Result<std::vector<FileKeyRecord>>(old.status());
  if (keys.ok()) {
    for (const FileKeyRecord& key : *keys) CAIRN_RETURN_IF_ERROR(fresh.PutFileKey(key));
    if (!keys->empty()) {
      report.notes.push_back(fmt::format("{} encrypted files' data keys kept from the old catalog", keys->size()));
    }
  } else {
    report.notes.push_back(fmt::format("the data keys of encrypted files could not be read from the old catalog ({}); "
                                       "encrypted files cannot be recovered",
                                       keys.status().message()));
  }
  auto floors = old.ok() ? IdFloorsOf(**old) : Result<IdFloors>(old.status());
  if (floors.ok()) {
    CAIRN_RETURN_IF_ERROR(fresh.RaiseIdFloors(floors->max_ino, floors->max_extent_id));
    CAIRN_RETURN_IF_ERROR(fresh.RaiseEpoch(floors->epoch));
  } else {
    report.notes.push_back(fmt::format("how far the old catalog numbered inodes and extents is not known ({})",
                                       floors.status().message()));
  }
  return fresh.Flush();
}

// Step 1: takes the archive lock, which recover holds to the end (no daemon may open a
// half-made archive), keeps the old catalog and cache aside and makes a new, empty catalog.
Result<ArchiveLock> SetAside(const std::string& dir, bool force, RecoverReport& report) {
  // Not an archive (a typo, a mount point): refused before a lock or log file is left there.
  auto config = LoadConfig(dir + "/cairn.conf");
  if (!config.ok()) return config.status();
  auto lock = ArchiveLock::Acquire(dir);
  if (!lock.ok()) return lock.status();
  CAIRN_RETURN_IF_ERROR(MakeArchivePrivate(dir));  // refuses the owner's symlinks before anything is written
  struct stat owner {};
  if (::stat(dir.c_str(), &owner) != 0) return Status::FromErrno(fmt::format("archive {}", dir), errno);
  std::string catalog = dir + "/catalog.db";
  if (Exists(catalog) && !force) {
    return Status::Exists(fmt::format("{} exists: recover would replace it; pass --force to keep it aside as "
                                      "catalog.db.bak-TIME and rebuild it from the disks",
                                      catalog));
  }
  std::string suffix = BackupSuffix(dir);
  // A -wal or -shm left without its database would be taken for the new one's.
  for (const char* part : {"", "-wal", "-shm"}) {
    if (Exists(catalog + part)) {
      report.catalog_backup = catalog + ".bak-" + suffix;
      CAIRN_RETURN_IF_ERROR(Rename(catalog + part, report.catalog_backup + part));
    }
  }
  std::string cache = dir + "/cache";
  if (HasFiles(cache)) {
    report.cache_backup = cache + ".bak-" + suffix;
    CAIRN_RETURN_IF_ERROR(Rename(cache, report.cache_backup));
    if (::mkdir(cache.c_str(), 0700) != 0) return Status::FromErrno(fmt::format("mkdir {}", cache), errno);
  }
  // The root directory belongs to the archive's owner, as at mkfs, until a member table says otherwise.
  // Marked unfinished from its first commit on (a recover that finishes clears it): an empty
  // catalog that mounted would take every disk for free space.
  auto created = Catalog::Create(catalog, owner.st_uid, owner.st_gid, NowNs(), {{kRecoverUnfinishedMeta, "1"}});
  if (!created.ok()) return created.status();
  CAIRN_RETURN_IF_ERROR(CarryFromOldCatalog(report, **created));
  CAIRN_RETURN_IF_ERROR((*created)->FlushDurably());
  CAIRN_RETURN_IF_ERROR(MakeArchivePrivate(dir));  // the new catalog is 0600 while recover pauses or fails
  return lock;
}

// Undoes SetAside when the archive then refuses to open (its disks do not match cairn.conf,
// say): the new catalog goes, and what was set aside comes back, as the refusal found it.
Status PutBack(const std::string& dir, const RecoverReport& report) {
  auto lock = ArchiveLock::Acquire(dir);  // SetAside's went with the archive that did not open
  if (!lock.ok()) return lock.status();
  std::string catalog = dir + "/catalog.db";
  for (const char* part : {"", "-wal", "-shm"}) {
    if (::unlink((catalog + part).c_str()) != 0 && errno != ENOENT) {
      return Status::FromErrno(fmt::format("remove {}{}", catalog, part), errno);
    }
  }
  if (!report.catalog_backup.empty()) {
    for (const char* part : {"", "-wal", "-shm"}) {
      if (Exists(report.catalog_backup + part)) CAIRN_RETURN_IF_ERROR(Rename(report.catalog_backup + part, catalog + part));
    }
  }
  if (!report.cache_backup.empty()) {
    std::string cache = dir + "/cache";
    if (::rmdir(cache.c_str()) != 0) return Status::FromErrno(fmt::format("remove {}", cache), errno);
    CAIRN_RETURN_IF_ERROR(Rename(report.cache_backup, cache));
  }
  return Status::OK();
}

// For tests: with CAIRN_TEST_RECOVER_PAUSE naming a FIFO, recover stops between making the
// new catalog and opening the archive: it opens the FIFO for reading (the test's open for
// writing then returns) and goes on when the test closes its end.
Status PauseForTest() {
  const char* fifo = std::getenv("CAIRN_TEST_RECOVER_PAUSE");
  if (fifo == nullptr) return Status::OK();
  int fd = ::open(fifo, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(fmt::format("CAIRN_TEST_RECOVER_PAUSE {}", fifo), errno);
  char byte;
  ssize_t n;
  while ((n = ::read(fd, &byte, 1)) > 0 || (n < 0 && errno == EINTR)) {
  }
  ::close(fd);
  return Status::OK();
}

struct Newest {
  uint64_t extent = 0;
  MemberNode node;
};

// The newest record of a segment: its data, or that it became a hole.
struct Placed {
  uint64_t extent = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  bool hole = false;
};

// What the member tables say, newest version of everything.
struct Versions {
  std::map<uint64_t, Newest> files;                          // by inode
  std::map<std::string, Newest> directories;                 // by path
  std::map<std::pair<uint64_t, uint64_t>, Placed> segments;  // by (inode, index)
  std::map<uint64_t, ExtentRecord> records;  // by the id found: what the catalog gets (rewritten ones differ)
  std::set<uint64_t> one_copy;               // ids found that were rewritten as one copy (Rewrite)
  uint64_t max_ino = kRootInode;
  uint64_t max_generation = 0;
  bool damage = false;  // some extent could not be read: a segment not found may be lost, not a hole
};

template <typename Key>
void KeepNewest(std::map<Key, Newest>& map, const Key& key, uint64_t extent, const MemberNode& node) {
  Newest& slot = map[key];
  if (extent > slot.extent) slot = {extent, node};
}

// Makes the space of every chunk found used, so rewriting an extent cannot overwrite one.
// REQUIRES: catalog mutex held.
void ReserveFoundChunks(Archive& archive, const ExtentScan& scan, RecoverReport& report) {
  for (const auto& [id, found] : scan.extents) {
    for (const ChunkPlacement& chunk : found.record.chunks) {
      if (chunk.disk == kNoDisk) continue;
      Status st = archive.extents().MarkChunkUsed(chunk);
      if (!st.ok()) report.lost.push_back(fmt::format("extent {} on disk {}: {}", id, chunk.disk, st.message()));
    }
  }
  archive.extents().ReserveExtentIds(scan.max_extent_id);
}

// How far above the highest ids found new ones start when part of the disks could not be read
// and the old catalog does not say how far it numbered (ReserveFoundIds, InodeFloor).
constexpr uint64_t kUnseenIdGap = uint64_t{1} << 32;

// Reserves the space of every chunk found (ReserveFoundChunks). Returns whether the old
// catalog numbered extents at least as far as the disks show (CarryFromOldCatalog gave the new
// one its floors, inode numbers included). When it did not and part of the disks was not
// scanned (a disk missing, a range unreadable, a header damaged), that part may hold extents
// numbered above every one found: extent ids are reserved up to kUnseenIdGap above those found,
// so that none made later shares an id with what is there (a later recover that reads it takes
// the newest version by extent id).
Result<bool> ReserveFoundIds(Archive& archive, const ExtentScan& scan, RecoverReport& report) {
  std::lock_guard lock(archive.catalog_mutex());
  auto carried = archive.catalog().MaxExtentIdEverUsed();
  if (!carried.ok()) return carried.status();
  ReserveFoundChunks(archive, scan, report);
  bool floors_hold = *carried > 0 && *carried >= scan.max_extent_id;
  if (!floors_hold && !scan.problems.empty()) archive.extents().ReserveExtentIds(scan.max_extent_id + kUnseenIdGap);
  return floors_hold;
}

// The highest inode number that may be in use: above those found by kUnseenIdGap when the old
// catalog's floors do not hold and part of the disks or of the member tables could not be read
// (a file found there later must not share its number with one made now), else the old
// catalog's (or 0). Notes a gap.
Result<uint64_t> InodeFloor(Catalog& catalog, const ExtentScan& scan, const Versions& versions, bool floors_hold,
                            RecoverReport& report) {
  auto carried = catalog.MaxInoEverUsed();
  if (!carried.ok()) return carried.status();
  if (floors_hold || (scan.problems.empty() && !versions.damage)) return *carried;
  report.notes.push_back(fmt::format("part of the disks could not be read, and the old catalog is missing, does not "
                                     "read or is behind the disks: new {} start {} above those found",
                                     scan.problems.empty() ? "inode numbers" : "extent ids and inode numbers",
                                     kUnseenIdGap));
  return std::max(*carried, versions.max_ino + kUnseenIdGap);
}

// `stamp` (a policy stamp) with raid=none.
std::string OneCopyStamp(const std::string& stamp) {
  std::istringstream words(stamp);
  std::string out;
  for (std::string word; words >> word;) out += (out.empty() ? "" : " ") + (word.starts_with("raid=") ? "raid=none" : word);
  return out;
}

// An extent with chunks not found, read from the others, written again whole (new chunks,
// new id, same payload and member table, its own format version) and synced, in the disk
// group of the chunks found. `one_copy`: as raid=none, when the disks left cannot hold its
// redundancy (its files' layout then says so: the reconciler restores it once they can).
Result<ExtentRecord> Rewrite(Archive& archive, const FoundExtent& found, std::span<const uint8_t> payload,
                             bool one_copy) {
  const ExtentHeader& h = found.header;
  auto survivor = std::find_if(found.record.chunks.begin(), found.record.chunks.end(),
                               [](const ChunkPlacement& chunk) { return chunk.disk != kNoDisk; });
  std::string group = survivor != found.record.chunks.end() ? archive.group_of(survivor->disk).name() : "";
  ExtentEncoding encoding{h.policy_stamp, h.redundancy, h.chain_stamp, h.logical_length, h.members_length, group};
  encoding.format_version = h.version;
  if (one_copy) {
    encoding.policy_stamp = OneCopyStamp(h.policy_stamp);
    encoding.redundancy = Redundancy{Redundancy::Scheme::kNone, 1, 0, h.redundancy.idr_scramble, h.redundancy.checksum};
  }
  // An encrypted payload is bound to its extent's id: sealed again for the new one.
  std::vector<uint8_t> resealed;
  auto chain = TransformChain::FromStamp(h.chain_stamp);
  if (chain.ok() && chain->needs_key()) {
    auto logical = LogicalPayload(archive, found.record, h.inode, {payload.begin(), payload.end()});
    auto key = archive.file_keys().ForReading(h.inode);
    if (!logical.ok()) return logical.status();
    if (!key.ok()) return key.status();
    auto id = archive.extents().NewExtentId();
    if (!id.ok()) return id.status();
    encoding.extent_id = *id;
    auto sealed = chain->Encode(std::move(*logical), SealContext{archive.id(), h.inode, encoding.extent_id, (*key)->bytes()});
    if (!sealed.ok()) return sealed.status();
    resealed = std::move(*sealed);
    payload = resealed;
  }
  auto record = archive.extents().WriteExtentToDisk(h.kind, h.inode, h.file_offset, payload, encoding);
  if (!record.ok()) return record.status();
  for (const ChunkPlacement& chunk : record->chunks) CAIRN_RETURN_IF_ERROR(archive.extents().SyncDisk(chunk.disk));
  return record;
}

// Step 2: reads the member table of every extent found. NotSupported when an extent's
// transform is not installed: its files are there, this cairn cannot read them.
Result<Versions> ReadMemberTables(Archive& archive, const ExtentScan& scan, RecoverReport& report,
                                  const RecoverOptions& options) {
  Versions v;
  v.damage = !scan.problems.empty();
  uint64_t done = 0;
  for (const auto& [id, found] : scan.extents) {
    if (options.progress && ++done % 256 == 0) {
      options.progress(fmt::format("read {} of {} extents", done, scan.extents.size()));
    }
    std::string where = fmt::format("extent {} ({})", id, found.where);
    if (found.header.members_length == 0) {
      report.lost.push_back(fmt::format("{}: format v{} has no member table; its data cannot be placed", where,
                                        found.header.version));
      continue;
    }
    auto payload = archive.extents().ReadExtentPayload(found.record);
    v.records[id] = found.record;
    const bool readable = payload.ok();
    if (payload.ok() && !found.missing.empty()) {  // readable from the other chunks
      auto rewritten = Rewrite(archive, found, *payload, false);
      if (rewritten.ok()) {
        report.notes.push_back(fmt::format("{}: chunk(s) {} not found; rewritten from the others as extent {}", where,
                                           found.missing, rewritten->id));
        v.records[id] = *rewritten;
      } else if (rewritten.status().IsNoSpace() && (rewritten = Rewrite(archive, found, *payload, true)).ok()) {
        // Kept, though with less redundancy than it had, rather than lost for want of disks.
        report.notes.push_back(fmt::format("{}: chunk(s) {} not found, and the disks left cannot hold it as {}; "
                                           "rewritten as one copy, extent {} (the reconciler restores its "
                                           "redundancy once they can)",
                                           where, found.missing, StampFields(found.header.policy_stamp)["raid"],
                                           rewritten->id));
        v.records[id] = *rewritten;
        v.one_copy.insert(id);
      } else {
        auto message = fmt::format("chunk(s) {} not found, and rewriting it from the others failed: {}",
                                   found.missing, rewritten.status().message());
        payload = rewritten.status().code() == Status::Code::kNotSupported ? Status::NotSupported(message)
                                                                            : Status::IOError(message);
      }
    }
    if (!readable && !found.missing.empty()) {
      payload = Status::NotFound(fmt::format("chunk(s) {} of {} not found on any disk, and the others do not "
                                             "suffice: {}", found.missing, found.record.chunks.size(),
                                             payload.status().message()));
    }
    auto logical = payload.ok() ? LogicalPayload(archive, found.record, found.header.inode, std::move(*payload)) : payload;
    if (!logical.ok() && logical.status().code() == Status::Code::kNotSupported) {
      return Status::NotSupported(fmt::format("{}: {}; install that plugin (see cairn plugins) or make that master key "
                                              "available (cairn key list), and run cairn recover --force again",
                                              where, logical.status().message()));
    }
    auto table = logical.ok() ? DecodeMemberTable(std::span(*logical).last(found.header.members_length),
                                                                found.header.version, where)
                              : Result<MemberTable>(logical.status());
    if (!table.ok()) {
      report.lost.push_back(fmt::format("{}: unreadable, skipped: {}", where, table.status().message()));
      v.damage = true;
      continue;
    }
    uint64_t data_length = found.record.logical_length - found.header.members_length;
    for (const MemberNode& node : table->nodes) {
      v.max_ino = std::max(v.max_ino, node.ino);
      v.max_generation = std::max(v.max_generation, node.generation);
      if (S_ISDIR(node.mode)) {
        for (const std::string& path : node.paths) KeepNewest(v.directories, path, id, node);
        continue;
      }
      KeepNewest(v.files, node.ino, id, node);
      for (const MemberSegment& s : node.segments) {
        if (s.offset + s.length > data_length || s.offset + s.length < s.offset) {
          report.lost.push_back(fmt::format("{}: segment {} of inode {} passes the end of the data", where, s.index,
                                            node.ino));
          continue;
        }
        Placed& slot = v.segments[{node.ino, s.index}];
        if (id > slot.extent) slot = {id, s.offset, s.length, false};
      }
      uint64_t segment_count = SegmentCountOf(node);
      for (const MemberHoleRun& run : node.holes) {
        if (run.first > segment_count || run.count > segment_count - run.first) {
          report.lost.push_back(fmt::format("{}: holes {} to {} of inode {} pass the end of the file", where,
                                            run.first, run.first + run.count - 1, node.ino));
          continue;
        }
        for (uint64_t index = run.first; index < run.first + run.count; index++) {
          Placed& slot = v.segments[{node.ino, index}];
          if (id > slot.extent) slot = {id, 0, 0, true};
        }
      }
    }
  }
  return v;
}

std::string Parent(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string Base(const std::string& path) { return path.substr(path.rfind('/') + 1); }

Status RestoreXattrs(Catalog& catalog, uint64_t ino, const MemberNode& node) {
  for (const auto& [name, value] : node.xattrs) {
    CAIRN_RETURN_IF_ERROR(catalog.SetXattr(
        ino, name, std::span(reinterpret_cast<const uint8_t*>(value.data()), value.size())));
  }
  return Status::OK();
}

void CopyAttributes(const MemberNode& node, InodeRecord& r) {
  r.mode = node.mode;
  r.uid = node.uid;
  r.gid = node.gid;
  r.atime_ns = node.atime_ns;
  r.mtime_ns = node.mtime_ns;
  r.ctime_ns = node.ctime_ns;
}

// Step 3 and 4: the catalog, from the newest versions. REQUIRES: catalog mutex held.
class CatalogWriter {
 public:
  // `max_extent_id`: the highest id found on the disks or handed out since (Rewrite);
  // `max_ino`: the highest inode number that may be in use, above those found (IdFloors).
  CatalogWriter(Catalog& catalog, const ExtentScan& scan, const Versions& v, uint64_t max_extent_id,
                uint64_t max_ino, RecoverReport& report)
      : catalog_(catalog), scan_(scan), v_(v), max_extent_id_(max_extent_id), max_ino_(max_ino), report_(report) {}

  Status Run() {
    // Inodes restored now and made later get generations above those seen: a file handle
    // of a lost inode (NFS) never matches a new file with its number.
    CAIRN_RETURN_IF_ERROR(catalog_.RaiseEpoch(v_.max_generation));
    // The inodes of the data keys kept from the old catalog are taken, found or not: a new
    // file given one of their numbers would be sealed with that key, under its grants.
    auto keys = catalog_.AllFileKeys();
    if (!keys.ok()) return keys.status();
    for (const FileKeyRecord& key : *keys) max_keyed_ino_ = std::max(max_keyed_ino_, key.ino);
    ChooseNames();
    CAIRN_RETURN_IF_ERROR(WriteDirectories());
    for (const auto& [ino, names] : names_) CAIRN_RETURN_IF_ERROR(WriteFile(ino, names));
    for (auto& [id, refs] : refs_) {
      ExtentRecord record = v_.records.at(id);
      record.refs = refs;
      CAIRN_RETURN_IF_ERROR(catalog_.InsertExtent(record));
    }
    report_.extents_used = refs_.size();
    // Rewrite() handed out ids above those found: the archive's highest covers both.
    return catalog_.RaiseIdFloors(std::max(v_.max_ino, next_ino_ - 1), max_extent_id_);
  }

 private:
  // Newest file first: an older file's name that a newer one holds is lost.
  void ChooseNames() {
    std::vector<std::pair<uint64_t, uint64_t>> order;  // (extent, ino)
    for (const auto& [ino, newest] : v_.files) order.emplace_back(newest.extent, ino);
    std::sort(order.rbegin(), order.rend());
    std::map<std::string, uint64_t> holder;
    for (const auto& [extent, ino] : order) {
      for (const std::string& path : v_.files.at(ino).node.paths) {
        auto [it, fresh] = holder.try_emplace(path, ino);
        if (!fresh) {
          report_.lost.push_back(fmt::format("'{}': inode {} (extent {}) is older than inode {} there; not recovered",
                                             path, ino, extent, it->second));
        }
      }
    }
    for (const auto& [path, ino] : holder) {
      for (std::string dir = Parent(path); !dir.empty(); dir = Parent(dir)) directories_.insert(dir);
    }
    for (const auto& [path, newest] : v_.directories) {
      if (newest.node.entries_truncated) {
        report_.lost.push_back(fmt::format("'{}/': had more entries without data (symlinks, empty files, "
                                           "subdirectories, ...) than were recorded; some may be missing", path));
      }
    }
    for (const auto& [path, newest] : v_.directories) {  // empty ones too, unless a newer file is there
      auto file = holder.find(path);
      if (path.empty() || (file != holder.end() && v_.files.at(file->second).extent > newest.extent)) continue;
      for (std::string dir = path; !dir.empty(); dir = Parent(dir)) directories_.insert(dir);
    }
    for (const auto& [path, ino] : holder) {
      if (directories_.contains(path)) {
        report_.lost.push_back(fmt::format("'{}': inode {} is a file where newer files need a directory; "
                                           "not recovered", path, ino));
      } else {
        names_[ino].push_back(path);
      }
    }
    for (const auto& [ino, newest] : v_.files) {
      if (newest.node.paths.empty()) {
        report_.lost.push_back(fmt::format("inode {} (extent {}): had no name when written (deleted, still open)",
                                           ino, newest.extent));
      }
    }
    for (const auto& [ino, names] : names_) used_inos_.insert(ino);
    next_ino_ = std::max({v_.max_ino, max_keyed_ino_, max_ino_}) + 1;
  }

  Status WriteDirectories() {
    std::map<std::string, uint64_t> subdirs;
    for (const std::string& dir : directories_) subdirs[Parent(dir)]++;
    auto root = catalog_.GetInode(kRootInode);
    if (!root.ok()) return root.status();
    if (auto it = v_.directories.find(""); it != v_.directories.end()) {
      CopyAttributes(it->second.node, *root);
      CAIRN_RETURN_IF_ERROR(RestoreXattrs(catalog_, kRootInode, it->second.node));
    }
    root->nlink = 2 + subdirs[""];
    CAIRN_RETURN_IF_ERROR(catalog_.UpdateInode(*root));
    dir_ino_[""] = kRootInode;
    int64_t now = NowNs();
    for (const std::string& dir : directories_) {  // parents sort before their children
      InodeRecord r;
      auto recorded = v_.directories.find(dir);
      bool known = recorded != v_.directories.end();
      r.ino = known && !used_inos_.contains(recorded->second.node.ino) ? recorded->second.node.ino : next_ino_++;
      used_inos_.insert(r.ino);
      if (known) {
        CopyAttributes(recorded->second.node, r);
      } else {
        r.mode = S_IFDIR | 0755;
        r.atime_ns = r.mtime_ns = r.ctime_ns = now;
        report_.directories_guessed++;
      }
      r.nlink = 2 + subdirs[dir];
      CAIRN_RETURN_IF_ERROR(catalog_.RestoreInode(r));
      CAIRN_RETURN_IF_ERROR(catalog_.InsertEntry(dir_ino_.at(Parent(dir)), Base(dir), r.ino));
      if (known) CAIRN_RETURN_IF_ERROR(RestoreXattrs(catalog_, r.ino, recorded->second.node));
      dir_ino_[dir] = r.ino;
      report_.directories++;
    }
    return Status::OK();
  }

  Status WriteFile(uint64_t ino, const std::vector<std::string>& names) {
    const Newest& newest = v_.files.at(ino);
    const MemberNode& node = newest.node;
    InodeRecord r;
    r.ino = ino;
    CopyAttributes(node, r);
    r.nlink = names.size();
    r.size = node.size;
    r.rdev = node.rdev;
    r.symlink = node.symlink;
    r.segment_size = node.segment_size;
    // Data rewritten as one copy makes the whole file's layout raid=none: not its policy, so
    // the reconciler writes it again as the policy asks.
    bool one_copy = false;
    for (auto it = v_.segments.lower_bound({ino, 0}); it != v_.segments.end() && it->first.first == ino; ++it) {
      one_copy = one_copy || (!it->second.hole && v_.one_copy.contains(it->second.extent));
    }
    if (!node.segments.empty() || !node.holes.empty()) {  // else an entry of a directory: no policy of its own
      const std::string& stamp = scan_.extents.at(newest.extent).header.policy_stamp;
      auto layout = catalog_.InternLayout(one_copy ? OneCopyStamp(stamp) : stamp);
      if (!layout.ok()) return layout.status();
      r.layout_id = *layout;
    }
    CAIRN_RETURN_IF_ERROR(catalog_.RestoreInode(r));
    if (one_copy) CAIRN_RETURN_IF_ERROR(catalog_.QueuePolicyCheck(ino));
    for (const std::string& path : names) {
      CAIRN_RETURN_IF_ERROR(catalog_.InsertEntry(dir_ino_.at(Parent(path)), Base(path), ino));
    }
    CAIRN_RETURN_IF_ERROR(RestoreXattrs(catalog_, ino, node));
    bool has_data = S_ISREG(node.mode) && node.segment_size > 0;
    uint64_t count = has_data ? SegmentCountOf(node) : 0;
    std::string missing;
    for (uint64_t index = 0; index < count; index++) {
      auto placed = v_.segments.find({ino, index});
      if (placed == v_.segments.end()) {  // all zeros when written (a hole), or in an extent that was lost
        if (v_.damage) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", index);
        CAIRN_RETURN_IF_ERROR(catalog_.PutSegment({ino, index, kHoleExtent, 0, 0, false}));
        continue;
      }
      const Placed& newest_segment = placed->second;
      uint64_t rest = node.size - index * node.segment_size;
      uint64_t length = std::min(newest_segment.hole ? node.segment_size : newest_segment.length, rest);
      CAIRN_RETURN_IF_ERROR(catalog_.PutSegment(PlacedSegment(ino, index, newest_segment.hole,
                                                              v_.records.at(newest_segment.extent).id,
                                                              newest_segment.offset, length, false)));
      refs_[newest_segment.extent]++;
      if (!newest_segment.hole) report_.bytes += length;
    }
    if (!missing.empty()) {
      report_.lost.push_back(fmt::format("'{}': segment(s) {} not found (holes, or data in a damaged extent); "
                                         "they read as zeros", names.front(), missing));
    }
    report_.files++;
    return Status::OK();
  }

  Catalog& catalog_;
  const ExtentScan& scan_;
  const Versions& v_;
  const uint64_t max_extent_id_;
  const uint64_t max_ino_;
  RecoverReport& report_;
  std::map<uint64_t, std::vector<std::string>> names_;  // file -> names it gets
  std::set<std::string> directories_;                    // paths, without the root
  std::map<std::string, uint64_t> dir_ino_;
  std::set<uint64_t> used_inos_;
  uint64_t next_ino_ = kRootInode + 1;
  uint64_t max_keyed_ino_ = 0;  // the highest inode of a data key kept from the old catalog
  std::map<uint64_t, uint64_t> refs_;  // extent -> segments in it
};

}  // namespace

Result<RecoverReport> RecoverCatalog(const std::string& dir, const RecoverOptions& options) {
  RecoverReport report;
  auto archive_lock = SetAside(dir, options.force, report);
  if (!archive_lock.ok()) return archive_lock.status();
  CAIRN_RETURN_IF_ERROR(PauseForTest());
  Archive::OpenOptions open;
  open.degraded = true;         // recover what the disks that are there hold
  open.repair_on_read = false;  // read only; cairn scrub repairs afterwards
  auto archive = Archive::Open(dir, open, std::move(*archive_lock));
  if (!archive.ok()) {
    Status put_back = PutBack(dir, report);
    if (!put_back.ok()) LogError("recover: cannot leave the archive as it was found: {}", put_back.message());
    return archive.status();
  }
  ExtentScan scan = ScanDisks(**archive, [&](size_t disk, uint64_t at) {
    if (options.progress && at % (256ull << 20) < (1 << 20)) {
      options.progress(fmt::format("disk {}: scanned {} MiB", disk, at >> 20));
    }
  });
  report.chunks_found = scan.chunks;
  report.extents_found = scan.extents.size();
  report.lost = scan.problems;
  auto floors_hold = ReserveFoundIds(**archive, scan, report);
  if (!floors_hold.ok()) return floors_hold.status();
  auto read = ReadMemberTables(**archive, scan, report, options);
  if (!read.ok()) return read.status();
  Versions versions = std::move(*read);
  std::lock_guard lock((*archive)->catalog_mutex());
  Catalog& catalog = (*archive)->catalog();
  auto max_ino = InodeFloor(catalog, scan, versions, *floors_hold, report);
  if (!max_ino.ok()) return max_ino.status();
  CAIRN_RETURN_IF_ERROR(InTransaction(catalog, [&] {
    uint64_t max_extent_id = (*archive)->extents().MaxExtentIdUsed();
    CAIRN_RETURN_IF_ERROR(CatalogWriter(catalog, scan, versions, max_extent_id, *max_ino, report).Run());
    return catalog.SetMeta(kRecoverUnfinishedMeta, "");
  }));
  CAIRN_RETURN_IF_ERROR(catalog.FlushDurably());
  return report;
}

}  // namespace cairn
