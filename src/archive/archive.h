// Archive is one opened cairn instance: its options, catalog, staging cache, the chunk
// stores of its disks and the disk groups they form, plus the archive lock that keeps a
// second daemon out. Thread-safe where noted; the catalog requires catalog_mutex().
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <optional>
#include <string>
#include <vector>

#include "archive/archive_lock.h"
#include "backend/extent_format.h"
#include "cache/staging_cache.h"
#include "cairn/disk.h"
#include "cairn/options.h"
#include "catalog/catalog.h"
#include "group/disk_group.h"
#include "policy/resolver.h"
#include "redundancy/striping.h"
#include "store/block_chunk_store.h"

namespace cairn {

struct MkfsOptions {
  uint32_t disk_count = 4;
  uint64_t disk_size = 4ull << 30;
  ArchiveOptions options;  // tunables written into cairn.conf
};

// Creates a new archive in `dir` (absent or empty): config, catalog, cache/, disks/.
Status CreateArchive(const std::string& dir, const MkfsOptions& mkfs);
// Creates the disk image `path` of `size` bytes with the superblock of disk `index`.
Status FormatDisk(const std::string& path, uint32_t index, const ArchiveId& id, uint64_t size);
// Rewrites dir/cairn.conf, durably (a temporary file renamed over it).
Status SaveConfig(const std::string& dir, const ArchiveOptions& options);
// Adds `disk` to failed_disks in dir/cairn.conf.
Status MarkDiskFailed(const std::string& dir, uint32_t disk);

// How an extent's stored payload was made, recorded in the header of each of its chunks.
struct ExtentEncoding {
  std::string policy_stamp;  // the resolved policy (WritePlan::policy_stamp)
  Redundancy redundancy;
  std::string chain_stamp;      // the transform chain (TransformChain::Stamp()), "" for none
  uint64_t logical_length = 0;  // of the payload the chain was given
  uint32_t members_length = 0;  // the member table ending the logical payload (backend/member_table.h)
  std::string group;            // the disk group its chunks go to (WritePlan::group), "" for the first
};

// Catalog meta key set while `cairn recover` rebuilds the catalog: until it is cleared only
// recover opens the archive (its still empty catalog would make every chunk look free).
constexpr const char* kRecoverUnfinishedMeta = "recover_unfinished";

class Archive {
 public:
  struct OpenOptions {
    bool lock = true;        // take the archive lock (a daemon or fsck)
    bool read_only = false;  // open the catalog read-only (status)
    bool check_only = false; // fsck: do not refuse an inconsistent extent map, report it
    bool degraded = false;   // open even when disks are missing (they read as failed)
    bool repair_on_read = true;  // rewrite a damaged chunk when a read rebuilt it
    std::vector<std::pair<std::string, std::string>> overrides;  // -o key=value
    // Wraps each opened disk (fault injection, accounting); null keeps them as they are.
    std::function<std::unique_ptr<Disk>(std::unique_ptr<Disk> disk, size_t index)> wrap_disk;
  };
  static Result<std::unique_ptr<Archive>> Open(const std::string& dir, const OpenOptions& open);
  // With the archive lock this process already holds (cairn recover keeps it from setting
  // the old catalog aside to the end); open.lock is then ignored.
  static Result<std::unique_ptr<Archive>> Open(const std::string& dir, const OpenOptions& open, ArchiveLock held);
  ~Archive();

  const std::string& dir() const { return dir_; }
  const ArchiveOptions& options() const { return options_; }
  const ArchiveId& id() const { return id_; }
  StagingCache& cache() { return cache_; }
  size_t disk_count() const { return stores_.size(); }
  // Disk `index` itself, for the tools that scan it block by block (fsck, recover, status).
  Disk& disk(size_t index) { return stores_[index]->disk(); }
  // The chunk store of disk `index`. Thread-safe.
  ChunkStore& store(size_t index) { return *stores_[index]; }
  // The disk groups, new data going to the first; and the group disk `index` belongs to.
  const std::vector<DiskGroup>& groups() const { return groups_; }
  const DiskGroup& group_of(size_t disk) const { return groups_[group_of_disk_[disk]]; }
  // The group called `name`, the first for ""; InvalidArgument naming it when there is none.
  Result<const DiskGroup*> group_named(std::string_view name) const;
  // Room left for chunks and room in all, over every disk. Thread-safe.
  uint64_t free_bytes() const;
  uint64_t capacity() const;

  // The admin rules in force (ARCHIVE/rules, or built-in defaults when there is none)
  // and the rest of what policy resolution needs. Thread-safe.
  PolicyContext policy_context() const;
  std::string rules_path() const { return dir_ + "/rules"; }
  // (Re)reads ARCHIVE/rules. A broken file is an error naming file:line:column and the
  // rules in force stay. When the rules differ from those the catalog last saw, the whole
  // tree is queued for a policy check. Takes the catalog mutex.
  Status LoadRules();
  // InvalidArgument when raid=`raid` needs more distinct disks (or failure domains) than
  // the archive has.
  Status CheckRaidFits(std::string_view raid) const;
  // InvalidArgument when placement=`placement` names a disk group the archive does not have.
  Status CheckPlacementFits(const std::string& placement) const;
  // The failure domain of a disk: its domain.N name, or a domain of its own.
  std::string DomainOf(size_t disk) const;

  std::mutex& catalog_mutex() { return catalog_mutex_; }
  Catalog& catalog() { return *catalog_; }  // REQUIRES: catalog_mutex held

  // A fresh extent id (never reused within this archive's catalog). Thread-safe.
  uint64_t NewExtentId() { return next_extent_id_.fetch_add(1); }
  // The highest extent id handed out so far (or found in the catalog at open). Thread-safe.
  uint64_t MaxExtentIdUsed() const { return next_extent_id_ - 1; }
  // Makes NewExtentId() return more than `max_id` (cairn recover: ids found on the disks).
  void ReserveExtentIds(uint64_t max_id) {
    for (uint64_t next = next_extent_id_; next <= max_id && !next_extent_id_.compare_exchange_weak(next, max_id + 1);) {
    }
  }

  // Cuts the stored `payload` into the chunks `encoding.redundancy` asks for, has the placer
  // of disk group `encoding.group` (InvalidArgument naming it when there is none) reserve room for each in its own failure domain (disks in service
  // only) and writes them there, their headers saying how the payload was made (`encoding`),
  // without syncing. On success the caller owns the reservation: commit the returned record
  // to the catalog, or hand it back with ReleaseUncommitted. Thread-safe.
  Result<ExtentRecord> WriteExtentToDisk(ExtentKind kind, uint64_t ino, uint64_t file_offset,
                                         std::span<const uint8_t> payload, const ExtentEncoding& encoding);
  // Returns the space of an extent that was never committed. Thread-safe.
  void ReleaseUncommitted(const ExtentRecord& extent);
  // Reserves room for chunk `index` of `extent` on another disk of its group, in a failure
  // domain that holds no other chunk of it (rebuild of a chunk whose disk is out). The
  // caller writes it with WriteChunkAt, then records it or hands it back with
  // ReleaseUncommittedChunk. Thread-safe.
  Result<ChunkPlacement> ReserveRelocation(const ExtentRecord& extent, size_t index);
  void ReleaseUncommittedChunk(const ChunkPlacement& chunk);
  // Writes a chunk into room reserved for it, without syncing. Thread-safe.
  Status WriteChunkAt(const ChunkPlacement& chunk, const ExtentHeader& header, std::span<const uint8_t> bytes);
  // Makes the writes to disk `index` so far durable. Thread-safe.
  Status SyncDisk(size_t index) { return stores_[index]->Sync(); }
  // Marks the room of a chunk found on the disks as used (cairn recover, before it
  // writes anything). Corruption when it overlaps another.
  Status MarkChunkUsed(const ChunkPlacement& chunk) { return stores_[chunk.disk]->MarkUsed(chunk.locator()); }
  // Queues the space of an extent whose deletion is in the current transaction; it is
  // reused only after a commit that made that deletion durable (Commit + MakeDurable), so a
  // power loss can never roll the catalog back to an extent whose blocks were overwritten.
  // REQUIRES: catalog_mutex held.
  void FreeAfterDurableCommit(const ExtentRecord& extent) {
    (catalog_->in_operation() ? op_freed_ : freed_).push_back(extent);
  }
  // Removes the cache file of a deleted inode once its deletion is durable, so neither a
  // crash nor a power loss before that can leave a live inode without its unpersisted data.
  // REQUIRES: catalog_mutex held.
  void RemoveCacheAfterFlush(uint64_t ino) {
    (catalog_->in_operation() ? op_cache_removals_ : cache_removals_).push_back(ino);
  }

  // When a commit of the catalog's batch is also made durable (survives a power loss).
  enum class SyncWhen {
    kNever,      // a crash of the daemon cannot undo it; queued frees and removals wait
    kIfWaiting,  // when space or cache files wait for a durable commit
    kAlways,     // fsync, persist: what the user was told is durable
  };
  // What a commit leaves to do once it is on stable storage: the WAL sync, then the space
  // and cache files its deletions released.
  struct PendingSync {
    uint64_t sequence = 0;  // the catalog commit to sync through; 0: nothing to do
    std::vector<ExtentRecord> freed;
    std::vector<uint64_t> cache_removals;
  };
  // Commits the batch of metadata changes and, as `when` asks, hands what must follow a
  // sync to *pending, for MakeDurable once the mutex is dropped: no metadata operation
  // waits for an fsync or a discard. REQUIRES: catalog_mutex held, no open operation.
  Status Commit(SyncWhen when, PendingSync* pending);
  // Syncs the catalog through `pending`'s commit, then releases its space (discarding it)
  // and removes its cache files. When the sync fails they stay as they are (the space is
  // free again after the next mount). REQUIRES: catalog_mutex NOT held.
  Status MakeDurable(PendingSync pending);
  // Commit + MakeDurable, for callers that hold nothing (takes the catalog mutex).
  Status CommitDurably();
  // Drops one segment's reference to an extent, deleting the extent (and queueing its
  // space with FreeAfterDurableCommit) when none is left.
  // REQUIRES: catalog_mutex held, inside a catalog transaction.
  Status UnrefExtent(uint64_t extent_id);
  // Reads and verifies an extent's payload: the chunks it needs, more when some fail
  // (degraded read), the reconstruction checked against the payload CRC. Each disk's
  // first failure is logged. Thread-safe.
  Result<std::vector<uint8_t>> ReadExtentPayload(const ExtentRecord& extent);
  // Reads and verifies chunk `index` of `extent`; *idr_repaired says whether intra-disk
  // parity had to rebuild blocks of it (the bytes are good, the disk is not), *header its
  // header. Thread-safe.
  Result<std::vector<uint8_t>> ReadChunk(const ExtentRecord& extent, size_t index, bool* idr_repaired = nullptr,
                                         ExtentHeader* header = nullptr);
  // The header of chunk `index` (policy stamp, inode, ...), checked.
  Result<ExtentHeader> ReadChunkHeader(const ExtentRecord& extent, size_t index);
  // The first chunk header of `extent` that reads and checks: the template for rewriting
  // any chunk of it (the chunk's own fields are set by RewriteChunk).
  Result<ExtentHeader> ReadAnyChunkHeader(const ExtentRecord& extent);
  // Rewrites chunk `index` of `extent` where it is, with its `bytes` and the header of a
  // good chunk, unless the catalog no longer has that chunk there (then false). The caller
  // syncs the disk. Thread-safe.
  Result<bool> RewriteChunk(const ExtentRecord& extent, size_t index, ExtentHeader header,
                            std::span<const uint8_t> bytes);
  // Reads and checks every chunk of an extent (fsck): one status per chunk, and the chunks
  // that read well in *chunks.
  std::vector<Status> CheckChunks(const ExtentRecord& extent, ChunkSet* chunks);
  // The payload joined from `chunks` (some may be missing), each rebuilt data chunk checked
  // against its digest and the payload against its CRC.
  Result<std::vector<uint8_t>> JoinVerified(const ExtentRecord& extent, ChunkSet& chunks);
  // Whether disk `index` takes new chunks and serves reads: neither out nor awaiting rebuild.
  bool InService(size_t disk) const { return !IsOut(disk) && !AwaitsRebuild(disk); }
  // Disks out of service (missing at open with -o degraded, or failed since), by index,
  // with the reason. Thread-safe.
  std::map<size_t, std::string> missing_disks() const;
  bool IsOut(size_t disk) const;
  // Disks replaced and not yet filled by cairn rebuild: their chunks are read from the
  // others and nothing new goes to them. Thread-safe.
  std::set<uint32_t> awaiting_rebuild() const;
  bool AwaitsRebuild(size_t disk) const;
  // After a complete rebuild the replaced disks are in service again (cairn.conf too).
  Status FinishRebuild();
  // Takes a disk out of service now (cairn disk fail on a mounted archive): its chunks
  // are read from the others and nothing new goes to it; recorded in cairn.conf.
  Status FailDisk(size_t disk);

  // The pid recorded in the lock file of `dir`, or 0 when no daemon holds the archive.
  static int LockHolder(const std::string& dir) { return ArchiveLock::Holder(dir); }

 private:
  Archive() = default;
  static Result<std::unique_ptr<Archive>> OpenWithLock(const std::string& dir, const OpenOptions& open,
                                                       std::optional<ArchiveLock> held);
  Status LoadDisks(const OpenOptions& open);
  void MakeGroups();
  // Rewrites the chunks a read found bad (on disks that are there), from the payload.
  void RepairOnRead(const ExtentRecord& extent, const std::vector<size_t>& failed, std::span<const uint8_t> payload);
  Status RebuildSpaceMaps();

  std::string dir_;
  ArchiveOptions options_;
  ArchiveId id_{};
  std::optional<ArchiveLock> lock_;  // while this process owns the archive
  std::mutex catalog_mutex_;
  std::unique_ptr<Catalog> catalog_;
  StagingCache cache_{""};
  std::vector<std::unique_ptr<BlockChunkStore>> stores_;  // by disk index
  std::vector<DiskGroup> groups_;                          // over stores_
  std::vector<size_t> group_of_disk_;                      // index into groups_, by disk
  mutable std::mutex missing_mutex_;
  std::map<size_t, std::string> missing_;  // guarded by missing_mutex_
  std::set<uint32_t> awaiting_rebuild_;    // guarded by missing_mutex_
  bool repair_on_read_ = false;
  std::mutex failures_mutex_;
  std::set<uint32_t> failed_disks_logged_;  // guarded by failures_mutex_
  std::atomic<uint64_t> next_extent_id_{1};
  mutable std::mutex rules_mutex_;
  std::shared_ptr<const RuleSet> rules_;  // guarded by rules_mutex_
  // Guarded by catalog_mutex_. The op_ lists belong to the catalog operation in progress:
  // they join the others when it commits and vanish if it is rolled back.
  std::vector<ExtentRecord> freed_;
  std::vector<uint64_t> cache_removals_;
  std::vector<ExtentRecord> op_freed_;
  std::vector<uint64_t> op_cache_removals_;
  // Shared while a chunk is rewritten in place after the catalog said it is still there;
  // exclusive while committed-free space is handed back. Never taken with catalog_mutex_
  // held, so a rewrite waits on a disk without blocking metadata.
  std::shared_mutex space_mutex_;
};

// The header of chunk `index` (`length` bytes, placed as `chunk` says), made from the header
// of any chunk of the same extent.
ExtentHeader HeaderForChunk(ExtentHeader header, size_t index, const ChunkPlacement& chunk, uint64_t length);

}  // namespace cairn
