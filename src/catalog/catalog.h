// Catalog is the archive's SQLite database: namespace (inodes, names, xattrs), file →
// segment maps and segment → extent placement. Row-level operations only; POSIX rules
// live in Filesystem. Not thread-safe: callers serialize access (Archive::catalog_mutex).
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <string>
#include <vector>

#include "cairn/status.h"
#include "backend/extent_format.h"
#include "catalog/batch_journal.h"
#include "catalog/statement.h"
#include "catalog/wal_checkpointer.h"
#include "catalog/wal_sync.h"
#include "store/chunk_locator.h"

namespace cairn {

// 4 added inodes.generation, 5 extents.logical_length and extents.chain, 6 the file_keys
// table; older catalogs (from version 3 on) are upgraded when opened for writing.
constexpr int kCatalogSchemaVersion = 6;
constexpr uint64_t kRootInode = 1;

struct InodeRecord {
  uint64_t ino = 0;
  uint32_t mode = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t nlink = 0;
  uint64_t size = 0;
  uint64_t rdev = 0;
  int64_t atime_ns = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t segment_size = 0;  // fixed at first persist; 0 = never persisted
  bool dirty = false;         // the staging cache holds data not yet persisted
  std::string symlink;        // target, for symlinks
  uint64_t layout_id = 0;     // the policy its extents were written with (InternLayout); 0 = none yet
  // The catalog's epoch (opens for writing so far) when the inode was made, 0 for the root:
  // FUSE's generation, so a number reused after a lost commit is a different file.
  uint64_t generation = 0;
};

struct DirEntryRecord {
  uint64_t cookie = 0;  // stable position for readdir
  std::string name;
  uint64_t ino = 0;
};

// A segment whose bytes are all zero is stored as no extent at all (sparse files).
constexpr uint64_t kHoleExtent = 0;

// Segment `index` of inode `ino` is `length` bytes at `extent_offset` in the logical payload
// of extent `extent_id` (what its transform chain decodes to). `cached` means the staging
// cache also holds it (and is authoritative).
struct SegmentRecord {
  uint64_t ino = 0;
  uint64_t index = 0;
  uint64_t extent_id = 0;
  uint64_t extent_offset = 0;
  uint64_t length = 0;
  bool cached = false;
  // A hole (extent_id == kHoleExtent): the extent whose member table records it, which it
  // references so no older data of the segment outlives that record on the disks (cairn
  // recover); 0 for none (holes persisted before they were recorded). Stored in the
  // extent_offset column, which a hole does not use.
  uint64_t hole_record = 0;

  // The extent this row holds a reference to (0: none).
  uint64_t referenced_extent() const { return extent_id == kHoleExtent ? hole_record : extent_id; }
};

// What the segment rows of one file add up to: enough to check them against the inode
// (CheckSegmentSummary) without loading them all.
struct SegmentSummary {
  uint64_t count = 0;
  uint64_t negative = 0;          // rows with a negative idx, length or extent_offset
  uint64_t last_index = 0;        // the highest idx, and that segment's length
  uint64_t last_length = 0;
  uint64_t max_length = 0;        // the longest segment
  uint64_t max_extent_offset = 0;  // of the rows with data
};

// The disk of a chunk no one knows the place of: one `cairn recover` did not find, whose
// digest it does not know either.
constexpr uint32_t kNoDisk = UINT32_MAX;

// Where one chunk of an extent lives: its own on-disk extent (header + bytes).
struct ChunkPlacement {
  uint32_t disk = 0;
  // The chunk's locator in the store of its disk, as the catalog keeps it (a block store's
  // byte offset and the room it reserved): use locator(), which only the store interprets.
  uint64_t offset = 0;
  uint64_t alloc_length = 0;
  uint32_t crc = 0;  // CRC32C of the chunk's bytes (before intra-disk parity)
  Digest digest{};   // their digest by the extent's checksum type (zeros for crc32c)
  bool operator==(const ChunkPlacement&) const = default;

  ChunkLocator locator() const { return {offset, alloc_length}; }
  static ChunkPlacement At(uint32_t disk, const ChunkLocator& locator, uint32_t crc, const Digest& digest) {
    return {disk, locator.address, locator.length, crc, digest};
  }
};

// A payload (one segment, or a pack of small ones) and the chunks that hold it. The logical
// payload (file data, then the member table) goes through the transform chain (codec/) to
// become the stored payload that the chunks hold.
// A file's data key, wrapped (encrypted) with version `master_version` of master key `key_name`.
struct FileKeyRecord {
  uint64_t ino = 0;
  std::string key_name;
  uint32_t master_version = 0;
  std::vector<uint8_t> wrapped;
};

struct ExtentRecord {
  uint64_t id = 0;
  uint64_t payload_length = 0;  // stored bytes
  uint32_t payload_crc = 0;     // of the stored bytes
  int kind = 1;       // an ExtentKind (backend/extent_format.h)
  uint64_t refs = 0;  // segments that point into this extent
  Redundancy redundancy;
  std::vector<ChunkPlacement> chunks;  // redundancy.chunk_count() of them, on distinct disks
  uint64_t logical_length = 0;  // equal to payload_length when the chain is empty
  std::string chain_stamp;      // TransformChain::Stamp(), "" for none
  // Read from a row: what of its columns did not fit the fields above ("" when all did),
  // which CheckExtentRecord refuses.
  std::string undecodable;
};

// Every call that reads or writes rows returns a Status or Result: a failing query is an
// error, never an empty or partial answer.
class Catalog {
 public:
  // Creates a new catalog at `path` with the root directory owned by uid/gid, and the `meta`
  // keys set in the same first commit (recover's unfinished mark: no catalog without it).
  static Result<std::unique_ptr<Catalog>> Create(const std::string& path, uint32_t uid, uint32_t gid, int64_t now_ns,
                                                 const std::vector<std::pair<std::string, std::string>>& meta = {});
  // Opens an existing catalog; refuses an unknown schema version. An older schema is upgraded,
  // or, read-only, shown through views with the newer columns.
  static Result<std::unique_ptr<Catalog>> Open(const std::string& path, bool read_only = false);
  ~Catalog();

  // Changes accumulate in one open SQLite transaction, the batch, which Flush() commits;
  // metadata-heavy work (tar, rsync) then costs B-tree updates, not a commit per call.
  // Begin/Commit bracket one operation as a savepoint inside the batch, so Rollback()
  // undoes that operation alone. They nest by counting. Nothing is durable until flushed.
  // When SQLite rolls the batch back (a failed COMMIT: disk full, I/O error), the catalog
  // replays it from its journal, so acknowledged operations stay, and refuses new ones
  // (Begin answers EROFS) until a Flush() commits it; write_failure() says why meanwhile.
  Status Begin();
  Status Commit();
  void Rollback();
  Status write_failure() const { return commit_failure_; }
  // Told when an operation's savepoint is released or rolled back, so in-memory side
  // effects can follow the catalog.
  struct Listener {
    std::function<void()> op_committed;
    std::function<void()> op_rolled_back;
  };
  void SetListener(Listener listener) { listener_ = std::move(listener); }
  bool in_operation() const { return txn_depth_ > 0; }
  // Commits the batch (no-op when none is open; Busy inside an operation). The commit
  // survives a crash of the daemon; SyncThrough(commit_sequence()) makes it survive a power
  // loss too, and need not be called under the mutex that serializes the catalog's users.
  Status Flush();
  // Flush, then SyncThrough the commit: for callers that may wait under that mutex.
  Status FlushDurably();
  // The number of the last commit. Thread-safe.
  uint64_t commit_sequence() const { return wal_sync_ ? wal_sync_->committed() : 0; }
  // Returns once commits up to `sequence` are on stable storage (one fsync of the WAL
  // covers every commit before it). Thread-safe.
  Status SyncThrough(uint64_t sequence);
  // Checkpoints the WAL from a background thread from now on (passive, restarting it between
  // two batches past 2 MiB, truncating when idle) instead of in the commits; for the
  // daemon. `mutex` is the one every catalog call is made under: the checkpointer takes it
  // (between two batches) until StopCheckpoints, which must not be called with it held.
  Status StartCheckpoints(std::mutex& mutex, std::chrono::milliseconds interval = std::chrono::seconds(1));
  void StopCheckpoints();

  Result<std::string> GetMeta(const std::string& key);
  Status SetMeta(const std::string& key, const std::string& value);

  // --- inodes
  Result<InodeRecord> GetInode(uint64_t ino);
  // Assigns ino: numbers only grow while the catalog is open, whatever is rolled back,
  // so none the kernel may still hold comes back; and generation.
  Result<uint64_t> InsertInode(const InodeRecord& record);
  // The generation InsertInode records for the inodes it makes now.
  uint64_t new_inode_generation() const { return epoch_; }
  // How many changes that may change some file's effective policy were made through this
  // catalog: to names, to attributes, to owners (NotePolicyChange), and policy checks queued
  // (a rules reload queues one). A first persist compares it with the count when its plan
  // was made.
  uint64_t policy_changes() const { return policy_changes_; }
  void NotePolicyChange() { policy_changes_++; }
  Status RestoreInode(const InodeRecord& record);  // keeps record.ino (cairn recover)
  // Makes later InsertInode / extent ids start above these (cairn recover: ids seen on the
  // disks are never handed out again, even those of extents it did not keep).
  Status RaiseIdFloors(uint64_t max_ino, uint64_t max_extent_id);
  // Makes the epoch (the generation of inodes made or restored from now on) exceed
  // `max_generation` (cairn recover: generations recorded on the disks).
  Status RaiseEpoch(uint64_t max_generation);
  Status UpdateInode(const InodeRecord& record);
  Status DeleteInode(uint64_t ino);  // with its xattrs and its data key
  // How many inodes there are, counted once and then kept up to date (statfs).
  Result<uint64_t> InodeCount();
  Result<std::vector<uint64_t>> InodesWhere(const char* condition);  // e.g. "dirty = 1"

  // --- directory entries
  Result<uint64_t> Lookup(uint64_t parent, const std::string& name);
  Status InsertEntry(uint64_t parent, const std::string& name, uint64_t ino);
  Status DeleteEntry(uint64_t parent, const std::string& name);
  Status MoveEntry(uint64_t parent, const std::string& name, uint64_t new_parent, const std::string& new_name);
  Status RepointEntry(uint64_t parent, const std::string& name, uint64_t ino);
  Result<bool> HasEntries(uint64_t dir);
  // Up to `limit` entries of `dir` with cookie > `after`, in cookie order.
  Result<std::vector<DirEntryRecord>> ListEntries(uint64_t dir, uint64_t after, size_t limit);
  // The directory holding `ino` (any one of its names), for ".." and loop checks.
  Result<uint64_t> ParentOf(uint64_t ino);
  // Whether directory `dir` is `ancestor` or below it. The walk up is bounded: a cycle of
  // parents (a damaged catalog) is Corruption naming its inodes.
  Result<bool> IsWithin(uint64_t dir, uint64_t ancestor);
  // One name of `ino`: (directory, name).
  Result<std::pair<uint64_t, std::string>> NameOf(uint64_t ino);
  // Up to `limit` entries of `dir` whose inodes have no data of their own (directories,
  // symlinks, special files, empty regular files), with those inodes.
  Result<std::vector<std::pair<std::string, InodeRecord>>> EntriesWithoutData(uint64_t dir, size_t limit);
  // Up to `limit` names of `ino` (hard links), in the order they were made.
  Result<std::vector<std::pair<uint64_t, std::string>>> NamesOf(uint64_t ino, size_t limit);

  // --- extended attributes
  Result<std::vector<uint8_t>> GetXattr(uint64_t ino, const std::string& name);
  Status SetXattr(uint64_t ino, const std::string& name, std::span<const uint8_t> value);
  Status RemoveXattr(uint64_t ino, const std::string& name);  // NotFound if absent
  Result<std::vector<std::string>> ListXattrs(uint64_t ino);
  // The inodes (at most `limit`, lowest first) with attribute `name` set to `value`.
  Result<std::vector<uint64_t>> InodesWithXattr(const std::string& name, std::string_view value, size_t limit);
  // (name, value) of the attributes of `ino` whose names start with one of `prefixes`.
  Result<std::vector<std::pair<std::string, std::string>>> XattrsWithPrefix(
      uint64_t ino, std::initializer_list<std::string_view> prefixes);

  // --- policy stamps: the resolved policy each file's extents were written with
  Result<uint64_t> InternLayout(const std::string& stamp);  // id of an existing or new stamp
  Result<std::string> LayoutStamp(uint64_t id);  // Corruption when the row fails CheckLayoutStamp

  // --- inodes (files, or directories standing for their subtree) whose effective policy
  // may have changed since they were persisted: the reconciler's persistent to-do list
  Status QueuePolicyCheck(uint64_t ino);
  Status DequeuePolicyCheck(uint64_t ino);
  // Up to `limit` queued inodes above `after`, in order: a pass pages through the queue.
  Result<std::vector<uint64_t>> PolicyQueue(uint64_t after, size_t limit);

  // --- segments and extents
  Result<std::vector<SegmentRecord>> GetSegments(uint64_t ino);
  // The segment, or none (a hole past the persisted ones).
  Result<std::optional<SegmentRecord>> GetSegment(uint64_t ino, uint64_t index);
  Result<SegmentSummary> SummarizeSegments(uint64_t ino);
  Status PutSegment(const SegmentRecord& record);  // insert or replace
  Status DeleteSegment(uint64_t ino, uint64_t index);
  Status SetSegmentsCached(uint64_t ino, bool cached);
  // The segment of `ino` with the highest index of those in the staging cache that hold data
  // (not holes, which need no bytes there), if any.
  Result<std::optional<SegmentRecord>> LastCachedSegment(uint64_t ino);
  Status SetSegmentCached(uint64_t ino, uint64_t index, bool cached);

  // Corruption when the row fails CheckExtentRecord (catalog/record_checks.h).
  Result<ExtentRecord> GetExtent(uint64_t id);
  Status InsertExtent(const ExtentRecord& record);  // record.id chosen by the caller
  Status SetExtentRefs(uint64_t id, uint64_t refs);
  Status SetExtentChunk(uint64_t id, size_t index, const ChunkPlacement& chunk);  // after a repair
  Status DeleteExtent(uint64_t id);
  // How many segment rows reference extent `id`: those of its data, and the holes it records.
  Result<uint64_t> CountSegmentsIn(uint64_t id);
  // The scans return rows as stored: run CheckExtentRecord on each before using it.
  Result<std::vector<ExtentRecord>> AllExtents();
  // Up to `limit` extents with ids above `after`, by id: a scan in pages that lets others
  // use the catalog in between.
  Result<std::vector<ExtentRecord>> ExtentsAfter(uint64_t after, size_t limit);
  Result<std::vector<SegmentRecord>> AllSegments();
  Result<uint64_t> MaxExtentIdEverUsed();
  Result<uint64_t> MaxInoEverUsed();  // of inodes ever made, removed ones included

  // --- file data keys (keys/file_keys.h): wrapped, never in clear
  Result<FileKeyRecord> GetFileKey(uint64_t ino);  // NotFound when the file has none
  Status PutFileKey(const FileKeyRecord& record);   // insert or replace
  Status DeleteFileKey(uint64_t ino);               // none left is not an error
  Result<std::vector<FileKeyRecord>> FileKeysUnder(const std::string& key_name);
  Result<std::vector<FileKeyRecord>> AllFileKeys();
  Status DeleteFileKeysUnder(const std::string& key_name);

  struct Totals {
    uint64_t inodes = 0;
    uint64_t dirty_inodes = 0;
    uint64_t extents = 0;
    uint64_t persisted_bytes = 0;  // sum of segment lengths
    uint64_t extent_bytes = 0;     // sum of allocated chunk lengths (filled in by the caller)
    uint64_t policy_checks = 0;    // inodes queued for the reconciler
  };
  Result<Totals> ComputeTotals();

  sqlite3* handle() { return db_; }

 private:
  Catalog(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Status Exec(const char* sql);
  // Cached by SQL text. Journaled statements are recorded for replay (transaction control is not).
  // Its runs fail with what MayRun says (transaction control: journaled false, never).
  Statement& Prepare(const char* sql, bool journaled = true);
  // Whether a statement may run now: a batch SQLite dropped is replayed first, so that
  // nothing reads past the acknowledged operations in it; a change joins the open batch
  // (opened here), or fails when none can take it.
  Status MayRun(bool writes);
  // EROFS naming commit_failure_.
  Status ReadOnly() const;
  Status UpgradeSchema(int from_version);
  Status ViewOlderSchemaAsCurrent(int from_version);  // read-only opens of schema 3 and 4
  Status StartEpoch();
  Status OpenWalSync();
  Status CommitBatch();
  // After a failed statement or COMMIT: when SQLite dropped the batch, replays it and
  // refuses new operations until a commit succeeds. Returns `cause`.
  Status KeepBatch(Status cause);
  // Ends SQLite's transaction (ReplayBatch) and replays the batch from the journal, without
  // the operations rolled back; until a commit succeeds, new operations are refused.
  void DropBatch(const Status& cause);
  // Opens the batch unless it is open (replayed first when SQLite rolled it back).
  Status OpenBatch();
  // Rolls back what SQLite's transaction still holds (a failed rollback left it open), then
  // runs the journal's batch again in a new one.
  Status ReplayBatch();
  void AbandonTransaction();
  // Resets statements left on a row: each holds a read transaction that stops checkpoints.
  void ResetBusyStatements();

  sqlite3* db_;
  const std::string path_;
  int txn_depth_ = 0;
  bool batch_open_ = false;
  BatchJournal journal_;
  Status commit_failure_;  // why the batch cannot commit; OK when it can
  Status replay_failure_;  // why MayRun's last replay of a dropped batch failed, and when
  std::chrono::steady_clock::time_point replay_failed_at_;
  uint64_t epoch_ = 0;     // the generation of inodes made now
  uint64_t policy_changes_ = 0;
  uint64_t next_ino_ = 0;
  Listener listener_;
  // Write-through copy of inode rows: nearly every operation reads one or two inodes.
  // Dropped whole on Rollback, since the rows it mirrors may have been rolled back.
  std::unordered_map<uint64_t, InodeRecord> inode_cache_;
  static constexpr size_t kInodeCacheLimit = 200000;
  std::optional<uint64_t> inode_count_;  // InodeCount(), unknown after a rollback
  std::unordered_map<std::string, uint64_t> layout_ids_;  // stamp -> id; few distinct stamps exist
  std::map<const char*, std::unique_ptr<Statement>> statements_;
  std::unique_ptr<WalCheckpointer> checkpointer_;
  std::unique_ptr<WalSync> wal_sync_;  // null when read-only
};

// Runs `body` inside a catalog operation: commits when it returns OK, rolls back otherwise.
template <typename Body>
Status InTransaction(Catalog& catalog, Body body) {
  CAIRN_RETURN_IF_ERROR(catalog.Begin());
  Status st = body();
  if (st.ok()) st = catalog.Commit();
  if (!st.ok()) catalog.Rollback();
  return st;
}

}  // namespace cairn
