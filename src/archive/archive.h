// Archive is one opened cairn instance: its options, rules, catalog, staging cache and the
// extent store over its disks (which it opens, groups and takes in and out of service),
// plus the archive lock that keeps a second daemon out. Thread-safe where noted; the
// catalog requires catalog_mutex().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "archive/archive_lock.h"
#include "archive/group_setup.h"
#include "array/lonestar_array.h"
#include "backend/extent_format.h"
#include "cache/staging_cache.h"
#include "cairn/disk.h"
#include "cairn/options.h"
#include "catalog/catalog.h"
#include "codec/transform_pool.h"
#include "keys/file_keys.h"
#include "extent/extent_store.h"
#include "group/disk_group.h"
#include "group/disk_health.h"
#include "policy/resolver.h"
#include "store/block_chunk_store.h"

namespace cairn {

struct MkfsOptions {
  uint32_t disk_count = 4;  // disks of the first group, a pool ("default"); 0 for none
  uint64_t disk_size = 4ull << 30;
  ArchiveOptions options;  // tunables written into cairn.conf
  struct Group {
    GroupSpec spec;
    std::vector<std::string> devices;  // block devices to format instead of images
  };
  std::vector<Group> groups;  // after the default pool, in this order (group_setup.h)
  // Told what takes long (zeroing the devices of a lonestar group), a line at a time.
  std::function<void(const std::string&)> progress;
};

// Creates a new archive in `dir` (absent or empty): config, catalog, cache/, disks/.
Status CreateArchive(const std::string& dir, const MkfsOptions& mkfs);
// Creates the disk image `path` of `size` bytes with the superblock of disk `index`.
Status FormatDisk(const std::string& path, uint32_t index, const ArchiveId& id, uint64_t size);
// Writes the superblock of disk `index` (of `size` bytes) on the existing device or file `path`.
Status FormatDevice(const std::string& path, uint32_t index, const ArchiveId& id, uint64_t size);
// The journal of lonestar group `group` of the archive in `dir`, and what it is stamped with.
std::string LoneStarJournalPath(const std::string& dir, const std::string& group);
std::string LoneStarIdentity(const std::string& archive_id, const std::string& group);
// Rewrites dir/cairn.conf, durably (a temporary file renamed over it).
Status SaveConfig(const std::string& dir, const ArchiveOptions& options);
// InvalidArgument when cairn.conf could not record `path` as it is (it reads a value up to a
// '#', trimmed, one per line): checked before a path is put to use.
Status CheckRecordablePath(const std::string& path);
// Adds `disk` to failed_disks in dir/cairn.conf.
Status MarkDiskFailed(const std::string& dir, uint32_t disk);

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
  // The extents on the disks: their chunk stores and groups, extent and chunk I/O. Thread-safe.
  ExtentStore& extents() { return *extents_; }
  // The threads that transform extents for the persister and the reconciler, started on
  // first use (options().transform_workers of them, or one per core).
  TransformPool& transform_pool();
  // The data keys of encrypted files and the keystore that wraps them. Thread-safe; call
  // it without holding the catalog mutex (except where FileKeys says otherwise).
  FileKeys& file_keys() { return *file_keys_; }
  // options().keystore, or ARCHIVE/keystore.
  std::string keystore_path() const;
  // For cairn key: counts ("count"), re-wraps with the newest version ("rewrap") or
  // crypto-erases ("erase") the data keys master key `key_name` wraps, the change durable
  // when it returns; how many. An erase adds the inodes whose keys it dropped to `*erased`
  // (when given), also when making that durable fails. REQUIRES: catalog_mutex NOT held.
  Result<uint64_t> ChangeFileKeys(const std::string& action, const std::string& key_name,
                                  std::vector<uint64_t>* erased = nullptr);
  // The extent store's disks and groups (see there). Thread-safe.
  size_t disk_count() const { return extents_->disk_count(); }
  Disk& disk(size_t index) { return extents_->disk(index); }
  ChunkStore& store(size_t index) { return extents_->store(index); }
  const std::vector<DiskGroup>& groups() const { return extents_->groups(); }
  const DiskGroup& group_of(size_t disk) const { return extents_->group_of(disk); }
  Result<const DiskGroup*> group_named(std::string_view name) const { return extents_->group_named(name); }
  uint64_t free_bytes() const { return extents_->free_bytes(); }
  uint64_t capacity() const { return extents_->capacity(); }

  // The admin rules in force (ARCHIVE/rules, or built-in defaults when there is none)
  // and the rest of what policy resolution needs. Thread-safe.
  PolicyContext policy_context() const;
  std::string rules_path() const { return dir_ + "/rules"; }
  // (Re)reads ARCHIVE/rules. A broken file is an error naming file:line:column and the
  // rules in force stay. When the rules differ from those the catalog last saw, the whole
  // tree is queued for a policy check. Takes the catalog mutex.
  Status LoadRules();
  // InvalidArgument when placement=`placement` names a disk group the archive does not have.
  Status CheckPlacementFits(const std::string& placement) const;
  // InvalidArgument when raid=`raid` cannot be kept by the group placement=`placement` sends
  // a file to (raid=2d on a pool, rs-K-M on a lonestar group).
  Status CheckRaidInGroup(const std::string& raid, const std::string& placement) const;
  // The failure domain of a disk: its domain.N name, or a domain of its own.
  std::string DomainOf(size_t disk) const;
  // Keeps `policy`, what regular file `ino` had under its last name, for as long as the file
  // lives without a name (unlinked while the kernel references it, or with data not persisted
  // yet): what it still writes is persisted under that policy, not under its own attributes
  // alone, so an encrypted directory's file never reaches the disks in clear. In memory only:
  // such a file is freed at the next mount. Undone with the catalog operation it is made in,
  // if that is rolled back; ForgetUnlinked when the file is freed. REQUIRES: catalog_mutex held.
  void KeepPolicyOfUnlinked(uint64_t ino, ResolvedPolicy policy) {
    unlinked_policies_[ino] = std::move(policy);
    if (catalog_->in_operation()) op_unlinked_.push_back(ino);
  }
  void ForgetUnlinked(uint64_t ino) { unlinked_policies_.erase(ino); }

  std::mutex& catalog_mutex() { return catalog_mutex_; }
  Catalog& catalog() { return *catalog_; }  // REQUIRES: catalog_mutex held

  // Catalog commits and the work that waits until they are durable (archive_commit.cc).
  // This bookkeeping stays with the Archive, which owns the catalog, its mutex and the
  // staging cache; the space it releases goes back through ExtentStore::FreeCommitted.
  //
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
  // space with FreeAfterDurableCommit) when none is left. An extent whose count says none is
  // left while other segments still use it is kept, with a log line (a damaged count).
  // REQUIRES: catalog_mutex held, inside a catalog transaction.
  Status UnrefExtent(uint64_t extent_id);
  // Whether disk `index` takes new chunks and serves reads: neither out nor awaiting rebuild.
  bool InService(size_t disk) const { return health_.InService(disk); }
  // Disks out of service (missing at open with -o degraded, or failed since), by index,
  // with the reason. Thread-safe.
  std::map<size_t, std::string> missing_disks() const { return health_.missing(); }
  bool IsOut(size_t disk) const { return health_.IsOut(disk); }
  // Whether disk `index` can be read: in service, or a bucket of a lonestar group, which its
  // parity serves when it is out or not rebuilt yet. Thread-safe.
  bool ServesReads(size_t disk) const { return health_.ServesReads(disk); }
  // Disks replaced and not yet filled by cairn rebuild: their chunks are read from the
  // others and nothing new goes to them. Thread-safe.
  std::set<uint32_t> awaiting_rebuild() const { return health_.awaiting_rebuild(); }
  bool AwaitsRebuild(size_t disk) const { return health_.AwaitsRebuild(disk); }
  // After a complete rebuild the replaced disks are in service again (cairn.conf too).
  Status FinishRebuild();
  // Takes a disk out of service now (cairn disk fail on a mounted archive): its chunks
  // are read from the others and nothing new goes to it; recorded in cairn.conf.
  Status FailDisk(size_t disk);

  // The arrays of the lonestar groups, in cairn.conf's order (none when opened read-only),
  // and the one disk `disk` belongs to with its grid position (null when none). Thread-safe.
  const std::vector<std::unique_ptr<LoneStarArray>>& arrays() const { return arrays_; }
  std::pair<LoneStarArray*, uint32_t> array_of(size_t disk) const;

  // The pid recorded in the lock file of `dir`, or 0 when no daemon holds the archive.
  static int LockHolder(const std::string& dir) { return ArchiveLock::Holder(dir); }

 private:
  Archive() = default;
  static Result<std::unique_ptr<Archive>> OpenWithLock(const std::string& dir, const OpenOptions& open,
                                                       std::optional<ArchiveLock> held);
  // A disk cairn.conf lists, checked against its superblock; with open.degraded, a missing or
  // damaged disk is marked out of service and stands in as a MissingDisk.
  struct OpenedDisk {
    std::unique_ptr<Disk> disk;
    Superblock sb;
    bool missing = false;
  };
  Result<OpenedDisk> OpenDisk(size_t index, const OpenOptions& open);
  // Makes every extent id up to `ceiling` count as used in the catalog, durably (for
  // ExtentStore::NewExtentId). REQUIRES: catalog_mutex NOT held.
  Status RecordExtentIdCeiling(uint64_t ceiling);
  // The chunk stores of the disks cairn.conf lists, by index: a lonestar group's read and
  // write through its array (a missing bucket reads through its parity), other disks'
  // directly (a missing one fails every call).
  Status LoadDisks(const OpenOptions& open, std::vector<std::unique_ptr<BlockChunkStore>>* stores);
  // Opens the array of lonestar `group` over its `opened` disks and gives each its store.
  Status OpenArray(const ArchiveOptions::Group& group, std::vector<OpenedDisk>& opened,
                   std::vector<std::unique_ptr<BlockChunkStore>>* stores);
  // The groups cairn.conf forms over `stores` (one pool of every disk when it names none).
  std::vector<DiskGroup> MakeGroups(const std::vector<std::unique_ptr<BlockChunkStore>>& stores) const;
  // Marks the room of every chunk in the catalog as used.
  Status RebuildSpaceMaps();
  // At a close: each array's journal gets a new epoch, which the catalog then records (a
  // journal put back from an older copy is caught at the next open). Failures are logged.
  void SealArrayEpochs();
  // Joins (commit) or drops (rollback) what the ending catalog operation queued. Set as
  // the catalog's listener. REQUIRES: catalog_mutex held.
  void EndOperation(bool committed);

  std::string dir_;
  ArchiveOptions options_;
  std::string first_group_;                  // where new data goes without placement=group=
  std::set<std::string> lonestar_groups_;    // the groups of type lonestar, by name
  ArchiveId id_{};
  std::optional<ArchiveLock> lock_;  // while this process owns the archive
  std::mutex catalog_mutex_;
  std::unique_ptr<Catalog> catalog_;
  StagingCache cache_{""};
  DiskHealth health_;
  // The lonestar groups' arrays, in cairn.conf's order (none when read-only): destroyed after
  // extents_, whose stores read and write through them.
  std::vector<std::unique_ptr<LoneStarArray>> arrays_;
  bool seal_array_epochs_ = false;  // at the close: a writer with the lock (not fsck)
  std::unique_ptr<ExtentStore> extents_;
  std::unique_ptr<FileKeys> file_keys_;
  std::once_flag transform_pool_started_;
  std::unique_ptr<TransformPool> transform_pool_;
  std::mutex rules_reload_mutex_;  // held by LoadRules throughout; taken before catalog_mutex_
  UnlinkedPolicies unlinked_policies_;  // guarded by catalog_mutex_
  mutable std::mutex rules_mutex_;
  std::shared_ptr<const RuleSet> rules_;  // guarded by rules_mutex_
  // Guarded by catalog_mutex_. The op_ lists belong to the catalog operation in progress:
  // they join the others when it commits and vanish if it is rolled back.
  std::vector<ExtentRecord> freed_;
  std::vector<uint64_t> cache_removals_;
  std::vector<ExtentRecord> op_freed_;
  std::vector<uint64_t> op_cache_removals_;
  std::vector<uint64_t> op_unlinked_;  // kept policies to drop if the operation is rolled back
};

}  // namespace cairn
