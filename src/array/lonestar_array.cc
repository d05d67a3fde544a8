#include "array/lonestar_array.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <future>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "array/peeling_decoder.h"
#include "redundancy/parity_math.h"
#include "util/coding.h"
#include "util/log.h"

namespace cairn {
namespace {

constexpr const char* kRoleNames[kPromiseRoles] = {"data", "hP", "vP", "vhP"};

// The part of `inner` (a sub-range of `outer`) within a buffer holding `outer`.
template <typename T>
std::span<T> Slice(std::span<T> buffer, const ByteRange& outer, const ByteRange& inner) {
  return buffer.subspan(inner.offset - outer.offset, inner.length);
}

// Bytes [begin, end) of `pieces` taken as one run, where they are.
std::vector<std::span<const uint8_t>> SubPieces(BytePieces pieces, uint64_t begin, uint64_t end) {
  std::vector<std::span<const uint8_t>> out;
  uint64_t at = 0;
  for (std::span<const uint8_t> piece : pieces) {
    uint64_t from = std::max(begin, at);
    uint64_t to = std::min(end, at + piece.size());
    if (from < to) out.push_back(piece.subspan(from - at, to - from));
    at += piece.size();
  }
  return out;
}

std::optional<ByteRange> Intersect(const ByteRange& a, const ByteRange& b) {
  uint64_t begin = std::max(a.offset, b.offset);
  uint64_t end = std::min(a.end(), b.end());
  if (begin >= end) return std::nullopt;
  return ByteRange{begin, end - begin};
}

// The parity check numbers a grid's parity groups hPGs first: group i < hpg_count() is hPG i,
// the others are vPG i - hpg_count().
std::span<const uint32_t> GroupMembers(const GridGeometry& g, uint32_t group) {
  return group < g.hpg_count() ? g.HpgMembers(group) : g.VpgMembers(group - g.hpg_count());
}

std::string GroupName(const GridGeometry& g, uint32_t group) {
  return group < g.hpg_count() ? fmt::format("hPG {}", group) : fmt::format("vPG {}", group - g.hpg_count());
}

// "a", "a and b", "a, b and c".
std::string JoinAnd(const std::vector<std::string>& items) {
  std::string joined;
  for (size_t i = 0; i < items.size(); i++) {
    joined += i == 0 ? "" : i + 1 == items.size() ? " and " : ", ";
    joined += items[i];
  }
  return joined;
}

// The one member that explains a block of `length` bytes at `begin` of a window where the
// checked groups `wrong` (ascending, not empty) do not XOR to zero and the other checked ones
// do; `sums` holds each group's XOR over the window. A damaged member makes every group it is
// in wrong, by its own error, and no other group: so it is the member whose checked groups
// are exactly `wrong`, and those all show the same error there. nullopt when no member or more
// than one is such: two or more members are damaged in the block (or an unchecked group hides
// which one), and a repair could only make the wrong one add up.
std::optional<uint32_t> Culprit(const GridGeometry& g, const std::vector<uint32_t>& wrong,
                                const std::vector<bool>& checked, const std::vector<ParityBuffer>& sums, uint64_t begin,
                                uint64_t length) {
  std::optional<uint32_t> found;
  for (uint32_t m : GroupMembers(g, wrong.front())) {
    std::vector<uint32_t> groups;  // those of m that were checked, ascending
    if (auto h = g.hpg(m); h && checked[*h]) groups.push_back(*h);
    if (uint32_t v = g.hpg_count() + g.vpg(m); checked[v]) groups.push_back(v);
    if (groups != wrong) continue;
    if (found) return std::nullopt;
    found = m;
  }
  if (!found) return std::nullopt;
  auto error = [&](uint32_t group) { return std::span<const uint8_t>(sums[group]).subspan(begin, length); };
  for (uint32_t group : wrong) {
    if (!std::ranges::equal(error(group), error(wrong.front()))) return std::nullopt;
  }
  return found;
}

}  // namespace

struct LoneStarArray::Pending {
  Promise promise;                                    // as journaled
  std::array<uint32_t, kPromiseRoles> positions{};    // grid positions of promise.disks
  std::shared_ptr<const std::vector<uint8_t>> delta;  // null: only in the journal (delayed)
  std::array<bool, kPromiseRoles> applied{};          // on the disk now (data: written)
  bool data_synced = false;                           // delayed: d synced and marked finished
  ByteRange range() const { return {promise.offset, promise.length}; }
};

class LoneStarArray::DefectWatch {
 public:
  explicit DefectWatch(LoneStarArray& array) : array_(array) {
    std::lock_guard lock(array_.mutex_);
    array_.defect_watches_.push_back(this);
  }
  ~DefectWatch() {
    std::lock_guard lock(array_.mutex_);
    std::erase(array_.defect_watches_, this);
  }
  DefectWatch(const DefectWatch&) = delete;
  DefectWatch& operator=(const DefectWatch&) = delete;

  std::map<uint32_t, RangeSet> added;  // by position; guarded by the array's mutex_

 private:
  LoneStarArray& array_;
};

// A member as a Disk for its chunk store (see View()).
class MemberView final : public Disk {
 public:
  MemberView(LoneStarArray& array, uint32_t position, Disk& device, uint64_t data_start, uint64_t data_end, bool bucket)
      : array_(array), position_(position), device_(device), data_start_(data_start), data_end_(data_end),
        bucket_(bucket) {}

  Status ReadAt(uint64_t offset, std::span<uint8_t> dst) override {
    if (offset + dst.size() <= data_start_) return device_.ReadAt(offset, dst);
    if (offset < data_start_) {
      CAIRN_RETURN_IF_ERROR(device_.ReadAt(offset, dst.first(data_start_ - offset)));
      return array_.Read(position_, data_start_, dst.subspan(data_start_ - offset));
    }
    return array_.Read(position_, offset, dst);
  }
  Status WriteAt(uint64_t offset, std::span<const uint8_t> src) override {
    const std::span<const uint8_t> whole[] = {src};
    return WriteGatherAt(offset, whole);
  }
  // An extent's header, payload and padding go to the array as they are, not joined.
  Status WriteGatherAt(uint64_t offset, BytePieces pieces) override {
    if (offset + TotalSize(pieces) <= data_start_) return device_.WriteGatherAt(offset, pieces);  // the superblock
    if (!bucket_ || offset < data_start_) {
      return Status::NotSupported(fmt::format("{}: a parity disk of a lonestar group holds no chunks", Name()));
    }
    return array_.Write(position_, offset, pieces);
  }
  Status ReadRebuilt(uint64_t offset, std::span<uint8_t> dst, unsigned way) override {
    if (!bucket_ || offset < data_start_) return Disk::ReadRebuilt(offset, dst, way);
    return array_.ReadRebuilt(position_, offset, dst, way);
  }
  Status Rewrite(uint64_t offset, std::span<const uint8_t> src) override {
    if (!bucket_ || offset < data_start_) return WriteAt(offset, src);
    return array_.Rewrite(position_, offset, src);
  }
  Status Sync() override { return bucket_ ? array_.Sync(position_) : Status::OK(); }
  // Freed bytes stay as they are: the parity covers them, so nothing needs updating.
  Status Discard(uint64_t, uint64_t) override { return Status::OK(); }
  uint64_t Size() const override { return std::max(device_.Size(), data_end_); }
  uint32_t SectorSize() const override { return device_.SectorSize(); }
  const std::string& Name() const override { return device_.Name(); }

 private:
  LoneStarArray& array_;
  const uint32_t position_;
  Disk& device_;
  const uint64_t data_start_;
  const uint64_t data_end_;
  const bool bucket_;
};

LoneStarArray::LoneStarArray(Options options, std::vector<Member> members)
    : options_(std::move(options)),
      members_(std::move(members)),
      high_water_(std::make_unique<std::atomic<uint64_t>[]>(members_.size())),
      written_end_(std::make_unique<std::atomic<uint64_t>[]>(members_.size())),
      sync_mutexes_(std::make_unique<std::mutex[]>(members_.size())) {}

Result<std::unique_ptr<LoneStarArray>> LoneStarArray::Open(Options options, std::vector<Member> members) {
  const GridGeometry& g = options.geometry;
  if (members.size() != g.disk_count()) {
    return Status::InvalidArgument(fmt::format("lonestar group {} ({}) needs {} disks, not {}", options.name,
                                               g.ToString(), g.disk_count(), members.size()));
  }
  if (options.data_end <= options.data_start) {
    return Status::InvalidArgument(fmt::format("lonestar group {}: its disks have no room for data", options.name));
  }
  std::unique_ptr<LoneStarArray> array(new LoneStarArray(std::move(options), std::move(members)));
  const Options& o = array->options_;
  PromiseJournal::State replayed;
  bool rederive = false;
  if (o.create) {
    auto journal = PromiseJournal::Create(o.journal_path, o.identity);
    if (!journal.ok()) return journal.status();
    array->journal_ = std::move(*journal);
    CAIRN_RETURN_IF_ERROR(array->journal_->RaiseEpoch(o.catalog_epoch));
  } else {
    auto journal = PromiseJournal::Open(o.journal_path, o.identity);
    if (journal.ok() && (*journal)->epoch() < o.catalog_epoch) {
      journal = Status::Corruption(fmt::format("lonestar journal {} is older than the catalog (epoch {}, the catalog "
                                               "recorded {} when the group was last closed): an old copy put back",
                                               o.journal_path, (*journal)->epoch(), o.catalog_epoch));
    }
    if (journal.ok()) {
      replayed = (*journal)->state();
      array->journal_ = std::move(*journal);
    } else if (journal.status().IsNotFound() || journal.status().IsCorruption()) {
      std::string aside;
      if (!journal.status().IsNotFound()) {
        aside = fmt::format("{}.damaged-{}", o.journal_path, std::time(nullptr));
        if (std::rename(o.journal_path.c_str(), aside.c_str()) != 0) {
          return Status::FromErrno(fmt::format("lonestar group {}: set the damaged journal aside", o.name), errno);
        }
      }
      LogError("lonestar group {}: {}{}; the parity of the group cannot be trusted and is re-derived from its buckets "
               "(in the background of a mount, or by cairn rebuild; reads meanwhile use the buckets alone)",
               o.name, journal.status().message(), aside.empty() ? "" : fmt::format(" (kept as {})", aside));
      auto fresh = PromiseJournal::Create(o.journal_path, o.identity);
      if (!fresh.ok()) return fresh.status();
      array->journal_ = std::move(*fresh);
      CAIRN_RETURN_IF_ERROR(array->journal_->RaiseEpoch(o.catalog_epoch));
      rederive = true;
    } else {
      return journal.status();
    }
  }
  std::map<uint32_t, uint32_t> position_of;  // archive disk -> grid position
  std::vector<uint32_t> disks;
  for (uint32_t p = 0; p < array->members_.size(); p++) {
    position_of[array->members_[p].disk] = p;
    disks.push_back(array->members_[p].disk);
    auto mark = replayed.high_water.find(array->members_[p].disk);
    array->high_water_[p] = mark == replayed.high_water.end() ? o.data_end : std::max(mark->second, o.data_start);
    if (o.create) array->high_water_[p] = o.data_start;  // the disks of a new group hold nothing yet
    // Below its mark, an image reads as zeros past its last data too (a rebuild skips that).
    uint64_t mark_end = array->high_water_[p].load();
    array->written_end_[p] = std::max(o.data_start, array->members_[p].device->DataEnd(o.data_start, mark_end));
  }
  if (o.create) CAIRN_RETURN_IF_ERROR(array->journal_->RaiseHighWater(disks, o.data_start));
  for (const auto& [disk, ranges] : replayed.defects) {
    auto it = position_of.find(disk);
    if (it == position_of.end()) {
      return Status::Corruption(fmt::format("lonestar journal {}: a defect of disk {}, which is not in group {}",
                                            o.journal_path, disk, o.name));
    }
    array->defects_[it->second] = ranges;
  }
  ByteRange whole{o.data_start, o.data_end - o.data_start};
  for (uint32_t p = 0; p < g.disk_count(); p++) {
    bool parity = g.role(p) != DiskRole::kData;
    bool replaced = array->members_[p].replaced && !array->defects_.contains(p);
    if ((rederive && parity) || replaced) CAIRN_RETURN_IF_ERROR(array->AddDefect(p, whole));
  }
  CAIRN_RETURN_IF_ERROR(array->Recover(replayed));
  if (o.mode == ArrayWriteMode::kDelayed) array->flusher_ = std::thread([a = array.get()] { a->FlushWhenAsked(); });
  return array;
}

LoneStarArray::~LoneStarArray() {
  std::vector<uint32_t> buckets;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (const auto& [position, txns] : unsynced_) buckets.push_back(position);
  }
  flush_asked_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  for (uint32_t position : buckets) {
    Status st = Sync(position);
    if (!st.ok() && !halted_) LogError("lonestar group {}: {}", options_.name, st.message());
  }
  // A group closed cleanly has its parity up to date: the deltas would keep in the journal,
  // but the parity disks are awake now and a later open need not apply them.
  if (options_.mode == ArrayWriteMode::kDelayed && !halted_) {
    Status st = FlushParity();
    if (!st.ok()) LogError("lonestar group {}: {}", options_.name, st.message());
  }
  if (IoTotals io = io_totals(); io.bytes_written > 0) {
    LogInfo("lonestar group {}: {} bytes written to its buckets; its disks had {} bytes read and {} written for them "
            "and the parity since it was opened ({:.2f} bytes of disk I/O per byte)",
            options_.name, io.bytes_written, io.disk_bytes_read, io.disk_bytes_written,
            static_cast<double>(io.disk_bytes_read + io.disk_bytes_written) / io.bytes_written);
  }
}

Result<uint64_t> LoneStarArray::SealEpoch() {
  uint64_t epoch = journal_->epoch() + 1;
  CAIRN_RETURN_IF_ERROR(journal_->RaiseEpoch(epoch));
  return epoch;
}

Status LoneStarArray::Recover(const PromiseJournal::State& state) {
  std::map<uint32_t, uint32_t> position_of;
  for (uint32_t p = 0; p < members_.size(); p++) position_of[members_[p].disk] = p;
  std::vector<uint64_t> done;
  std::vector<std::pair<uint32_t, ByteRange>> undefined;
  std::vector<Pending> rolled_back;  // buckets whose write had not finished: back to their parity
  for (const auto& [txn, promise] : state.open) {
    Pending pending{promise};
    for (size_t role = 0; role < kPromiseRoles; role++) {
      auto it = position_of.find(promise.disks[role]);
      if (it == position_of.end()) {
        return Status::Corruption(fmt::format("lonestar journal {}: promise {} names disk {}, not in group {}",
                                              options_.journal_path, txn, promise.disks[role], options_.name));
      }
      pending.positions[role] = it->second;
    }
    ByteRange r = pending.range();
    bool keep = false;
    if (!promise.finished[kDataRole]) {
      // Direct: all four were being written, d stays and the parity follows it; unless a data
      // write over its range failed, which marks its parity durable (MarkParityDurable).
      bool parity_durable =
          std::any_of(promise.finished.begin() + 1, promise.finished.end(), [](bool f) { return f; });
      if (promise.mode == ArrayWriteMode::kDirect && !parity_durable) {
        for (size_t role = 1; role < kPromiseRoles; role++) undefined.emplace_back(pending.positions[role], r);
      } else {  // no parity was touched yet: d goes back to what its parity says (below)
        rolled_back.push_back(pending);
      }
    } else {
      pending.applied[kDataRole] = true;
      pending.data_synced = true;
      // A delayed promise's delta is still owed to every parity not finished (reads and
      // FlushParity apply it); one whose update had started is rebuilt first, owing it still.
      keep = promise.mode == ArrayWriteMode::kDelayed && promise.has_delta;
      for (size_t role = 1; role < kPromiseRoles; role++) {
        pending.applied[role] = promise.finished[role];
        if (!promise.finished[role] && (!keep || promise.started[role])) undefined.emplace_back(pending.positions[role], r);
      }
      keep = keep && !std::all_of(pending.applied.begin(), pending.applied.end(), [](bool a) { return a; });
    }
    if (keep) {
      delta_bytes_ += r.length;
      pending_.emplace(txn, std::move(pending));
    } else {
      done.push_back(txn);
    }
  }
  // Unless an earlier promise on the same units was updating that parity when the crash came
  // (its update follows its bucket's sync, so a later write can be under way meanwhile):
  // then d stays, and the parity follows it, as in direct mode.
  for (const Pending& p : rolled_back) {
    bool parity_undefined = std::any_of(undefined.begin(), undefined.end(), [&](const auto& u) {
      return std::find(p.positions.begin() + 1, p.positions.end(), u.first) != p.positions.end() &&
             Intersect(u.second, p.range());
    });
    if (!parity_undefined) {
      undefined.emplace_back(p.positions[kDataRole], p.range());
      continue;
    }
    for (size_t role = 1; role < kPromiseRoles; role++) undefined.emplace_back(p.positions[role], p.range());
  }
  for (const auto& [position, r] : undefined) CAIRN_RETURN_IF_ERROR(AddDefect(position, r));
  CAIRN_RETURN_IF_ERROR(journal_->Done(done));
  if (!undefined.empty()) {
    LogWarning("lonestar group {}: {} promise(s) were cut short by a crash; {} range(s) are rebuilt from their parity "
               "groups",
               options_.name, done.size(), undefined.size());
  }
  for (const auto& [position, r] : undefined) {
    if (members_[position].lost) continue;  // rebuilt with the rest of it once replaced
    Status st = RebuildRange(r, DefectWatch(*this));
    if (!st.ok()) LogError("lonestar group {}: {}", options_.name, st.message());
  }
  // Deltas a delayed write left behind, the group being in another mode now: nothing else
  // would apply them (reads of the parity add them, from the journal, meanwhile).
  if (options_.mode != ArrayWriteMode::kDelayed && pending_delta_bytes() > 0) {
    Status st = FlushParity();
    if (!st.ok()) LogError("lonestar group {}: the deltas a delayed write left stay owed: {}", options_.name, st.message());
  }
  return Status::OK();
}

std::unique_ptr<Disk> LoneStarArray::View(uint32_t position) {
  bool bucket = options_.geometry.role(position) == DiskRole::kData;
  return std::make_unique<MemberView>(*this, position, *members_[position].device, options_.data_start,
                                      options_.data_end, bucket);
}

Status LoneStarArray::Halted() const {
  if (!halted_) return Status::OK();
  return Status::IOError(fmt::format("lonestar group {}: stopped (a failure it could not record, or a test's crash "
                                     "point); a remount recovers it", options_.name));
}

bool LoneStarArray::Crash(std::string_view step) {
  if (options_.crash_point && options_.crash_point(step)) halted_ = true;
  return halted_;
}

Status LoneStarArray::DiskRead(uint32_t position, uint64_t offset, std::span<uint8_t> dst) {
  uint64_t end = written_end_[position];
  size_t stored = offset >= end ? 0 : static_cast<size_t>(std::min<uint64_t>(dst.size(), end - offset));
  std::fill(dst.begin() + stored, dst.end(), 0);
  if (stored == 0) return Status::OK();
  if (options_.observer) options_.observer->WillAccess(members_[position].disk, ArrayIoObserver::Access::kRead);
  disk_bytes_read_ += stored;
  return members_[position].device->ReadAt(offset, dst.first(stored));
}

Status LoneStarArray::DiskWrite(uint32_t position, uint64_t offset, BytePieces src) {
  uint64_t end = offset + TotalSize(src);
  if (end > high_water_[position]) CAIRN_RETURN_IF_ERROR(CoverWrites(std::span(&position, 1), end));
  for (uint64_t now = written_end_[position]; now < end && !written_end_[position].compare_exchange_weak(now, end);) {
  }
  if (options_.observer) options_.observer->WillAccess(members_[position].disk, ArrayIoObserver::Access::kWrite);
  disk_bytes_written_ += end - offset;
  return members_[position].device->WriteGatherAt(offset, src);
}

Status LoneStarArray::CoverWrites(std::span<const uint32_t> positions, uint64_t end) {
  std::vector<uint32_t> disks;
  for (uint32_t p : positions) {
    if (high_water_[p] < end) disks.push_back(members_[p].disk);
  }
  if (disks.empty()) return Status::OK();
  uint64_t steps = (end - options_.data_start + kHighWaterStep - 1) / kHighWaterStep;
  uint64_t mark = std::min(options_.data_end, options_.data_start + steps * kHighWaterStep);
  CAIRN_RETURN_IF_ERROR(journal_->RaiseHighWater(disks, mark));
  for (uint32_t p : positions) {
    for (uint64_t now = high_water_[p]; now < mark && !high_water_[p].compare_exchange_weak(now, mark);) {
    }
  }
  return Status::OK();
}

uint64_t LoneStarArray::WrittenEnd() const {
  uint64_t top = options_.data_start;
  for (size_t p = 0; p < members_.size(); p++) top = std::max<uint64_t>(top, written_end_[p]);
  return top;
}

ByteRange LoneStarArray::UnitsOf(uint64_t offset, uint64_t length) const {
  uint64_t first = (offset - options_.data_start) / kUnit;
  uint64_t last = (offset + length - options_.data_start + kUnit - 1) / kUnit;
  uint64_t begin = options_.data_start + first * kUnit;
  uint64_t end = std::min(options_.data_start + last * kUnit, options_.data_end);
  return {begin, end - begin};
}

std::set<uint32_t> LoneStarArray::ErasedFor(const ByteRange& r) {
  std::lock_guard lock(mutex_);
  std::set<uint32_t> erased;
  for (uint32_t p = 0; p < members_.size(); p++) {
    auto d = defects_.find(p);
    if (members_[p].lost || (d != defects_.end() && d->second.Overlaps(r))) erased.insert(p);
  }
  return erased;
}

Result<std::shared_ptr<const std::vector<uint8_t>>> LoneStarArray::DeltaOf(uint64_t txn) {
  {
    std::lock_guard lock(mutex_);
    auto it = pending_.find(txn);
    if (it != pending_.end() && it->second.delta) return it->second.delta;
  }
  auto loaded = journal_->LoadDelta(txn);
  if (!loaded.ok()) return loaded.status();
  return std::make_shared<const std::vector<uint8_t>>(std::move(*loaded));
}

Status LoneStarArray::ReadMember(uint32_t position, const ByteRange& r, ParityBuffer& out) {
  out.resize(r.length);
  CAIRN_RETURN_IF_ERROR(DiskRead(position, r.offset, out));
  return AddOwedDeltas(position, r, out);
}

Status LoneStarArray::AddOwedDeltas(uint32_t position, const ByteRange& r, std::span<uint8_t> bytes) {
  if (options_.geometry.role(position) == DiskRole::kData) return Status::OK();
  std::vector<std::pair<uint64_t, ByteRange>> owed;  // txn, its range
  {
    std::lock_guard lock(mutex_);
    for (const auto& [txn, p] : pending_) {
      if (!p.applied[kDataRole] || !Intersect(p.range(), r)) continue;
      for (size_t role = 1; role < kPromiseRoles; role++) {
        if (p.positions[role] == position && !p.applied[role]) owed.emplace_back(txn, p.range());
      }
    }
  }
  for (const auto& [txn, pr] : owed) {
    auto delta = DeltaOf(txn);
    if (!delta.ok()) return delta.status();
    ByteRange both = *Intersect(pr, r);
    XorInto(Slice(bytes, r, both), Slice(std::span<const uint8_t>(**delta), pr, both));
  }
  return Status::OK();
}

Status LoneStarArray::WriteMember(uint32_t position, const ByteRange& r, ParityBuffer seen) {
  // A parity disk holds what the group sees minus the deltas still owed to it (XOR: plus).
  CAIRN_RETURN_IF_ERROR(AddOwedDeltas(position, r, seen));
  return DiskWrite(position, r.offset, seen);
}

Status LoneStarArray::Reconstruct(uint32_t target, const ByteRange& r, std::set<uint32_t> erased,
                                  std::map<uint32_t, ParityBuffer>* rebuilt) {
  for (size_t attempt = 0; attempt <= members_.size(); attempt++) {
    rebuilt->clear();
    auto plan = PlanRecovery(options_.geometry, erased);
    if (!plan.ok()) return plan.status();
    bool read_failed = false;
    for (const RecoveryStep& step : plan->steps()) {
      // The members on disk are read all at once (each its own disk), then XORed with the
      // rebuilt ones in one pass; what was read is not kept in the page cache (a rebuild
      // streams through whole disks). (buffers first: the reads, joined when destroyed, write
      // into them until then)
      std::vector<ParityBuffer> buffers(plan->reads(step).size());
      std::vector<std::pair<uint32_t, std::future<Status>>> reads;
      std::vector<std::span<const uint8_t>> sources;
      for (uint32_t m : plan->reads(step)) {
        if (auto it = rebuilt->find(m); it != rebuilt->end()) {
          sources.push_back(it->second);
          continue;
        }
        ParityBuffer& buffer = buffers[reads.size()];
        reads.emplace_back(m, std::async(std::launch::async, [this, m, &r, &buffer] {
                             Status st = ReadMember(m, r, buffer);
                             members_[m].device->DropCached(r.offset, r.length);
                             return st;
                           }));
      }
      for (size_t i = 0; i < reads.size(); i++) {
        Status st = reads[i].second.get();
        if (!st.ok()) {  // that one is erased too: plan again
          LogWarning("lonestar group {}: {}", options_.name, st.message());
          erased.insert(reads[i].first);
          read_failed = true;
        }
      }
      if (read_failed) break;
      ParityBuffer sum = reads.empty() ? ParityBuffer(r.length) : std::move(buffers[0]);
      if (!reads.empty()) sources.insert(sources.begin(), sum);  // XORed in place
      for (size_t i = 1; i < reads.size(); i++) sources.push_back(buffers[i]);
      XorAll(sum, sources);
      (*rebuilt)[step.disk] = std::move(sum);
      if (step.disk == target) return Status::OK();
    }
    if (read_failed) continue;
    if (plan->recoverable() && target == UINT32_MAX) return Status::OK();
    std::string lost;
    for (uint32_t p : plan->lost()) lost += fmt::format("{}{}", lost.empty() ? "" : ", ", members_[p].disk);
    return Status::Corruption(fmt::format("lonestar group {}: bytes {}..{} of disk(s) {} cannot be rebuilt: too "
                                          "many members of their parity groups are lost there",
                                          options_.name, r.offset, r.end(), lost));
  }
  return Status::Corruption(fmt::format("lonestar group {}: bytes {}..{}: too many unreadable disks", options_.name,
                                        r.offset, r.end()));
}

Status LoneStarArray::Read(uint32_t position, uint64_t offset, std::span<uint8_t> dst) {
  CAIRN_RETURN_IF_ERROR(Halted());
  if (dst.empty()) return Status::OK();
  bool direct;
  {
    std::lock_guard lock(mutex_);
    auto d = defects_.find(position);
    direct = !members_[position].lost && (d == defects_.end() || !d->second.Overlaps({offset, dst.size()}));
  }
  if (direct) {
    Status st = DiskRead(position, offset, dst);
    if (st.ok() || options_.geometry.role(position) != DiskRole::kData) return st;
    LogWarning("lonestar group {}: {}; rebuilding the range from its parity", options_.name, st.message());
  }
  return ReadRebuilt(position, offset, dst, 0);
}

Status LoneStarArray::ReadRebuilt(uint32_t position, uint64_t offset, std::span<uint8_t> dst, unsigned way) {
  CAIRN_RETURN_IF_ERROR(Halted());
  std::set<uint32_t> erased;
  if (way > 0) {
    const GridGeometry& g = options_.geometry;
    std::vector<uint32_t> peers;
    if (auto hpg = g.hpg(position)) {  // (a vP disk is in no hPG; ways are asked of buckets)
      for (auto members : {g.HpgMembers(*hpg), g.VpgMembers(g.vpg(position))}) {
        for (uint32_t m : members) {
          if (m != position) peers.push_back(m);
        }
      }
    }
    if (way > peers.size()) {
      return Status::NotSupported(fmt::format("lonestar group {}: no other way to rebuild a range of disk {}",
                                              options_.name, members_[position].disk));
    }
    erased.insert(peers[way - 1]);
  }
  ByteRange r = UnitsOf(offset, dst.size());
  auto held = LockUnits(r);
  DefectWatch watch(*this);
  erased.merge(ErasedFor(r));
  erased.insert(position);
  std::map<uint32_t, ParityBuffer> rebuilt;
  CAIRN_RETURN_IF_ERROR(Reconstruct(position, r, erased, &rebuilt));
  const ParityBuffer& bytes = rebuilt.at(position);
  std::copy_n(bytes.begin() + (offset - r.offset), dst.size(), dst.begin());
  if (!DefectiveThere(position, r)) return Status::OK();
  // A defective range of a disk that is there: recovered in place, as a rebuild would.
  Status st = PutBack(position, r, bytes, watch);
  if (!st.ok()) LogWarning("lonestar group {}: cannot recover a range in place: {}", options_.name, st.message());
  return Status::OK();
}

bool LoneStarArray::DefectiveThere(uint32_t position, const ByteRange& r) {
  std::lock_guard lock(mutex_);
  auto d = defects_.find(position);
  return !members_[position].lost && d != defects_.end() && d->second.Overlaps(r);
}

Status LoneStarArray::PutBack(uint32_t position, const ByteRange& r, const ParityBuffer& bytes,
                              const DefectWatch& since) {
  CAIRN_RETURN_IF_ERROR(WriteMember(position, r, bytes));
  CAIRN_RETURN_IF_ERROR(SyncMember(position));
  return RemoveDefect(position, r, since);
}

Status LoneStarArray::RecoverInPlace(uint32_t position, const ByteRange& r) {
  DefectWatch watch(*this);
  std::set<uint32_t> erased = ErasedFor(r);
  erased.insert(position);
  std::map<uint32_t, ParityBuffer> rebuilt;
  CAIRN_RETURN_IF_ERROR(Reconstruct(position, r, erased, &rebuilt));
  return PutBack(position, r, rebuilt.at(position), watch);
}

Status LoneStarArray::Rewrite(uint32_t position, uint64_t offset, std::span<const uint8_t> data) {
  CAIRN_RETURN_IF_ERROR(Halted());
  auto held = LockUnits(UnitsOf(offset, data.size()));
  return DiskWrite(position, offset, data);
}

Status LoneStarArray::PrepareUnits(uint32_t position, const ByteRange& r, uint64_t offset, BytePieces data,
                                   UnitsWrite* out) {
  const std::set<uint32_t> erased = ErasedFor(r);
  // The units from `fresh` on lie wholly past what this disk was ever written up to: they read
  // as zeros, so as they will be they are their own delta. Only those before it are read (or,
  // where the disk is erased, rebuilt) and XORed: a write that goes on where the last one
  // stopped shares one unit with it, and reads that one alone.
  const ByteRange written{offset, TotalSize(data)};
  const uint64_t used = written_end_[position] - options_.data_start;  // written_end_ >= data_start
  const uint64_t written_up_to = options_.data_start + (used + kUnit - 1) / kUnit * kUnit;
  const uint64_t fresh = erased.contains(position) ? r.end() : std::clamp(written_up_to, r.offset, r.end());
  const ByteRange old_units{r.offset, fresh - r.offset};
  if (old_units.length > 0) {
    out->changes = std::make_shared<std::vector<uint8_t>>(old_units.length);
    ByteRange changed{offset, std::min(written.end(), fresh) - offset};
    std::vector<std::span<const uint8_t>> pieces = SubPieces(data, 0, changed.length);
    std::vector<uint8_t> joined;
    if (pieces.size() != 1) joined = Joined(pieces);
    std::span<const uint8_t> whole = pieces.size() == 1 ? pieces[0] : std::span<const uint8_t>(joined);
    if (erased.contains(position)) {
      std::map<uint32_t, ParityBuffer> rebuilt;
      CAIRN_RETURN_IF_ERROR(Reconstruct(position, old_units, erased, &rebuilt));
      out->now = std::move(rebuilt.at(position));
    } else {
      CAIRN_RETURN_IF_ERROR(ReadMember(position, old_units, out->now));
    }
    std::span<uint8_t> there = Slice(std::span<uint8_t>(out->now), old_units, changed);
    ParityDelta(there, whole, Slice(std::span<uint8_t>(*out->changes), old_units, changed));
    std::copy(whole.begin(), whole.end(), there.begin());
    out->after.push_back(out->now);
    out->delta.push_back(*out->changes);
  }
  if (fresh < r.end()) {
    const uint64_t from = std::max(offset, fresh);
    out->zeros.resize(std::max(from - fresh, r.end() - written.end()));
    std::vector<std::span<const uint8_t>> pieces = SubPieces(data, from - offset, written.length);
    pieces.insert(pieces.begin(), std::span<const uint8_t>(out->zeros).first(from - fresh));
    pieces.push_back(std::span<const uint8_t>(out->zeros).first(r.end() - written.end()));
    out->after.insert(out->after.end(), pieces.begin(), pieces.end());
    out->delta.insert(out->delta.end(), pieces.begin(), pieces.end());
  }
  return Status::OK();
}

Status LoneStarArray::Write(uint32_t position, uint64_t offset, BytePieces data) {
  CAIRN_RETURN_IF_ERROR(Halted());
  const GridGeometry& g = options_.geometry;
  const uint64_t size = TotalSize(data);
  if (g.role(position) != DiskRole::kData || offset < options_.data_start || offset + size > options_.data_end) {
    return Status::InvalidArgument(fmt::format("lonestar group {}: no bucket bytes {}..{} on disk {}", options_.name,
                                               offset, offset + size, members_[position].disk));
  }
  if (size == 0) return Status::OK();
  bytes_written_ += size;
  {
    std::lock_guard lock(mutex_);
    if (members_[position].lost) {
      return Status::IOError(fmt::format("lonestar group {}: disk {} is out of service", options_.name,
                                         members_[position].disk));
    }
  }
  const bool delayed = options_.mode == ArrayWriteMode::kDelayed;
  ByteRange r = UnitsOf(offset, size);
  auto held = LockUnits(r);
  // A range of the bucket left undefined (by a failed write, say) is recovered first: a
  // promise over it that a crash cut short in its parity update would leave the range
  // undefined on the bucket and its three parities at once, past rebuilding.
  // One that cannot be is written as before: what the write needs of it, it rebuilds itself.
  if (DefectiveThere(position, r)) {
    Status recovered = RecoverInPlace(position, r);
    if (!recovered.ok()) LogWarning("lonestar group {}: {}", options_.name, recovered.message());
  }
  UnitsWrite units;
  CAIRN_RETURN_IF_ERROR(PrepareUnits(position, r, offset, data, &units));
  if (std::all_of(units.delta.begin(), units.delta.end(), [](auto piece) { return IsAllZero(piece); })) {
    return Status::OK();  // there already
  }
  // Kept in memory for the parity unless delayed (the journal keeps it then: null).
  std::shared_ptr<const std::vector<uint8_t>> delta;
  if (!delayed) {
    const bool all_read = units.delta.size() == 1 && units.changes;  // then that buffer is the delta
    delta = all_read ? std::move(units.changes) : std::make_shared<const std::vector<uint8_t>>(Joined(units.delta));
  }
  std::array<uint32_t, kPromiseRoles> positions = g.WriteSet(position);
  CAIRN_RETURN_IF_ERROR(CoverWrites(positions, r.end()));
  std::array<uint32_t, kPromiseRoles> disks;
  for (size_t role = 0; role < kPromiseRoles; role++) disks[role] = members_[positions[role]].disk;
  auto promise = journal_->Begin(options_.mode, disks, r.offset, r.length);
  if (!promise.ok()) return promise.status();
  if (Crash("begin")) return Halted();
  // Delayed: the delta goes to the journal while the data goes to its disk. It counts once
  // the data is marked written (Sync), after both.
  std::future<Status> delta_kept;
  if (delayed) {
    delta_kept = std::async(std::launch::async, [&] { return journal_->KeepDelta(promise->txn, units.delta); });
  }
  Status st = DiskWrite(position, r.offset, units.after);
  if (delayed) {
    Status kept = delta_kept.get();
    if (st.ok()) st = kept;
  }
  if (!st.ok()) {  // the range is undefined now: its parity knows what it held
    if (options_.mode == ArrayWriteMode::kDirect) {
      if (Status durable = MarkParityDurable(position, r, promise->txn); !durable.ok()) {
        halted_ = true;
        LogError("lonestar group {} stops: disk {} bytes {}..{} are undefined ({}), and the journal cannot record "
                 "that their parity is not: {}; a remount repairs them",
                 options_.name, members_[position].disk, r.offset, r.end(), st.message(), durable.message());
        return st;
      }
    }
    if (!MarkUndefined(position, r, st).ok()) return st;
    if (Crash("data-undefined")) return Halted();
    if (Status done = journal_->Done(std::vector<uint64_t>{promise->txn}); !done.ok()) {
      LogError("lonestar group {}: {}", options_.name, done.message());  // open, it is driven forward at open
    }
    return st;
  }
  Pending pending{*promise, positions, delta};
  pending.applied[kDataRole] = true;
  {
    std::lock_guard lock(mutex_);
    pending_.emplace(promise->txn, pending);
    // Direct: a Sync may complete it only once its parity is written too (below).
    if (options_.mode != ArrayWriteMode::kDirect) unsynced_[position].push_back(promise->txn);
    if (delayed) {
      delta_bytes_ += r.length;
      last_write_ = std::chrono::steady_clock::now();
    }
  }
  if (Crash("data")) return Halted();
  if (options_.mode != ArrayWriteMode::kDirect) return Status::OK();
  // Direct: the three parities at once, each a read-modify-write of its own disk.
  std::array<std::future<Status>, kPromiseRoles> parity;
  for (size_t role = 1; role < kPromiseRoles; role++) {
    parity[role] = std::async(std::launch::async, [this, role, &positions, &r, &delta] {
      return ApplyDelta(positions[role], r, *delta);
    });
  }
  Status unmarked;  // a parity range neither written nor recorded as a defect
  for (size_t role = 1; role < kPromiseRoles; role++) {
    Status applied = parity[role].get();
    if (!applied.ok()) {  // the data is safe; that parity range is rebuilt later
      LogError("lonestar group {}: {}", options_.name, applied.message());
      Status marked = MarkUndefined(positions[role], r, applied);
      if (!marked.ok() && unmarked.ok()) unmarked = marked;
    }
    std::lock_guard lock(mutex_);
    pending_.at(promise->txn).applied[role] = true;
  }
  {
    std::lock_guard lock(mutex_);
    unsynced_[position].push_back(promise->txn);
  }
  if (Crash("parity")) return Halted();
  return unmarked;
}

Status LoneStarArray::MarkParityDurable(uint32_t position, const ByteRange& r, uint64_t txn) {
  // This promise's parity follows a data write that succeeded: it was not touched. Those of
  // the promises before it over these units were written in their Write (the units were
  // theirs then) and are synced now.
  std::vector<uint64_t> txns{txn};
  {
    std::lock_guard lock(mutex_);
    for (const auto& [t, p] : pending_) {
      if (p.positions[kDataRole] == position && Intersect(p.range(), r)) txns.push_back(t);
    }
  }
  const std::array<uint32_t, kPromiseRoles> positions = options_.geometry.WriteSet(position);
  for (size_t role = 1; role < kPromiseRoles && txns.size() > 1; role++) {
    CAIRN_RETURN_IF_ERROR(SyncMember(positions[role]));
  }
  for (size_t role = 1; role < kPromiseRoles; role++) {
    CAIRN_RETURN_IF_ERROR(journal_->Mark(txns, static_cast<PromiseRole>(role), true));
  }
  return Status::OK();
}

Status LoneStarArray::ApplyDelta(uint32_t position, const ByteRange& r, std::span<const uint8_t> delta) {
  bool lost;
  bool blank;
  {
    std::lock_guard lock(mutex_);
    lost = members_[position].lost;
    auto d = defects_.find(position);
    blank = members_[position].replaced && d != defects_.end() && d->second.Overlaps(r);
  }
  // Missing (a degraded mount): what it holds there is stale if it comes back, not replaced.
  // A replaced disk's defective range stays as its rebuild expects it (zeros where it writes
  // none): the range is a defect again, so a rebuild under way does not clear it.
  if (lost || blank) return AddDefect(position, r);
  // Any other defective range takes the delta too: a running rebuild may have rewritten it
  // already (it clears the defect once all its range is synced); if not, it does after this.
  std::vector<uint8_t> parity(r.length);
  CAIRN_RETURN_IF_ERROR(DiskRead(position, r.offset, parity));
  XorInto(parity, delta);
  return DiskWrite(position, r.offset, parity);
}

Status LoneStarArray::SyncMember(uint32_t position) {
  {
    std::lock_guard lock(mutex_);
    if (members_[position].lost) return Status::OK();
  }
  if (options_.observer) options_.observer->WillAccess(members_[position].disk, ArrayIoObserver::Access::kSync);
  return members_[position].device->Sync();
}

Status LoneStarArray::Sync(uint32_t position) {
  CAIRN_RETURN_IF_ERROR(Halted());
  // One at a time per bucket: a Sync returns once every promise written before it is durable,
  // those another Sync took included.
  std::lock_guard syncing(sync_mutexes_[position]);
  std::vector<uint64_t> txns;
  {
    std::lock_guard lock(mutex_);
    if (auto it = unsynced_.find(position); it != unsynced_.end()) {
      txns = std::move(it->second);
      unsynced_.erase(it);
    }
  }
  Status st = SyncMember(position);
  if (!st.ok()) {
    // What the promises wrote may be lost whatever a later sync says (a failed fsync can
    // drop the pages): their ranges are rebuilt from the parity, which takes their deltas
    // all the same, so a later Sync that completes them acknowledges what can be read back.
    for (uint64_t txn : txns) {
      ByteRange r;
      {
        std::lock_guard lock(mutex_);
        r = pending_.at(txn).range();
      }
      if (!MarkUndefined(position, r, st).ok()) break;
    }
  } else {
    st = CompletePromises(txns);
  }
  if (!st.ok() && !txns.empty()) {  // still this bucket's: the next Sync tries them again
    std::lock_guard lock(mutex_);
    std::vector<uint64_t>& later = unsynced_[position];
    later.insert(later.begin(), txns.begin(), txns.end());
  }
  if (!st.ok() || options_.mode != ArrayWriteMode::kDelayed) return st;
  uint64_t owed;
  {
    std::lock_guard lock(mutex_);
    owed = delta_bytes_;
    if (owed > options_.delta_cache_bytes) flush_wanted_ = true;
  }
  if (owed > options_.delta_cache_bytes) flush_asked_.notify_one();
  // Syncs that outrun the flush wait for it: the journal holds a few times the cache at most.
  return owed > kMaxDeltasPerCache * options_.delta_cache_bytes ? FlushParity() : Status::OK();
}

Status LoneStarArray::CompletePromises(std::vector<uint64_t>& txns) {
  if (txns.empty()) return Status::OK();
  if (Crash("data-synced")) return Halted();
  if (options_.mode == ArrayWriteMode::kDirect) {
    std::set<uint32_t> touched;
    {
      std::lock_guard lock(mutex_);
      for (uint64_t txn : txns) touched.insert(pending_.at(txn).positions.begin() + 1, pending_.at(txn).positions.end());
    }
    for (uint32_t p : touched) {
      Status synced = SyncMember(p);
      if (synced.ok()) continue;
      // What was written there may never reach the disk, whatever a later sync says: those
      // ranges are rebuilt (the data is durable).
      LogError("lonestar group {}: {}", options_.name, synced.message());
      for (uint64_t txn : txns) {
        ByteRange r;
        bool touches;
        {
          std::lock_guard lock(mutex_);
          const Pending& pending = pending_.at(txn);
          r = pending.range();
          touches = std::find(pending.positions.begin() + 1, pending.positions.end(), p) != pending.positions.end();
        }
        if (touches) CAIRN_RETURN_IF_ERROR(MarkUndefined(p, r, synced));
      }
    }
    if (Crash("parity-synced")) return Halted();
  } else {
    CAIRN_RETURN_IF_ERROR(journal_->Mark(txns, kDataRole, true));
    if (Crash("data-marked")) return Halted();
    if (options_.mode == ArrayWriteMode::kDelayed) {  // the flush completes them from here on
      std::lock_guard lock(mutex_);
      for (uint64_t txn : txns) {
        Pending& p = pending_.at(txn);
        p.data_synced = true;
        p.delta.reset();  // kept in the journal; memory holds only what waits for a sync
      }
      txns.clear();
      return Status::OK();
    }
    CAIRN_RETURN_IF_ERROR(ApplyParity(txns, false));
  }
  CAIRN_RETURN_IF_ERROR(journal_->Done(txns));
  std::lock_guard lock(mutex_);
  for (uint64_t txn : txns) pending_.erase(txn);
  return Status::OK();
}

Status LoneStarArray::ApplyParity(const std::vector<uint64_t>& txns, bool merge) {
  using Delta = std::shared_ptr<const std::vector<uint8_t>>;
  struct Owed {
    ByteRange range;
    Delta delta;                  // for `range`: one promise's, or the XOR of several (merged)
    std::vector<uint64_t> txns;   // the promises it completes on its disk
  };
  // Deltas on one disk that overlap become one read-modify-write of their XOR.
  auto merge_touching = [](std::vector<Owed>& list) {
    std::sort(list.begin(), list.end(), [](const Owed& a, const Owed& b) { return a.range.offset < b.range.offset; });
    std::vector<Owed> merged;
    for (size_t i = 0, j; i < list.size(); i = j) {
      uint64_t end = list[i].range.end();
      for (j = i + 1; j < list.size() && list[j].range.offset < end; j++) end = std::max(end, list[j].range.end());
      if (j == i + 1) {
        merged.push_back(std::move(list[i]));
        continue;
      }
      ByteRange span{list[i].range.offset, end - list[i].range.offset};
      auto sum = std::make_shared<std::vector<uint8_t>>(span.length, 0);
      Owed run{span, nullptr, {}};
      for (size_t k = i; k < j; k++) {
        XorInto(Slice(std::span<uint8_t>(*sum), span, list[k].range), *list[k].delta);
        run.txns.insert(run.txns.end(), list[k].txns.begin(), list[k].txns.end());
      }
      run.delta = std::move(sum);
      merged.push_back(std::move(run));
    }
    list = std::move(merged);
  };
  std::map<uint64_t, Delta> deltas;  // each read once, for all three roles
  for (size_t role = 1; role < kPromiseRoles; role++) {
    std::map<uint32_t, std::vector<Owed>> owed;  // by parity disk position
    std::vector<uint64_t> marked;
    for (uint64_t txn : txns) {
      ByteRange r;
      uint32_t target;
      {
        std::lock_guard lock(mutex_);
        const Pending& p = pending_.at(txn);
        if (p.applied[role]) continue;
        r = p.range();
        target = p.positions[role];
      }
      Delta& delta = deltas[txn];
      if (!delta) {
        auto loaded = DeltaOf(txn);
        if (loaded.status().IsCorruption()) {  // the bucket is right: its parity is recomputed from it
          CAIRN_RETURN_IF_ERROR(DropDamagedDelta(txn, loaded.status()));
          continue;
        }
        if (!loaded.ok()) return loaded.status();
        delta = std::move(*loaded);
      }
      marked.push_back(txn);
      owed[target].push_back({r, delta, {txn}});
    }
    if (marked.empty()) continue;
    if (merge) {
      for (auto& [target, list] : owed) merge_touching(list);
      CAIRN_RETURN_IF_ERROR(journal_->Mark(marked, static_cast<PromiseRole>(role), false));
    }
    for (auto& [target, list] : owed) {
      for (const Owed& o : list) {
        auto held = LockUnits(o.range);
        Status st = ApplyDelta(target, o.range, *o.delta);
        if (!st.ok()) {  // the data is safe; that parity range is rebuilt later
          LogError("lonestar group {}: {}", options_.name, st.message());
          CAIRN_RETURN_IF_ERROR(MarkUndefined(target, o.range, st));
        }
        std::lock_guard lock(mutex_);  // readers of the parity stop adding these deltas
        for (uint64_t txn : o.txns) pending_.at(txn).applied[role] = true;
      }
    }
    if (Crash(fmt::format("{}-written", kRoleNames[role]))) return Halted();
    for (const auto& [target, list] : owed) {
      Status synced = SyncMember(target);
      if (synced.ok()) continue;
      // What was written there may not have reached the disk: those ranges are rebuilt.
      LogError("lonestar group {}: {}", options_.name, synced.message());
      for (const Owed& o : list) CAIRN_RETURN_IF_ERROR(MarkUndefined(target, o.range, synced));
    }
    CAIRN_RETURN_IF_ERROR(journal_->Mark(marked, static_cast<PromiseRole>(role), true));
    if (Crash(kRoleNames[role])) return Halted();
  }
  return Status::OK();
}

Status LoneStarArray::DropDamagedDelta(uint64_t txn, const Status& why) {
  LogError("lonestar group {}: {}; the parity ranges it was owed are left to be recomputed from the buckets (in "
           "the background of the mount, or by cairn rebuild)",
           options_.name, why.message());
  std::vector<std::pair<uint32_t, ByteRange>> owed;
  {
    std::lock_guard lock(mutex_);
    const Pending& p = pending_.at(txn);
    for (size_t role = 1; role < kPromiseRoles; role++) {
      if (!p.applied[role]) owed.emplace_back(p.positions[role], p.range());
    }
  }
  for (const auto& [position, r] : owed) CAIRN_RETURN_IF_ERROR(AddDefect(position, r));
  dropped_delta_ = true;
  std::lock_guard lock(mutex_);  // readers of the parity stop adding it: the ranges are defects now
  pending_.at(txn).applied.fill(true);
  return Status::OK();
}

void LoneStarArray::FlushWhenAsked() {
  // Behind the writes it follows: acknowledged writes go first when the CPUs are busy.
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10) != 0) {
    LogWarning("lonestar group {}: cannot lower the priority of the parity flush: {}", options_.name,
               std::strerror(errno));
  }
  std::unique_lock lock(mutex_);
  for (;;) {
    flush_asked_.wait(lock, [this] { return flush_wanted_ || stopping_; });
    // A burst of writes goes first: the parity disks catch up in the pause after it.
    for (;;) {
      if (stopping_) return;
      auto quiet_at = last_write_ + kQuietBeforeFlush;
      if (std::chrono::steady_clock::now() >= quiet_at ||
          delta_bytes_ > kBusyDeltasPerCache * options_.delta_cache_bytes) {
        break;
      }
      flush_asked_.wait_until(lock, quiet_at);
    }
    flush_wanted_ = false;
    lock.unlock();
    Status st = FlushParity();
    if (!st.ok() && !halted_) {
      LogError("lonestar group {}: parity flush: {} (the deltas wait in the journal)", options_.name, st.message());
    }
    lock.lock();
  }
}

Status LoneStarArray::FlushParity() {
  std::lock_guard flushing(flush_mutex_);
  CAIRN_RETURN_IF_ERROR(Halted());
  std::vector<uint64_t> txns;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [txn, p] : pending_) {
      if (p.data_synced) txns.push_back(txn);
    }
  }
  if (!txns.empty()) {
    CAIRN_RETURN_IF_ERROR(ApplyParity(txns, true));
    CAIRN_RETURN_IF_ERROR(journal_->Done(txns));
    std::lock_guard lock(mutex_);
    for (uint64_t txn : txns) {
      delta_bytes_ -= pending_.at(txn).promise.length;
      pending_.erase(txn);
    }
  }
  // A damaged record left in the journal would make the next open distrust all parity: until
  // a compaction has taken it out, every flush tries again.
  if (!dropped_delta_.exchange(false)) return Status::OK();
  Status compacted = journal_->Compact();
  if (!compacted.ok()) dropped_delta_ = true;
  return compacted;
}

uint64_t LoneStarArray::pending_delta_bytes() const {
  std::lock_guard lock(mutex_);
  return delta_bytes_;
}

void LoneStarArray::MarkLost(uint32_t position, const std::string& why) {
  std::lock_guard lock(mutex_);
  if (members_[position].lost) return;
  members_[position].lost = true;
  LogWarning("lonestar group {}: disk {} is out of service ({}); its reads are rebuilt from its parity groups",
             options_.name, members_[position].disk, why);
}

Status LoneStarArray::Replacing(uint32_t position) {
  return AddDefect(position, {options_.data_start, options_.data_end - options_.data_start});
}

Status LoneStarArray::MarkUndefined(uint32_t position, const ByteRange& r, const Status& failure) {
  Status marked = AddDefect(position, r);
  if (marked.ok()) return marked;
  // Nothing says so: a later write there would take its delta from what is on the disk.
  halted_ = true;
  LogError("lonestar group {} stops: disk {} bytes {}..{} are undefined ({}), and the journal cannot record it: "
           "{}; a remount repairs them",
           options_.name, members_[position].disk, r.offset, r.end(), failure.message(), marked.message());
  return marked;
}

Status LoneStarArray::AddDefect(uint32_t position, const ByteRange& r) {
  std::lock_guard ordered(defect_mutex_);
  CAIRN_RETURN_IF_ERROR(journal_->AddDefect(members_[position].disk, r));
  std::lock_guard lock(mutex_);
  defects_[position].Add(r);
  for (DefectWatch* watch : defect_watches_) watch->added[position].Add(r);
  return Status::OK();
}

Status LoneStarArray::RemoveDefect(uint32_t position, const ByteRange& r, const DefectWatch& since) {
  std::lock_guard ordered(defect_mutex_);  // none is added between the look at `since` and the removal
  RangeSet removed;
  removed.Add(r);
  {
    std::lock_guard lock(mutex_);
    if (auto it = since.added.find(position); it != since.added.end()) {
      it->second.ForEach([&](ByteRange added) { removed.Remove(added); });
    }
  }
  Status st;
  removed.ForEach([&](ByteRange gone) {
    if (st.ok()) st = journal_->RemoveDefect(members_[position].disk, gone);
    if (!st.ok()) return;
    std::lock_guard lock(mutex_);
    auto it = defects_.find(position);
    if (it == defects_.end()) return;
    it->second.Remove(gone);
    if (it->second.empty()) defects_.erase(it);
  });
  return st;
}

LoneStarArray::IoTotals LoneStarArray::io_totals() const {
  return {bytes_written_.load(), disk_bytes_read_.load(), disk_bytes_written_.load()};
}

uint64_t LoneStarArray::defective_bytes(bool replaced_too) const {
  std::lock_guard lock(mutex_);
  uint64_t total = 0;
  for (const auto& [position, ranges] : defects_) {
    if (replaced_too || !members_[position].replaced) total += ranges.bytes();
  }
  return total;
}

std::map<uint32_t, RangeSet> LoneStarArray::defects() const {
  std::lock_guard lock(mutex_);
  return defects_;
}

Result<uint64_t> LoneStarArray::RebuildStep(uint64_t max_bytes, bool replaced_too, RebuildRun* run) {
  CAIRN_RETURN_IF_ERROR(Halted());
  std::lock_guard rebuilding(rebuild_mutex_);  // two rebuilders would pick the same range
  DefectWatch watch(*this);
  std::optional<std::pair<uint32_t, ByteRange>> next;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [position, ranges] : defects_) {
      if (members_[position].lost) continue;  // nowhere to write it until the disk is replaced
      if (!replaced_too && members_[position].replaced) continue;
      RangeSet todo = ranges;
      if (run && run->failed.contains(position)) {
        run->failed.at(position).ForEach([&](ByteRange r) { todo.Remove(r); });
      }
      if (auto first = todo.First(std::max<uint64_t>(max_bytes, kUnit))) {
        next.emplace(position, *first);
        break;
      }
    }
  }
  if (next) {
    auto [position, range] = *next;
    uint64_t top = WrittenEnd();
    Status st = range.offset >= top  // every member reads as zeros there: nothing to rebuild
                    ? RemoveDefect(position, range, watch)
                    : RebuildRange(UnitsOf(range.offset, std::min(range.end(), top) - range.offset), watch);
    if (!st.ok()) {
      if (run) {
        run->failed[position].Add(range);
        run->failures++;
      }
      return st;
    }
  }
  return defective_bytes(replaced_too);
}

Status LoneStarArray::RebuildRange(const ByteRange& r, const DefectWatch& since) {
  // A slice at a time, each slice's writes overlapping the next one's reads: what one rebuild
  // holds in memory is two slices per member it reads or writes, whatever the range; what it
  // wrote leaves the page cache once synced.
  constexpr uint64_t kSlice = 64 * kUnit;
  constexpr int kSyncEvery = 16;  // slices: writeback goes on behind the reads, not all at the end
  std::set<uint32_t> written;
  int slices = 0;
  std::future<Status> writing;      // the last slice's writes (they add to `written`)
  uint64_t writing_end = r.offset;  // where that slice ends
  uint64_t unsynced = r.offset;     // written from here on, not synced yet
  uint64_t at = r.offset;           // rebuilt up to here
  std::set<uint32_t> partly;        // members rebuilt in the slice where others could not be
  std::optional<ByteRange> partly_in;
  Status st;
  auto finish_writing = [&] {
    if (!writing.valid()) return;
    Status wrote = writing.get();
    if (st.ok() && wrote.ok()) at = writing_end;
    if (st.ok()) st = wrote;
  };
  for (uint64_t next = r.offset; next < r.end() && st.ok(); next = writing_end) {
    ByteRange w = UnitsOf(next, std::min(kSlice, r.end() - next));
    auto held = LockUnits(w);
    auto rebuilt = std::make_unique<std::map<uint32_t, ParityBuffer>>();
    Status recovered = Reconstruct(UINT32_MAX, w, ErasedFor(w), rebuilt.get());
    finish_writing();
    if (!st.ok()) break;
    if (!recovered.ok()) {  // what could be rebuilt is written and counts, the rest stays defective
      st = WriteRebuilt(w, *rebuilt, &partly);
      if (st.ok()) partly_in = w;
      if (st.ok()) st = recovered;
      break;
    }
    std::optional<ByteRange> sync;  // at every kSyncEvery-th slice, all written since the last sync
    if (++slices % kSyncEvery == 0) {
      sync = ByteRange{unsynced, w.end() - unsynced};
      unsynced = w.end();
    }
    writing = std::async(std::launch::async, [this, w, held = std::move(held), rebuilt = std::move(rebuilt),
                                              &written, sync]() mutable {
      Status wrote = WriteRebuilt(w, *rebuilt, &written);
      UnitLocks::Held done = std::move(held);  // the slice is free again once written
      // Its writeback starts now (the hint queues it), so the sync finds little left to do.
      for (uint32_t position : written) members_[position].device->DropCached(w.offset, w.length);
      for (auto it = written.begin(); sync && wrote.ok() && it != written.end(); ++it) {
        wrote = SyncMember(*it);
        if (wrote.ok()) members_[*it].device->DropCached(sync->offset, sync->length);
      }
      return wrote;
    });
    writing_end = w.end();
  }
  finish_writing();
  // One sync per disk for the whole range, then the defects go.
  for (uint32_t position : written) {
    CAIRN_RETURN_IF_ERROR(SyncMember(position));
    members_[position].device->DropCached(unsynced, writing_end - unsynced);
  }
  for (uint32_t position : partly) CAIRN_RETURN_IF_ERROR(SyncMember(position));
  if (at > r.offset) {
    for (uint32_t position : written) CAIRN_RETURN_IF_ERROR(RemoveDefect(position, {r.offset, at - r.offset}, since));
  }
  // A member that could be rebuilt there is right again, however stuck the others are.
  if (partly_in) {
    for (uint32_t position : partly) CAIRN_RETURN_IF_ERROR(RemoveDefect(position, *partly_in, since));
  }
  return st;
}

Status LoneStarArray::WriteRebuilt(const ByteRange& w, std::map<uint32_t, ParityBuffer>& rebuilt,
                                   std::set<uint32_t>* written) {
  for (auto& [position, bytes] : rebuilt) {
    bool lost;
    bool fresh;
    {
      std::lock_guard lock(mutex_);
      lost = members_[position].lost;
      fresh = members_[position].replaced;
    }
    if (lost) continue;
    // A fresh disk reads zeros where nothing was written to it yet (not where a write since
    // its replacement failed, say): zeros need not be written there. Zeros as they go on the
    // disk, that is: a parity disk holds the deltas still owed to it too (WriteMember).
    bool blank = fresh && w.offset >= written_end_[position];
    CAIRN_RETURN_IF_ERROR(AddOwedDeltas(position, w, bytes));
    if (!(blank && IsAllZero(bytes))) CAIRN_RETURN_IF_ERROR(DiskWrite(position, w.offset, bytes));
    written->insert(position);
  }
  return Status::OK();
}

Result<LoneStarArray::ParityReport> LoneStarArray::CheckParity(ByteRange range, bool repair) {
  CAIRN_RETURN_IF_ERROR(Halted());
  constexpr uint64_t kWindow = 16 * kUnit;
  const GridGeometry& g = options_.geometry;
  const uint32_t groups = g.hpg_count() + g.vpg_count();
  ParityReport report;
  range = UnitsOf(std::max(range.offset, options_.data_start),
                  std::min(range.end(), options_.data_end) - std::max(range.offset, options_.data_start));
  uint64_t end = std::min(range.end(), WrittenEnd());  // past it every member reads as zeros
  // One window of every member and of every group's XOR, reused from window to window: tens
  // of MiB that would otherwise go back to the system and be faulted in again each time.
  std::vector<ParityBuffer> bytes(g.disk_count());
  std::vector<ParityBuffer> sums(groups);  // by group (hPGs, then vPGs): zero where it adds up
  for (uint64_t at = range.offset; at < end; at += kWindow) {
    ByteRange w = UnitsOf(at, std::min(kWindow, end - at));
    auto held = LockUnits(w);
    std::set<uint32_t> erased = ErasedFor(w);
    for (uint32_t p = 0; p < g.disk_count(); p++) {
      if (erased.contains(p)) continue;
      Status st = ReadMember(p, w, bytes[p]);
      members_[p].device->DropCached(w.offset, w.length);  // a check streams through whole disks
      if (!st.ok()) {
        report.mismatches.push_back(st.message());
        erased.insert(p);
      }
    }
    report.bytes_checked += w.length * (g.disk_count() - erased.size());
    std::vector<bool> checked(groups);
    bool agree = true;
    for (uint32_t group = 0; group < groups; group++) {
      std::span<const uint32_t> members = GroupMembers(g, group);
      if (std::any_of(members.begin(), members.end(), [&](uint32_t m) { return erased.contains(m); })) {
        continue;  // cannot be checked until the disk is back
      }
      checked[group] = true;
      std::vector<std::span<const uint8_t>> sources;
      for (uint32_t m : members) sources.push_back(bytes[m]);
      sums[group].resize(w.length);
      XorAll(sums[group], sources);
      agree = agree && IsAllZero(sums[group]);
    }
    if (!agree) CAIRN_RETURN_IF_ERROR(RepairMismatches(w, bytes, sums, checked, repair, &report));
  }
  return report;
}

Status LoneStarArray::RepairMismatches(const ByteRange& w, std::vector<ParityBuffer>& bytes,
                                       const std::vector<ParityBuffer>& sums, const std::vector<bool>& checked,
                                       bool repair, ParityReport* report) {
  // Rot comes a sector at a time, and different members may rot in one window: each block is
  // judged by itself, so that one member's damage does not hide another's or stop its repair.
  constexpr uint64_t kBlock = 4096;
  const GridGeometry& g = options_.geometry;
  struct Run {  // blocks in a row with the same verdict
    uint64_t begin = 0;  // within the window
    uint64_t end = 0;
    std::vector<uint32_t> wrong;      // the groups that do not XOR to zero there
    std::optional<uint32_t> culprit;  // the member that explains it, if one does
  };
  std::vector<Run> runs;
  for (uint64_t begin = 0; begin < w.length; begin += kBlock) {
    uint64_t length = std::min(kBlock, w.length - begin);
    std::vector<uint32_t> wrong;
    for (uint32_t group = 0; group < sums.size(); group++) {
      if (checked[group] && !IsAllZero(std::span<const uint8_t>(sums[group]).subspan(begin, length))) {
        wrong.push_back(group);
      }
    }
    if (wrong.empty()) continue;
    std::optional<uint32_t> culprit = Culprit(g, wrong, checked, sums, begin, length);
    if (!runs.empty() && runs.back().end == begin && runs.back().wrong == wrong && runs.back().culprit == culprit) {
      runs.back().end = begin + length;
    } else {
      runs.push_back({begin, begin + length, std::move(wrong), culprit});
    }
  }
  std::set<uint32_t> written;
  for (const Run& run : runs) {
    ByteRange r{w.offset + run.begin, run.end - run.begin};
    std::vector<std::string> names;
    for (uint32_t group : run.wrong) names.push_back(GroupName(g, group));
    const char* verb = names.size() == 1 ? "does" : "do";
    if (!run.culprit) {
      for (size_t i = 0; i < names.size(); i++) {
        std::vector<std::string> disks;
        for (uint32_t m : GroupMembers(g, run.wrong[i])) disks.push_back(std::to_string(members_[m].disk));
        names[i] += fmt::format(" (disks {})", fmt::join(disks, ", "));
      }
      bool all_checked = std::all_of(checked.begin(), checked.end(), [](bool c) { return c; });
      report->mismatches.push_back(fmt::format(
          "lonestar group {}: {} {} not XOR to zero at bytes {}..{}, and no single disk explains it (two or more are "
          "wrong there{}); {} as the culprit is ambiguous (the chunk scrub, which verifies checksums, or an admin "
          "decides)",
          options_.name, JoinAnd(names), verb, r.offset, r.end(),
          all_checked ? "" : ", or a group that would tell which has a disk out of service",
          repair ? "left alone," : "cairn scrub leaves it alone,"));
      continue;
    }
    const uint32_t m = *run.culprit;
    const bool bucket = g.role(m) == DiskRole::kData;
    std::string found = fmt::format(
        "lonestar group {}: bytes {}..{} of disk {} ({}) are wrong: {} {} not XOR to zero there, and it is the only "
        "disk in {} and in no group that does",
        options_.name, r.offset, r.end(), members_[m].disk, DiskRoleName(g.role(m)), JoinAnd(names), verb,
        names.size() == 1 ? "it" : "both");
    if (!repair) {
      report->mismatches.push_back(
          fmt::format("{}; cairn scrub {} them from {}", found, bucket ? "rebuilds" : "recomputes", names.front()));
      continue;
    }
    // A group's XOR there is the member's error: XORed out, the member is the XOR of the
    // group's other members, as a rebuild from that group makes it.
    std::span<uint8_t> right = std::span<uint8_t>(bytes[m]).subspan(run.begin, r.length);
    XorInto(right, std::span<const uint8_t>(sums[run.wrong.front()]).subspan(run.begin, r.length));
    CAIRN_RETURN_IF_ERROR(WriteMember(m, r, ParityBuffer(right.begin(), right.end())));
    written.insert(m);
    report->mismatches.push_back(
        fmt::format("{}; {} from {}", found, bucket ? "rebuilt" : "recomputed", names.front()));
    report->repaired++;
    if (bucket) report->buckets_rebuilt++;
  }
  for (uint32_t m : written) CAIRN_RETURN_IF_ERROR(SyncMember(m));
  return Status::OK();
}

}  // namespace cairn
