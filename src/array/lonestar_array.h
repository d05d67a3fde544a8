// LoneStarArray keeps the parity of one lonestar disk group (seed-lonestar.md §2.3–§2.7): each
// write to a bucket is a promise (PromiseJournal) that changes the bucket and, by the same delta
// old ⊕ new, its hP, vP and vhP, in the group's write mode; a range of a lost or defective disk
// is rebuilt from the smaller intact parity group, peeling through the other dimension when one
// is not enough. Every I/O on the group's disks goes through here. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "array/grid_geometry.h"
#include "array/promise_journal.h"
#include "array/range_set.h"
#include "array/unit_locks.h"
#include "cairn/disk.h"
#include "redundancy/parity_math.h"
#include "util/coding.h"

namespace cairn {

// Told of every disk the array is about to read, write or sync, before it does: where a power
// layer wakes exactly the disks a request needs and counts them. Called from several threads
// at once (the members of one recovery step are read in parallel).
class ArrayIoObserver {
 public:
  enum class Access { kRead, kWrite, kSync };
  virtual ~ArrayIoObserver() = default;
  // `disk` is the archive's disk number.
  virtual void WillAccess(uint32_t disk, Access access) = 0;
};

class LoneStarArray {
 public:
  // The unit of every read-modify-write: one SPC 16+1 intra-disk parity group (17 blocks of
  // 4 KiB), aligned from the start of the data range, the same on every disk.
  static constexpr uint64_t kUnit = 17 * 4096;
  // High-water marks move in steps of this many bytes (one journal sync per step and disk).
  static constexpr uint64_t kHighWaterStep = 1024 * kUnit;
  // Delayed mode: past delta_cache_bytes of deltas the background flush waits for the group
  // to have had no write for kQuietBeforeFlush, so a burst of writes is not slowed by its own
  // parity; past kBusyDeltasPerCache times as many it starts at once, and a Sync leaving more
  // than kMaxDeltasPerCache times as many flushes them before it returns.
  static constexpr std::chrono::milliseconds kQuietBeforeFlush{1000};
  static constexpr uint64_t kBusyDeltasPerCache = 2;
  static constexpr uint64_t kMaxDeltasPerCache = 4;

  struct Member {
    uint32_t disk = 0;               // the archive's disk number
    std::unique_ptr<Disk> device;    // a MissingDisk when lost
    bool lost = false;               // missing or failed: reads of it are rebuilt from the others
    bool replaced = false;           // a fresh disk waiting for its rebuild: zeros where not yet rebuilt
  };
  struct Options {
    explicit Options(GridGeometry g) : geometry(std::move(g)) {}
    std::string name;                // the group, for messages
    GridGeometry geometry;
    ArrayWriteMode mode = ArrayWriteMode::kSerialized;
    uint64_t data_start = 0;         // the disk range parity covers, the same on every member
    uint64_t data_end = 0;
    std::string journal_path;
    std::string identity;            // archive id and group name, stamped in the journal
    // A new group: its disks hold zeros and so does its parity; the journal is created.
    bool create = false;
    // The journal's epoch the catalog recorded when the group was last closed (SealEpoch): a
    // journal below it is an old copy, damaged; a new journal starts there.
    uint64_t catalog_epoch = 0;
    // Delayed mode: pending deltas (bytes) past which a background flush brings the parity
    // disks up to date once the writes pause (see kQuietBeforeFlush).
    uint64_t delta_cache_bytes = 256ull << 20;
    ArrayIoObserver* observer = nullptr;
    // Tests: called at each step boundary of a write, a sync and a parity flush ("begin",
    // "data", "hP", ...); returning true stops the array there as a killed process would
    // (every later call fails and nothing more reaches the disks or the journal).
    std::function<bool(std::string_view step)> crash_point;
  };

  // Opens the group by grid position (`members[p]` is position p): replays the journal, drives
  // every promise a crash left open forward (rebuilding the ranges it left undefined) and marks
  // replaced members defective. A missing or damaged journal is set aside (logged) and all
  // parity is re-derived from the buckets, never trusted.
  static Result<std::unique_ptr<LoneStarArray>> Open(Options options, std::vector<Member> members);
  // Completes every promise written so far (as Sync would) and, in delayed mode, brings the
  // parity up to date, unless stopped at a crash point.
  ~LoneStarArray();
  // Raises the journal's epoch by one at a close, and returns it for the catalog to record
  // (Options::catalog_epoch) once the journal has it durably.
  Result<uint64_t> SealEpoch();
  LoneStarArray(const LoneStarArray&) = delete;
  LoneStarArray& operator=(const LoneStarArray&) = delete;

  const GridGeometry& geometry() const { return options_.geometry; }
  const std::string& name() const { return options_.name; }
  ArrayWriteMode mode() const { return options_.mode; }
  uint32_t disk_of(uint32_t position) const { return members_[position].disk; }
  // The disk range parity covers, the same on every member.
  uint64_t data_start() const { return options_.data_start; }
  uint64_t data_end() const { return options_.data_end; }

  // The Disk the chunk store of grid position `position` uses: below data_start it is the
  // device itself (the superblock); above, a bucket's reads and writes go through the array
  // and a parity disk holds no chunks. Discard keeps freed bytes as they are (parity covers
  // them). The view must not outlive the array.
  std::unique_ptr<Disk> View(uint32_t position);

  // --- the data path, in disk offsets within [data_start, data_end)
  // A promise: `data` lands on bucket `position` and the parity follows as the mode says.
  Status Write(uint32_t position, uint64_t offset, BytePieces data);
  Status Write(uint32_t position, uint64_t offset, std::span<const uint8_t> data) {
    const std::span<const uint8_t> whole[] = {data};
    return Write(position, offset, BytePieces(whole));
  }
  // Writes bytes the parity already agrees with (a repair of a damaged range): no promise.
  Status Rewrite(uint32_t position, uint64_t offset, std::span<const uint8_t> data);
  // Reads a member; a lost disk or a defective range is rebuilt from the parity groups.
  Status Read(uint32_t position, uint64_t offset, std::span<uint8_t> dst);
  // Rebuilds a range from the parity groups whatever the disk holds (it read back wrong).
  // Way 0 takes the disk alone for lost; way N also takes the Nth other member of its two
  // parity groups for lost, so the other dimension rebuilds the range around it (it may be
  // the one that made an earlier way's bytes wrong). NotSupported past the last way.
  Status ReadRebuilt(uint32_t position, uint64_t offset, std::span<uint8_t> dst, unsigned way);
  // Makes the writes to bucket `position` so far durable, with their parity as the mode says:
  // serialized updates hP, vP, vhP now, one after the other; delayed leaves them to
  // FlushParity (in the background once the deltas pass delta_cache_bytes).
  Status Sync(uint32_t position);

  // --- maintenance
  // Delayed mode: applies every pending delta to its parity disks, merged per disk and range.
  // One flush at a time.
  Status FlushParity();
  uint64_t pending_delta_bytes() const;
  // Takes a member out of service now (it failed): its reads are rebuilt from the others.
  void MarkLost(uint32_t position, const std::string& why);
  // Member `position` is being replaced by a blank disk: all of its range is to be rebuilt
  // (a defect in the journal), whatever was defective on the old one.
  Status Replacing(uint32_t position);
  // The ranges one run of rebuild steps failed to rebuild (a disk read error where another
  // member is missing too): the run goes on past them, and the next run tries them again.
  struct RebuildRun {
    std::map<uint32_t, RangeSet> failed;  // by position
    size_t failures = 0;
  };
  // Rebuilds up to `max_bytes` of defect ranges (replaced disks, ranges a crash or a failed
  // write left undefined, parity to re-derive) on members that are there, smaller intact
  // group first; without `replaced_too`, not those of disks replaced and awaiting cairn
  // rebuild; none that `run` failed on before (a failure is added to it). Returns the
  // defective bytes left (of that kind). One rebuilder at a time.
  Result<uint64_t> RebuildStep(uint64_t max_bytes, bool replaced_too = true, RebuildRun* run = nullptr);
  uint64_t defective_bytes(bool replaced_too = true) const;
  // Since open: bytes Write was given for the buckets, and the disk I/O done (reads that the
  // high-water marks spared are not counted).
  struct IoTotals {
    uint64_t bytes_written = 0;
    uint64_t disk_bytes_read = 0;
    uint64_t disk_bytes_written = 0;
  };
  IoTotals io_totals() const;
  std::map<uint32_t, RangeSet> defects() const;  // by position

  // Scrub: checks that every horizontal and vertical parity group XORs to zero over `range`
  // (pending deltas applied). Where some do not, each 4 KiB block is pinned on the one member
  // that explains it: a damaged member makes every group it is in wrong by its error, and no
  // other. With `repair`, that member's range is rewritten from its group: a bucket's is
  // rebuilt from its parity, a parity disk's recomputed. A range no single member explains
  // (two or more are damaged there) is reported and left alone: parity is never recomputed
  // from a bucket that may be the damaged one. Mismatches name groups, disks and range.
  struct ParityReport {
    uint64_t bytes_checked = 0;
    std::vector<std::string> mismatches;  // a range found wrong, or a member that cannot be read
    uint64_t repaired = 0;                // of those, ranges rewritten from their group
    uint64_t buckets_rebuilt = 0;         // of those repaired, bucket ranges (the rest are parity)
  };
  Result<ParityReport> CheckParity(ByteRange range, bool repair);

 private:
  struct Pending;  // a promise whose parity is not all on the disks yet
  LoneStarArray(Options options, std::vector<Member> members);

  Status Recover(const PromiseJournal::State& state);
  // Delayed mode, on its own thread: flushes the parity whenever Sync asks, until stopped.
  void FlushWhenAsked();
  Status Halted() const;
  bool Crash(std::string_view step);
  // The unit-aligned range covering [offset, offset + length), clipped to data_end.
  ByteRange UnitsOf(uint64_t offset, uint64_t length) const;
  uint64_t FirstUnit(const ByteRange& r) const { return (r.offset - options_.data_start) / kUnit; }
  uint64_t UnitCount(const ByteRange& r) const { return (r.length + kUnit - 1) / kUnit; }
  UnitLocks::Held LockUnits(const ByteRange& r) { return locks_.Lock(FirstUnit(r), UnitCount(r)); }

  // Reads a member's range as the group sees it: a parity disk with the pending deltas that
  // are not on it yet XORed in. REQUIRES: the units locked.
  Status ReadMember(uint32_t position, const ByteRange& r, ParityBuffer& out);
  // Writes `seen` (the range as the group sees it) to a member: a parity disk without the
  // deltas still owed to it, which are applied later. REQUIRES: the units locked.
  Status WriteMember(uint32_t position, const ByteRange& r, ParityBuffer seen);
  // XORs into `bytes` (range `r` of parity member `position`) the deltas owed to it.
  Status AddOwedDeltas(uint32_t position, const ByteRange& r, std::span<uint8_t> bytes);
  // Rebuilds `target`'s range (or every erased member's, target = UINT32_MAX) from the groups,
  // into *rebuilt by position. Corruption naming the disks when the peeling gets stuck.
  // REQUIRES: the units locked.
  Status Reconstruct(uint32_t target, const ByteRange& r, std::set<uint32_t> erased,
                     std::map<uint32_t, ParityBuffer>* rebuilt);
  // Members whose range `r` cannot be read as it is: lost, or defective there.
  std::set<uint32_t> ErasedFor(const ByteRange& r);
  // What a write makes of the units it covers: the bytes they will hold and what changes in
  // them, each as pieces of the caller's data and of the buffers here.
  struct UnitsWrite {
    std::vector<std::span<const uint8_t>> after;
    std::vector<std::span<const uint8_t>> delta;
    ParityBuffer now;                               // the units it reads, as they will be
    std::shared_ptr<std::vector<uint8_t>> changes;  // their delta: zero where they keep their bytes
    std::vector<uint8_t> zeros;                     // around the data in the units it does not read
  };
  // Fills `out` for a write of `data` at `offset` to bucket `position`, whose units `r` are
  // held: reads (or rebuilds) the units below what the bucket was written up to.
  Status PrepareUnits(uint32_t position, const ByteRange& r, uint64_t offset, BytePieces data, UnitsWrite* out);
  // Applies `delta` to parity member `position` over `r` (read, XOR, write). REQUIRES: units locked.
  Status ApplyDelta(uint32_t position, const ByteRange& r, std::span<const uint8_t> delta);
  Status SyncMember(uint32_t position);
  // Sync's work for the promises it took from a bucket, once the bucket is synced: makes them
  // durable with their parity as the mode says. Empties `txns` once they are no longer the
  // bucket's to retry (delayed: handed to the flush).
  Status CompletePromises(std::vector<uint64_t>& txns);
  // The delta of a pending promise, from memory or the journal.
  Result<std::shared_ptr<const std::vector<uint8_t>>> DeltaOf(uint64_t txn);
  // Applies the parity of `txns` role by role, each disk synced and marked before the next role.
  Status ApplyParity(const std::vector<uint64_t>& txns, bool merge);
  // A delta the journal no longer holds intact (`why`): the parity ranges it was owed become
  // defects, recomputed from the buckets, and the promise owes nothing more.
  Status DropDamagedDelta(uint64_t txn, const Status& why);
  // While it lives, the defects added to the group are recorded in it too: what rebuilt a
  // range clears its defects there less those, which came after it had read the range.
  class DefectWatch;
  Status AddDefect(uint32_t position, const ByteRange& r);
  // AddDefect for range `r` of `position`, which `failure` (a write or a sync) left undefined;
  // when the journal cannot record it either, the group stops (its next open finds the
  // promises open and rebuilds their ranges).
  Status MarkUndefined(uint32_t position, const ByteRange& r, const Status& failure);
  // Removes `r` from the defects of `position`, but for what was added since `since` began.
  Status RemoveDefect(uint32_t position, const ByteRange& r, const DefectWatch& since);
  // Whether member `position` is there and has a defect in `r`.
  bool DefectiveThere(uint32_t position, const ByteRange& r);
  // Writes `bytes`, range `r` rebuilt, back to member `position`, synced: no longer a defect
  // there (but for what was added since `since` began). REQUIRES: the units locked.
  Status PutBack(uint32_t position, const ByteRange& r, const ParityBuffer& bytes, const DefectWatch& since);
  // Rebuilds range `r` of member `position` from the groups and puts it back. REQUIRES: as PutBack.
  Status RecoverInPlace(uint32_t position, const ByteRange& r);
  // Direct mode, a data write of promise `txn` to range `r` of bucket `position` failed:
  // records that the parity there holds no half-applied delta (syncing what the open promises
  // over it wrote), so that recovery rebuilds the range from it. REQUIRES: the units locked.
  Status MarkParityDurable(uint32_t position, const ByteRange& r, uint64_t txn);
  // Rebuilds range `r` of every erased member that is there, a slice at a time, syncs them and
  // removes their defects there (those added since `since` began stay).
  Status RebuildRange(const ByteRange& r, const DefectWatch& since);
  // CheckParity's verdict on window `w` (its units held), whose members as the group sees
  // them are `bytes` and whose groups (hPGs, then vPGs) XOR to `sums`, those `checked` with
  // every member read: reports each range that does not add up and, with `repair`, rewrites
  // the member that explains it.
  Status RepairMismatches(const ByteRange& w, std::vector<ParityBuffer>& bytes, const std::vector<ParityBuffer>& sums,
                          const std::vector<bool>& checked, bool repair, ParityReport* report);
  // Writes the members rebuilt for window `w` (its units held) that are there; adds those it
  // wrote to *written.
  Status WriteRebuilt(const ByteRange& w, std::map<uint32_t, ParityBuffer>& rebuilt,
                      std::set<uint32_t>* written);
  // Every read and write of a member disk goes through these: the observer is told first.
  // A read past what the group wrote on the member is zeros and touches no disk; a write past
  // the member's high-water mark raises it first.
  Status DiskRead(uint32_t position, uint64_t offset, std::span<uint8_t> dst);
  Status DiskWrite(uint32_t position, uint64_t offset, BytePieces src);
  Status DiskWrite(uint32_t position, uint64_t offset, std::span<const uint8_t> src) {
    const std::span<const uint8_t> whole[] = {src};
    return DiskWrite(position, offset, BytePieces(whole));
  }
  // Raises the high-water marks of `positions` to cover writes up to `end`: in the journal,
  // synced, in steps of kHighWaterStep, then here.
  Status CoverWrites(std::span<const uint32_t> positions, uint64_t end);
  // Past this offset every member reads as zeros.
  uint64_t WrittenEnd() const;


  const Options options_;
  std::vector<Member> members_;  // by grid position; `lost` guarded by mutex_
  // By position: the group wrote nothing at or past it (the journal's high-water mark, or
  // data_end when the journal has none); only goes up.
  std::unique_ptr<std::atomic<uint64_t>[]> high_water_;
  // By position: reads past it are zeros (at most high_water_): where the device's data ends
  // at open (Disk::DataEnd), raised by the writes since.
  std::unique_ptr<std::atomic<uint64_t>[]> written_end_;
  std::unique_ptr<PromiseJournal> journal_;
  UnitLocks locks_;
  std::atomic<bool> halted_{false};
  mutable std::mutex mutex_;  // guards what follows; never held across I/O
  std::map<uint64_t, Pending> pending_;        // by txn
  std::map<uint32_t, std::vector<uint64_t>> unsynced_;  // bucket position -> txns written, not synced
  std::map<uint32_t, RangeSet> defects_;       // by position: mirrors the journal's
  std::vector<DefectWatch*> defect_watches_;   // the live ones
  uint64_t delta_bytes_ = 0;                   // deltas of delayed promises still pending
  // Since open: bytes written to buckets by Write, and the disk I/O done (logged at close:
  // the write amplification).
  std::atomic<uint64_t> bytes_written_{0};
  std::atomic<uint64_t> disk_bytes_read_{0};
  std::atomic<uint64_t> disk_bytes_written_{0};
  // Delayed mode: the background flush.
  std::mutex flush_mutex_;                 // one FlushParity at a time; held across its I/O
  std::atomic<bool> dropped_delta_{false};  // since the last flush: its record goes with a compaction
  std::mutex rebuild_mutex_;               // one RebuildStep at a time; held across its I/O
  std::unique_ptr<std::mutex[]> sync_mutexes_;  // by position: one Sync at a time; held across its I/O
  // One change of defects at a time, so the journal's order is defects_'s; held across the
  // journal's append. Before mutex_.
  std::mutex defect_mutex_;
  std::condition_variable flush_asked_;    // with mutex_
  bool flush_wanted_ = false;              // guarded by mutex_
  std::chrono::steady_clock::time_point last_write_;  // guarded by mutex_: of a bucket, delayed mode
  bool stopping_ = false;                  // guarded by mutex_
  std::thread flusher_;
};

}  // namespace cairn
