// PromiseJournal is the durable record of a lonestar group's parity maintenance, on fast
// storage beside the catalog: every write to a bucket is a promise recorded here before a
// disk is touched, with a start and finish mark per disk it updates; the deltas of delayed
// writes until their parity is updated; the defect ranges (disk ranges not trusted until
// rebuilt); and each disk's high-water mark (nothing was ever written at or past it). An
// append-only file of checksummed records in appends that each end with an end record and a
// sync, replayed at open and compacted when it grows. Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "array/range_set.h"
#include "cairn/status.h"
#include "util/coding.h"

namespace cairn {

// How a write reaches the parity disks (cairn.conf group.NAME.write_mode). Persisted: never renumber.
enum class ArrayWriteMode : uint8_t {
  kSerialized = 1,  // data, hP, vP, vhP one after the other: a crash leaves at most one undefined
  kDirect = 2,      // all four at once: a crash leaves the three parities to recompute
  kDelayed = 3,     // data and the delta now, the parities later, merged
};

// The mode a cairn.conf group.NAME.write_mode value names, if any; and its name.
std::optional<ArrayWriteMode> ArrayWriteModeNamed(std::string_view name);
std::string_view ArrayWriteModeName(ArrayWriteMode mode);

// The disks of a write, in the order a serialized write updates them.
enum PromiseRole : uint8_t { kDataRole = 0, kHorizontalRole = 1, kVerticalRole = 2, kVerticalOfHorizontalRole = 3 };
constexpr size_t kPromiseRoles = 4;

struct Promise {
  uint64_t txn = 0;
  ArrayWriteMode mode = ArrayWriteMode::kSerialized;
  std::array<uint32_t, kPromiseRoles> disks{};  // by PromiseRole: the archive's disk numbers
  uint64_t offset = 0;                          // the same range on each of them
  uint64_t length = 0;
  std::array<bool, kPromiseRoles> started{};
  std::array<bool, kPromiseRoles> finished{};
  bool has_delta = false;  // delayed: old ⊕ new of the data disk is in the journal
};

class PromiseJournal {
 public:
  // What the journal holds after a replay.
  struct State {
    std::map<uint64_t, Promise> open;  // by txn: promises not yet done
    std::map<uint32_t, RangeSet> defects;  // by disk
    // By disk: the group wrote nothing to it at or past this offset (absent: not known).
    std::map<uint32_t, uint64_t> high_water;
    // Raised each time the group is closed, and recorded in the catalog after it: a journal
    // whose epoch is below the catalog's is an old copy (0: never raised).
    uint64_t epoch = 0;
  };

  // Creates the journal of group `identity` (archive id and group name) at `path`; Exists
  // if there is one.
  static Result<std::unique_ptr<PromiseJournal>> Create(const std::string& path, const std::string& identity);
  // Opens and replays it. A torn last append (a crash in the middle of it, so it returned no
  // success: any of its bytes may be missing) is cut off. NotFound when there is none;
  // Corruption when a record is damaged (a "torn" append with a whole one after it, too) or
  // the journal belongs to another group: its parity cannot be trusted.
  static Result<std::unique_ptr<PromiseJournal>> Open(const std::string& path, const std::string& identity);
  // What the journal at `path` holds, read without changing it (a daemon may be using it):
  // a torn last append is left out, not cut.
  static Result<State> Inspect(const std::string& path, const std::string& identity);
  ~PromiseJournal();
  PromiseJournal(const PromiseJournal&) = delete;
  PromiseJournal& operator=(const PromiseJournal&) = delete;

  const std::string& path() const { return path_; }
  // A copy of what is open and defective now.
  State state() const;

  // Records a new promise (its txn is assigned here) and returns it. One sync.
  Result<Promise> Begin(ArrayWriteMode mode, const std::array<uint32_t, kPromiseRoles>& disks, uint64_t offset,
                        uint64_t length);
  // Records the delta (old ⊕ new data, delayed mode) of open promise `txn`, its pieces one
  // after the other, kept until Done (LoadDelta reads it back). One sync. A promise whose
  // delta never made it (a crash) has none: its data disk was not marked written, so
  // recovery takes the parity's side.
  Status KeepDelta(uint64_t txn, BytePieces delta);
  // The delta of `txn`; NotFound without one, Corruption when its record fails its CRC.
  Result<std::vector<uint8_t>> LoadDelta(uint64_t txn);
  // Marks disk `role` of each promise in `txns` as started or finished, with one sync.
  Status Mark(std::span<const uint64_t> txns, PromiseRole role, bool finished);
  // The promises are kept: every disk they touch is consistent again. Their deltas go. One sync.
  Status Done(std::span<const uint64_t> txns);
  // Adds or removes a range of `disk` whose contents are not trusted until rebuilt.
  Status AddDefect(uint32_t disk, ByteRange range);
  Status RemoveDefect(uint32_t disk, ByteRange range);
  // Records that each of `disks` may be written up to `end` (a mark never goes down). One
  // sync, and none when every mark is there already.
  Status RaiseHighWater(std::span<const uint32_t> disks, uint64_t end);

  // Raises the epoch to `epoch` (never lowers it). One sync, none when it is there already.
  Status RaiseEpoch(uint64_t epoch);
  uint64_t epoch() const;

  // Rewrites the file with only what is still needed (open promises with their deltas,
  // defects), atomically. Done by the appends themselves once the file passes a size.
  Status Compact();
  uint64_t file_bytes() const;

 private:
  PromiseJournal(std::string path, std::string identity, int fd) : path_(std::move(path)), identity_(std::move(identity)), fd_(fd) {}
  // Appends records, then an end record (framed_), and syncs them; `tail` is the rest of the
  // last record's payload (a delta, not copied into `records`); `first` gets where the records
  // start. REQUIRES: mutex_ held.
  Status Append(const std::vector<std::vector<uint8_t>>& records, BytePieces tail = {}, uint64_t* first = nullptr);
  // Reads the records into the state; a torn last append is cut off unless `read_only`.
  Status Replay(bool read_only);
  // The header (identity, next txn, framing) and any other record, into the state.
  Status ReplayHeader(uint64_t at, std::span<const uint8_t> body);
  Status ReplayRecord(uint64_t at, uint32_t length, std::span<const uint8_t> body);
  // A broken record at `broken_at` in the append from `append_start`: the append goes (cut off
  // unless `read_only`) if it is the last one, else the journal is damaged (Corruption).
  Status CutTornAppend(uint64_t broken_at, uint64_t append_start, uint64_t file_size, bool header_seen,
                       bool read_only);
  Status Damaged(uint64_t at, const std::string& why) const;
  Status CompactLocked();
  // Compacts once the file is past compact_above_; a failure is logged, not returned (the
  // records that made it long are durable).
  void CompactIfLarge();

  static constexpr uint64_t kCompactAbove = 64ull << 20;  // file bytes that call for a compaction

  const std::string path_;
  const std::string identity_;
  mutable std::mutex mutex_;
  int fd_;                       // guarded by mutex_ (replaced by compaction)
  uint64_t size_ = 0;            // guarded by mutex_: bytes of valid records
  uint64_t next_txn_ = 1;        // guarded by mutex_
  bool framed_ = true;           // guarded by mutex_: appends end with an end record (not up to commit ff9fb0b)
  State state_;                  // guarded by mutex_
  std::map<uint64_t, uint64_t> delta_at_;  // guarded by mutex_: txn -> file offset of its delta record
  uint64_t compact_above_ = kCompactAbove;  // guarded by mutex_: raised after a failed compaction
  bool name_unsynced_ = false;             // guarded by mutex_: a compaction's rename is not durable yet
  Status unusable_;                        // guarded by mutex_: a failed append could not be cut off
};

}  // namespace cairn
