#include "catalog/catalog.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "catalog/record_checks.h"
#include "util/coding.h"
#include "util/log.h"

namespace cairn {
namespace {

const char* kSchema = R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE inodes(
  ino INTEGER PRIMARY KEY AUTOINCREMENT,
  mode INTEGER NOT NULL, uid INTEGER NOT NULL, gid INTEGER NOT NULL, nlink INTEGER NOT NULL,
  size INTEGER NOT NULL, rdev INTEGER NOT NULL,
  atime_ns INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL,
  segment_size INTEGER NOT NULL DEFAULT 0, dirty INTEGER NOT NULL DEFAULT 0, symlink BLOB,
  layout INTEGER NOT NULL DEFAULT 0, generation INTEGER NOT NULL DEFAULT 0);
CREATE INDEX inodes_dirty ON inodes(dirty) WHERE dirty = 1;
CREATE TABLE dentries(
  cookie INTEGER PRIMARY KEY AUTOINCREMENT,
  parent INTEGER NOT NULL, name BLOB NOT NULL, ino INTEGER NOT NULL,
  UNIQUE(parent, name));
CREATE INDEX dentries_ino ON dentries(ino);
CREATE TABLE xattrs(ino INTEGER NOT NULL, name BLOB NOT NULL, value BLOB NOT NULL,
  PRIMARY KEY(ino, name)) WITHOUT ROWID;
CREATE TABLE extents(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  payload_length INTEGER NOT NULL, payload_crc INTEGER NOT NULL, kind INTEGER NOT NULL,
  refs INTEGER NOT NULL, redundancy INTEGER NOT NULL, chunks BLOB NOT NULL,
  logical_length INTEGER NOT NULL, chain TEXT NOT NULL);
CREATE TABLE segments(
  ino INTEGER NOT NULL, idx INTEGER NOT NULL, extent INTEGER NOT NULL,
  extent_offset INTEGER NOT NULL, length INTEGER NOT NULL, cached INTEGER NOT NULL,
  PRIMARY KEY(ino, idx)) WITHOUT ROWID;
CREATE INDEX segments_extent ON segments(extent);
CREATE TABLE layouts(id INTEGER PRIMARY KEY, stamp TEXT NOT NULL UNIQUE);
CREATE TABLE policy_queue(ino INTEGER PRIMARY KEY);
)sql";
static_assert(kHoleExtent == 0, "the SQL of this file spells a hole row as extent = 0");
// A hole row names the extent that records it in extent_offset. Also made at every open for
// writing (catalogs from before it have none; older cairns keep it up to date unknowingly).
const char* kHoleRecordIndex =
    "CREATE INDEX IF NOT EXISTS segments_hole_record ON segments(extent_offset) WHERE extent = 0";
const char* kFileKeysTable =
    "CREATE TABLE file_keys(ino INTEGER PRIMARY KEY, key_name BLOB NOT NULL, master_version INTEGER NOT NULL, "
    "wrapped BLOB NOT NULL)";

Status SqliteError(sqlite3* db, const std::string& what) {
  return Status::IOError(fmt::format("catalog: {}: {}", what, db ? sqlite3_errmsg(db) : "out of memory"));
}

Result<sqlite3*> OpenHandle(const std::string& path, int flags) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status st = SqliteError(db, fmt::format("cannot open {}", path));
    sqlite3_close(db);
    return st;
  }
  sqlite3_busy_timeout(db, 10000);
  sqlite3_extended_result_codes(db, 1);
  return db;
}

Result<std::vector<FileKeyRecord>> ReadFileKeys(Statement& s) {
  std::vector<FileKeyRecord> out;
  while (s.Step()) out.push_back({s.UInt(0), s.Text(1), static_cast<uint32_t>(s.UInt(2)), s.Blob(3)});
  CAIRN_RETURN_IF_ERROR(s.status());
  return out;
}

InodeRecord ReadInode(Statement& s) {
  InodeRecord r;
  r.ino = s.UInt(0);
  r.mode = static_cast<uint32_t>(s.Int(1));
  r.uid = static_cast<uint32_t>(s.Int(2));
  r.gid = static_cast<uint32_t>(s.Int(3));
  r.nlink = s.UInt(4);
  r.size = s.UInt(5);
  r.rdev = s.UInt(6);
  r.atime_ns = s.Int(7);
  r.mtime_ns = s.Int(8);
  r.ctime_ns = s.Int(9);
  r.segment_size = s.UInt(10);
  r.dirty = s.Int(11) != 0;
  r.symlink = s.Text(12);
  r.layout_id = s.UInt(13);
  r.generation = s.UInt(14);
  return r;
}

SegmentRecord ReadSegment(Statement& s) {
  SegmentRecord r{s.UInt(0), s.UInt(1), s.UInt(2), s.UInt(3), s.UInt(4), s.Int(5) != 0};
  if (r.extent_id == kHoleExtent) std::swap(r.extent_offset, r.hole_record);  // a hole's column holds its record
  return r;
}

// Redundancy packed into one integer: scheme | data << 8 | parity << 16 | idr << 24 |
// checksum << 32.
uint64_t EncodeRedundancy(const Redundancy& r) {
  return static_cast<uint64_t>(r.scheme) | uint64_t{r.data_chunks} << 8 | uint64_t{r.parity_chunks} << 16 |
         uint64_t{r.idr_scramble} << 24 | static_cast<uint64_t>(r.checksum) << 32;
}

Redundancy DecodeRedundancy(uint64_t v) {
  return Redundancy{static_cast<Redundancy::Scheme>(v & 0xff), static_cast<uint8_t>(v >> 8),
                    static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 24),
                    static_cast<ChecksumType>((v >> 32) & 0xff)};
}

// Chunk placements as a blob of 60-byte records: u32 disk, u64 offset, u64 alloc_length,
// u32 crc, u32 reserved, u8[32] digest (little-endian).
constexpr size_t kChunkRecordSize = 60;

std::vector<uint8_t> EncodeChunks(const std::vector<ChunkPlacement>& chunks) {
  std::vector<uint8_t> out(chunks.size() * kChunkRecordSize, 0);
  for (size_t i = 0; i < chunks.size(); i++) {
    uint8_t* p = &out[i * kChunkRecordSize];
    PutFixed32(p, chunks[i].disk);
    PutFixed64(p + 4, chunks[i].offset);
    PutFixed64(p + 12, chunks[i].alloc_length);
    PutFixed32(p + 20, chunks[i].crc);
    std::memcpy(p + 28, chunks[i].digest.data(), chunks[i].digest.size());
  }
  return out;
}

std::vector<ChunkPlacement> DecodeChunks(const std::vector<uint8_t>& blob) {
  std::vector<ChunkPlacement> out(blob.size() / kChunkRecordSize);
  for (size_t i = 0; i < out.size(); i++) {
    const uint8_t* p = &blob[i * kChunkRecordSize];
    out[i] = ChunkPlacement{GetFixed32(p), GetFixed64(p + 4), GetFixed64(p + 12), GetFixed32(p + 20), {}};
    std::memcpy(out[i].digest.data(), p + 28, out[i].digest.size());
  }
  return out;
}

ExtentRecord ReadExtentRow(Statement& s) {
  const uint64_t crc = s.UInt(2), kind = s.UInt(3), redundancy = s.UInt(5);
  const std::vector<uint8_t> chunks = s.Blob(6);
  ExtentRecord r{s.UInt(0), s.UInt(1), static_cast<uint32_t>(crc), static_cast<int>(kind), s.UInt(4),
                 DecodeRedundancy(redundancy), DecodeChunks(chunks), s.UInt(7), s.Text(8)};
  if (crc > UINT32_MAX) {
    r.undecodable = fmt::format("payload_crc {} is wider than 32 bits", crc);
  } else if (kind > INT32_MAX) {
    r.undecodable = fmt::format("kind {} is out of range", kind);
  } else if (EncodeRedundancy(r.redundancy) != redundancy) {
    r.undecodable = fmt::format("redundancy {:#x} has bits no field uses", redundancy);
  } else if (chunks.size() % kChunkRecordSize != 0) {
    r.undecodable = fmt::format("chunks of {} bytes are not whole {}-byte records", chunks.size(), kChunkRecordSize);
  }
  return r;
}

// Every row `s` yields, read by `read`; the statement's error if it fails part way.
template <typename Read>
auto Rows(Statement& s, Read read) -> Result<std::vector<decltype(read(s))>> {
  std::vector<decltype(read(s))> out;
  while (s.Step()) out.push_back(read(s));
  if (!s.status().ok()) return s.status();
  return out;
}

#define INODE_COLUMNS \
  "ino, mode, uid, gid, nlink, size, rdev, atime_ns, mtime_ns, ctime_ns, segment_size, dirty, symlink, layout, generation"
#define SEGMENT_COLUMNS "ino, idx, extent, extent_offset, length, cached"
#define EXTENT_COLUMNS "id, payload_length, payload_crc, kind, refs, redundancy, chunks, logical_length, chain"

}  // namespace

Result<std::unique_ptr<Catalog>> Catalog::Create(const std::string& path, uint32_t uid, uint32_t gid,
                                                 int64_t now_ns,
                                                 const std::vector<std::pair<std::string, std::string>>& meta) {
  auto db = OpenHandle(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (!db.ok()) return db.status();
  std::unique_ptr<Catalog> catalog(new Catalog(*db, path));
  CAIRN_RETURN_IF_ERROR(catalog->Exec("PRAGMA journal_mode=WAL"));
  CAIRN_RETURN_IF_ERROR(catalog->Exec("PRAGMA synchronous=NORMAL"));  // as Open: SyncThrough() syncs
  CAIRN_RETURN_IF_ERROR(catalog->Exec("PRAGMA secure_delete=FAST"));   // as Open
  CAIRN_RETURN_IF_ERROR(catalog->OpenWalSync());
  CAIRN_RETURN_IF_ERROR(catalog->Begin());
  CAIRN_RETURN_IF_ERROR(catalog->Exec(kSchema));
  CAIRN_RETURN_IF_ERROR(catalog->Exec(kFileKeysTable));
  CAIRN_RETURN_IF_ERROR(catalog->Exec(kHoleRecordIndex));
  CAIRN_RETURN_IF_ERROR(catalog->SetMeta("schema_version", std::to_string(kCatalogSchemaVersion)));
  CAIRN_RETURN_IF_ERROR(catalog->SetMeta("epoch", "1"));
  for (const auto& [key, value] : meta) CAIRN_RETURN_IF_ERROR(catalog->SetMeta(key, value));
  catalog->epoch_ = 1;
  catalog->next_ino_ = kRootInode + 1;
  InodeRecord root;
  root.ino = kRootInode;
  root.mode = 040755;
  root.uid = uid;
  root.gid = gid;
  root.nlink = 2;
  root.atime_ns = root.mtime_ns = root.ctime_ns = now_ns;
  Statement insert(catalog->db_, "INSERT INTO inodes(" INODE_COLUMNS ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  CAIRN_RETURN_IF_ERROR(insert
                            .Bind(root.ino, root.mode, root.uid, root.gid, root.nlink, root.size, root.rdev,
                                  root.atime_ns, root.mtime_ns, root.ctime_ns, root.segment_size, root.dirty, nullptr, 0,
                                  root.generation)
                            .Run());
  CAIRN_RETURN_IF_ERROR(catalog->Commit());
  CAIRN_RETURN_IF_ERROR(catalog->FlushDurably());
  return catalog;
}

Result<std::unique_ptr<Catalog>> Catalog::Open(const std::string& path, bool read_only) {
  auto db = OpenHandle(path, read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE);
  if (!db.ok()) return db.status();
  std::unique_ptr<Catalog> catalog(new Catalog(*db, path));
  auto version = catalog->GetMeta("schema_version");
  if (!version.ok()) {
    return Status::Corruption(fmt::format("{} is not a cairn catalog ({})", path, version.status().message()));
  }
  constexpr int kOldestReadable = 3;
  int found = std::atoi(version->c_str());
  if (*version != std::to_string(found) || found < kOldestReadable || found > kCatalogSchemaVersion) {
    return Status::NotSupported(fmt::format(
        "catalog {} has schema version {}; this cairn understands versions {} to {}", path, *version,
        kOldestReadable, kCatalogSchemaVersion));
  }
  if (!read_only) {
    CAIRN_RETURN_IF_ERROR(catalog->Exec("PRAGMA journal_mode=WAL"));
    // NORMAL: a commit survives a crash of the daemon; SyncThrough() adds power-loss durability.
    CAIRN_RETURN_IF_ERROR(catalog->Exec("PRAGMA synchronous=NORMAL"));
    CAIRN_RETURN_IF_ERROR(catalog->OpenWalSync());
    CAIRN_RETURN_IF_ERROR(catalog->Exec("PRAGMA cache_size=-32768"));  // 32 MiB of pages
    // Deleted rows (a file's wrapped data key among them) are overwritten in their page.
    CAIRN_RETURN_IF_ERROR(catalog->Exec("PRAGMA secure_delete=FAST"));
    if (found < kCatalogSchemaVersion) CAIRN_RETURN_IF_ERROR(catalog->UpgradeSchema(found));
    CAIRN_RETURN_IF_ERROR(catalog->Exec(kHoleRecordIndex));
    CAIRN_RETURN_IF_ERROR(catalog->StartEpoch());
  } else if (found < kCatalogSchemaVersion) {
    CAIRN_RETURN_IF_ERROR(catalog->ViewOlderSchemaAsCurrent(found));
  }
  return catalog;
}

// A read-only open cannot upgrade an older catalog. Temporary views named like its tables
// (SQLite resolves a name in "temp" before "main") add the newer columns with the values
// UpgradeSchema() would give them, so every query reads an old catalog as a current one.
Status Catalog::ViewOlderSchemaAsCurrent(int from_version) {
  if (from_version < 4) {
    CAIRN_RETURN_IF_ERROR(Exec("CREATE TEMP VIEW inodes AS SELECT *, 0 AS generation FROM main.inodes"));
  }
  if (from_version < 6) {
    CAIRN_RETURN_IF_ERROR(Exec("CREATE TEMP VIEW file_keys AS SELECT 0 AS ino, x'' AS key_name, "
                               "0 AS master_version, x'' AS wrapped WHERE 0"));
  }
  if (from_version < 5) {
    CAIRN_RETURN_IF_ERROR(Exec("CREATE TEMP VIEW extents AS "
                               "SELECT *, payload_length AS logical_length, '' AS chain FROM main.extents"));
  }
  return Status::OK();
}

Status Catalog::UpgradeSchema(int from_version) {
  // A transaction of its own, not a batch: the batch journal replays statements, not schema
  // changes, so a batch SQLite dropped would come back as a new version number over the old
  // tables. Committed and synced before anything else, or not at all.
  CAIRN_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Status st = from_version < 4 ? Exec("ALTER TABLE inodes ADD COLUMN generation INTEGER NOT NULL DEFAULT 0")
                               : Status::OK();
  // Extents written before the codec stage have no transform chain: logical = stored.
  if (st.ok() && from_version < 5) {
    st = Exec("ALTER TABLE extents ADD COLUMN logical_length INTEGER NOT NULL DEFAULT 0; "
              "UPDATE extents SET logical_length = payload_length; "
              "ALTER TABLE extents ADD COLUMN chain TEXT NOT NULL DEFAULT ''");
  }
  if (st.ok() && from_version < 6) st = Exec(kFileKeysTable);
  const std::string version = fmt::format(
      "INSERT OR REPLACE INTO meta(key, value) VALUES(CAST('schema_version' AS BLOB), CAST('{}' AS BLOB))",
      kCatalogSchemaVersion);
  if (st.ok()) st = Exec(version.c_str());
  if (st.ok()) st = Exec("COMMIT");
  if (!st.ok()) {
    AbandonTransaction();
    return st;
  }
  if (wal_sync_) wal_sync_->Committed();
  return SyncThrough(commit_sequence());
}

// Each open for writing is a new epoch, committed before any inode is made in it. A
// number reused after a lost batch (in an earlier epoch) then has another generation.
Status Catalog::StartEpoch() {
  auto epoch = GetMeta("epoch");
  if (!epoch.ok() && !epoch.status().IsNotFound()) return epoch.status();
  epoch_ = (epoch.ok() ? std::strtoull(epoch->c_str(), nullptr, 10) : 0) + 1;
  CAIRN_RETURN_IF_ERROR(SetMeta("epoch", std::to_string(epoch_)));
  auto max_ino = MaxInoEverUsed();
  if (!max_ino.ok()) return max_ino.status();
  next_ino_ = *max_ino + 1;
  return FlushDurably();  // a power loss must not hand out this epoch again
}

Result<uint64_t> Catalog::MaxInoEverUsed() {
  // sqlite_sequence keeps the highest number ever committed, even when that inode is gone.
  auto& s = Prepare("SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'inodes'), 0), "
                    "COALESCE((SELECT MAX(ino) FROM inodes), 0))");
  s.Bind();
  if (s.Step()) return s.UInt(0);
  CAIRN_RETURN_IF_ERROR(s.status());
  return Status::Corruption("catalog: no highest inode number");
}

Status Catalog::StartCheckpoints(std::mutex& mutex, std::chrono::milliseconds interval) {
  auto between_batches = [this, &mutex](const std::function<Status()>& checkpoint) {
    std::lock_guard lock(mutex);  // StopCheckpoints is never called with it held
    Status flushed = Flush();
    if (!flushed.ok()) return Status::IOError(fmt::format("catalog: cannot commit before a checkpoint: {}", flushed.message()));
    return checkpoint();
  };
  auto checkpointer = WalCheckpointer::Start(path_, interval, between_batches);
  if (!checkpointer.ok()) return checkpointer.status();
  checkpointer_ = std::move(*checkpointer);
  // From now on only the checkpointer copies pages back: commits (under the catalog mutex)
  // no longer do it every 1000 pages.
  if (int rc = sqlite3_wal_autocheckpoint(db_, 0); rc != SQLITE_OK) {
    return Status::IOError(fmt::format("catalog {}: cannot turn off automatic checkpoints: {}", path_, sqlite3_errstr(rc)));
  }
  return Status::OK();
}

void Catalog::StopCheckpoints() { checkpointer_.reset(); }

Catalog::~Catalog() {
  StopCheckpoints();
  Rollback();  // an operation cut short by an error path
  Status st = Flush();
  if (!st.ok() && !journal_.empty()) {
    LogError("catalog: {} change(s) of acknowledged operations are lost, the catalog could not commit them: {}",
             journal_.batch().size(), st.message());
  }
  statements_.clear();
  sqlite3_close(db_);
}

Status Catalog::Exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string what = fmt::format("catalog: {} (in '{:.60}')", error ? error : "?", sql);
    sqlite3_free(error);
    return (sqlite3_extended_errcode(db_) & 0xff) == SQLITE_FULL ? Status::NoSpace(what) : Status::IOError(what);
  }
  return Status::OK();
}

Statement& Catalog::Prepare(const char* sql, bool journaled) {
  auto& slot = statements_[sql];
  // One that failed to prepare (out of memory, the schema unreadable for a moment) is tried
  // again: kept, it would fail every later use until a restart.
  if (!slot || !slot->prepared()) slot = std::make_unique<Statement>(db_, sql, journaled ? &journal_ : nullptr);
  slot->Refuse(journaled ? MayRun(slot->writes()) : Status::OK());  // (transaction control runs as it is)
  return *slot;
}

Status Catalog::MayRun(bool writes) {
  if (batch_open_ && sqlite3_get_autocommit(db_)) {  // SQLite rolled the batch back on an error
    // Inside an operation its savepoint went with it: replayed now, the rest of the
    // operation would run outside it, past its Rollback. Its Rollback replays the batch.
    if (txn_depth_ > 0) return Status::IOError("catalog: SQLite rolled back the batch in the middle of an operation");
    Status dropped = KeepBatch(Status::IOError("SQLite rolled back the open batch"));
    if (!batch_open_) return dropped;
  }
  // Nothing reads past acknowledged operations that wait to be replayed. A replay that
  // failed is tried again by the flushes, and here at most once a second.
  if (!batch_open_ && (!journal_.empty() || !sqlite3_get_autocommit(db_))) {
    auto now = std::chrono::steady_clock::now();
    if (replay_failure_.ok() || now - replay_failed_at_ >= std::chrono::seconds(1)) {
      replay_failure_ = ReplayBatch();
      replay_failed_at_ = now;
    }
    if (!replay_failure_.ok()) {
      return Status::IOError(
          fmt::format("catalog: acknowledged operations wait to be replayed: {}", replay_failure_.message()));
    }
  }
  // A change outside an operation joins the batch too, never a commit of its own: that one
  // would not count in commit_sequence(), a SyncThrough would not wait for it, and a batch
  // replayed later would land over it.
  if (!writes || batch_open_) return Status::OK();
  if (!commit_failure_.ok()) return ReadOnly();
  return OpenBatch();
}

Status Catalog::OpenBatch() {
  if (batch_open_ && sqlite3_get_autocommit(db_)) {
    // SQLite rolled the batch back on an error (I/O, memory) of some statement: replayed.
    CAIRN_RETURN_IF_ERROR(KeepBatch(Status::IOError("SQLite rolled back the open batch")));
  }
  if (batch_open_) return Status::OK();
  // A read left on a row since the last batch would keep its snapshot into this one, and
  // SQLite restarts the WAL only when a batch begins with no snapshot open.
  ResetBusyStatements();
  CAIRN_RETURN_IF_ERROR(Prepare("BEGIN IMMEDIATE", /*journaled=*/false).Bind().Run());
  batch_open_ = true;
  return Status::OK();
}

Status Catalog::ReadOnly() const {
  return Status::Posix(EROFS,
                       fmt::format("catalog is read-only until it can commit again ({})", commit_failure_.message()));
}

Status Catalog::Begin() {
  if (txn_depth_ > 0) {
    txn_depth_++;
    return Status::OK();
  }
  if (!commit_failure_.ok()) return ReadOnly();
  CAIRN_RETURN_IF_ERROR(OpenBatch());
  Status st = Prepare("SAVEPOINT op", /*journaled=*/false).Bind().Run();
  if (!st.ok()) return KeepBatch(st);
  journal_.BeginOperation();
  txn_depth_ = 1;
  return Status::OK();
}

Status Catalog::Commit() {
  if (txn_depth_ == 0) return Status::InvalidArgument("catalog: commit without begin");
  if (--txn_depth_ > 0) return Status::OK();
  Status st = Prepare("RELEASE op", /*journaled=*/false).Bind().Run();
  if (!st.ok()) {  // undone as by Rollback, its listeners told: what it freed stays in use
    txn_depth_ = 1;
    Rollback();
    return KeepBatch(st);
  }
  journal_.EndOperation(true);
  if (listener_.op_committed) listener_.op_committed();
  return st;
}

void Catalog::Rollback() {
  if (txn_depth_ == 0) return;
  txn_depth_ = 0;
  inode_cache_.clear();
  inode_count_.reset();
  layout_ids_.clear();
  journal_.EndOperation(false);
  Status st = Exec("ROLLBACK TO op; RELEASE op");
  // Kept, the operation's changes would be committed with the batch: the whole transaction
  // goes, and the batch is replayed without them.
  if (!st.ok()) DropBatch(st);
  if (listener_.op_rolled_back) listener_.op_rolled_back();
}

Status Catalog::Flush() {
  if (txn_depth_ > 0) return Status::Busy("catalog: flush inside an operation");
  ResetBusyStatements();
  if (batch_open_ || !journal_.empty() || !sqlite3_get_autocommit(db_)) CAIRN_RETURN_IF_ERROR(CommitBatch());
  return Status::OK();
}

Status Catalog::FlushDurably() {
  CAIRN_RETURN_IF_ERROR(Flush());
  return SyncThrough(commit_sequence());
}

Status Catalog::OpenWalSync() {
  auto wal_sync = WalSync::Open(db_);
  if (!wal_sync.ok()) return wal_sync.status();
  wal_sync_ = std::move(*wal_sync);
  return Status::OK();
}

Status Catalog::SyncThrough(uint64_t sequence) {
  if (!wal_sync_) return Status::OK();  // read-only: nothing was committed
  return wal_sync_->SyncThrough(sequence);
}

Status Catalog::CommitBatch() {
  if (batch_open_ && sqlite3_get_autocommit(db_)) {  // SQLite rolled it back: replayed, then committed
    Status dropped = KeepBatch(Status::IOError("SQLite rolled back the open batch"));
    if (!batch_open_) return dropped;
  }
  if (!batch_open_) CAIRN_RETURN_IF_ERROR(ReplayBatch());  // an earlier replay failed
  Status st = Exec("COMMIT");
  if (!st.ok()) return KeepBatch(st);
  batch_open_ = false;
  journal_.Clear();
  if (wal_sync_) wal_sync_->Committed();
  if (!commit_failure_.ok()) {
    LogInfo("catalog: the batch committed after all; the archive is writable again");
    commit_failure_ = Status::OK();
  }
  return Status::OK();
}

Status Catalog::KeepBatch(Status cause) {
  if (!batch_open_ || !sqlite3_get_autocommit(db_)) return cause;  // the batch is still there
  DropBatch(cause);
  return cause;
}

void Catalog::DropBatch(const Status& cause) {
  batch_open_ = false;
  inode_cache_.clear();
  inode_count_.reset();
  layout_ids_.clear();
  if (commit_failure_.ok()) {
    LogError("catalog: the open batch of {} change(s) of acknowledged operations was rolled back ({}); they are "
             "kept in memory and the archive is read-only (EROFS to writers) until a commit succeeds, retried every "
             "flush",
             journal_.batch().size(), cause.message());
  }
  commit_failure_ = cause;
  Status replay = ReplayBatch();  // reads see the acknowledged operations again
  if (!replay.ok()) LogError("catalog: cannot replay the dropped batch yet: {}", replay.message());
}

Status Catalog::ReplayBatch() {
  // A transaction a failed rollback left open holds what no acknowledged operation wrote.
  AbandonTransaction();
  if (!sqlite3_get_autocommit(db_)) return Status::IOError("catalog: cannot roll back the transaction left open");
  CAIRN_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  for (const BatchJournal::Entry& entry : journal_.batch()) {
    Status st = entry.statement->Replay(entry.values);
    if (!st.ok()) {
      AbandonTransaction();  // a failure is retried with the replay
      return st;
    }
  }
  batch_open_ = true;
  return Status::OK();
}

void Catalog::AbandonTransaction() {
  if (sqlite3_get_autocommit(db_)) return;  // SQLite rolled it back already
  Status st = Exec("ROLLBACK");
  if (!st.ok()) LogError("catalog: cannot roll back: {}", st.message());
}

void Catalog::ResetBusyStatements() {
  for (sqlite3_stmt* s = sqlite3_next_stmt(db_, nullptr); s; s = sqlite3_next_stmt(db_, s)) {
    // sqlite3_reset repeats the statement's last step error, which its caller has seen.
    if (sqlite3_stmt_busy(s)) sqlite3_reset(s);
  }
}

Result<std::string> Catalog::GetMeta(const std::string& key) {
  auto& s = Prepare("SELECT value FROM meta WHERE key = ?");
  s.Bind(key);
  if (s.Step()) return s.Text(0);
  if (!s.status().ok()) return s.status();
  return Status::NotFound(fmt::format("catalog: no meta key '{}'", key));
}

Status Catalog::SetMeta(const std::string& key, const std::string& value) {
  return Prepare("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)").Bind(key, value).Run();
}

Result<InodeRecord> Catalog::GetInode(uint64_t ino) {
  if (auto it = inode_cache_.find(ino); it != inode_cache_.end()) return it->second;
  auto& s = Prepare("SELECT " INODE_COLUMNS " FROM inodes WHERE ino = ?");
  s.Bind(ino);
  if (s.Step()) {
    if (inode_cache_.size() >= kInodeCacheLimit) inode_cache_.clear();
    return inode_cache_[ino] = ReadInode(s);
  }
  if (!s.status().ok()) return s.status();
  return Status::NotFound(fmt::format("inode {}", ino));
}

Result<uint64_t> Catalog::InsertInode(const InodeRecord& r) {
  uint64_t ino = next_ino_++;  // never handed out again, even if this insert is rolled back
  auto& s = Prepare("INSERT INTO inodes(" INODE_COLUMNS ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  CAIRN_RETURN_IF_ERROR(s.Bind(ino, r.mode, r.uid, r.gid, r.nlink, r.size, r.rdev, r.atime_ns, r.mtime_ns,
                               r.ctime_ns, r.segment_size, r.dirty, r.symlink, r.layout_id, epoch_)
                            .Run());
  if (inode_count_) ++*inode_count_;
  if (inode_cache_.size() < kInodeCacheLimit) {
    InodeRecord& cached = inode_cache_[ino] = r;
    cached.ino = ino;
    cached.generation = epoch_;
  }
  return ino;
}

Status Catalog::RestoreInode(const InodeRecord& r) {
  inode_cache_.erase(r.ino);
  inode_count_.reset();  // it may replace a row
  next_ino_ = std::max(next_ino_, r.ino + 1);
  return Prepare("INSERT OR REPLACE INTO inodes(" INODE_COLUMNS ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
      .Bind(r.ino, r.mode, r.uid, r.gid, r.nlink, r.size, r.rdev, r.atime_ns, r.mtime_ns, r.ctime_ns, r.segment_size,
            r.dirty, r.symlink, r.layout_id, r.ino == kRootInode ? 0 : epoch_)
      .Run();
}

Status Catalog::RaiseIdFloors(uint64_t max_ino, uint64_t max_extent_id) {
  // Names are bound as SQL text (Statement binds strings as blobs, which never equal text).
  // Prepared (not Exec) so the batch journal replays them too.
  next_ino_ = std::max(next_ino_, max_ino + 1);
  CAIRN_RETURN_IF_ERROR(Prepare("INSERT INTO sqlite_sequence(name, seq) SELECT 'inodes', 0 WHERE NOT EXISTS "
                                "(SELECT 1 FROM sqlite_sequence WHERE name = 'inodes')")
                            .Bind()
                            .Run());
  CAIRN_RETURN_IF_ERROR(Prepare("INSERT INTO sqlite_sequence(name, seq) SELECT 'extents', 0 WHERE NOT EXISTS "
                                "(SELECT 1 FROM sqlite_sequence WHERE name = 'extents')")
                            .Bind()
                            .Run());
  CAIRN_RETURN_IF_ERROR(
      Prepare("UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = 'inodes'").Bind(max_ino).Run());
  return Prepare("UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = 'extents'").Bind(max_extent_id).Run();
}

Status Catalog::RaiseEpoch(uint64_t max_generation) {
  if (epoch_ > max_generation) return Status::OK();
  epoch_ = max_generation + 1;
  return SetMeta("epoch", std::to_string(epoch_));
}

Status Catalog::UpdateInode(const InodeRecord& r) {
  inode_cache_.erase(r.ino);  // re-read (and re-cached) after the update succeeds
  Status st = Prepare(
             "UPDATE inodes SET mode=?, uid=?, gid=?, nlink=?, size=?, rdev=?, atime_ns=?, mtime_ns=?, ctime_ns=?, "
             "segment_size=?, dirty=?, symlink=?, layout=? WHERE ino=?")
      .Bind(r.mode, r.uid, r.gid, r.nlink, r.size, r.rdev, r.atime_ns, r.mtime_ns, r.ctime_ns, r.segment_size,
            r.dirty, r.symlink, r.layout_id, r.ino)
      .Run();
  if (st.ok() && inode_cache_.size() < kInodeCacheLimit) inode_cache_[r.ino] = r;
  return st;
}

Status Catalog::DeleteInode(uint64_t ino) {
  inode_cache_.erase(ino);
  CAIRN_RETURN_IF_ERROR(Prepare("DELETE FROM xattrs WHERE ino = ?").Bind(ino).Run());
  CAIRN_RETURN_IF_ERROR(DequeuePolicyCheck(ino));
  // The data is unreadable once its key is gone (crypto-erase); secure_delete overwrites
  // the freed bytes of the row.
  CAIRN_RETURN_IF_ERROR(DeleteFileKey(ino));
  CAIRN_RETURN_IF_ERROR(Prepare("DELETE FROM inodes WHERE ino = ?").Bind(ino).Run());
  if (inode_count_) *inode_count_ -= std::min<uint64_t>(*inode_count_, sqlite3_changes(db_));
  return Status::OK();
}

Result<uint64_t> Catalog::InodeCount() {
  if (inode_count_) return *inode_count_;
  auto& s = Prepare("SELECT COUNT(*) FROM inodes");
  s.Bind();
  if (s.Step()) return *(inode_count_ = s.UInt(0));
  CAIRN_RETURN_IF_ERROR(s.status());
  return Status::Corruption("catalog: no inode count");
}

Result<std::vector<uint64_t>> Catalog::InodesWhere(const char* condition) {
  Statement s(db_, fmt::format("SELECT ino FROM inodes WHERE {} ORDER BY ino", condition));
  s.Bind();
  return Rows(s, [](Statement& row) { return row.UInt(0); });
}

Result<uint64_t> Catalog::InternLayout(const std::string& stamp) {
  if (auto it = layout_ids_.find(stamp); it != layout_ids_.end()) return it->second;
  auto& find = Prepare("SELECT id FROM layouts WHERE stamp = ?");
  find.Bind(stamp);
  if (find.Step()) return layout_ids_[stamp] = find.UInt(0);
  CAIRN_RETURN_IF_ERROR(find.status());
  CAIRN_RETURN_IF_ERROR(Prepare("INSERT INTO layouts(stamp) VALUES(?)").Bind(stamp).Run());
  return layout_ids_[stamp] = static_cast<uint64_t>(sqlite3_last_insert_rowid(db_));
}

Result<std::string> Catalog::LayoutStamp(uint64_t id) {
  auto& s = Prepare("SELECT stamp FROM layouts WHERE id = ?");
  s.Bind(id);
  if (s.Step()) {
    std::string stamp = s.Text(0);
    CAIRN_RETURN_IF_ERROR(CheckLayoutStamp(id, stamp));
    return stamp;
  }
  CAIRN_RETURN_IF_ERROR(s.status());
  return Status::NotFound(fmt::format("catalog: no layout {}", id));
}

Status Catalog::QueuePolicyCheck(uint64_t ino) {
  policy_changes_++;
  return Prepare("INSERT OR IGNORE INTO policy_queue(ino) VALUES(?)").Bind(ino).Run();
}

Status Catalog::DequeuePolicyCheck(uint64_t ino) {
  return Prepare("DELETE FROM policy_queue WHERE ino = ?").Bind(ino).Run();
}

Result<std::vector<uint64_t>> Catalog::PolicyQueue(uint64_t after, size_t limit) {
  auto& s = Prepare("SELECT ino FROM policy_queue WHERE ino > ? ORDER BY ino LIMIT ?");
  s.Bind(after, static_cast<uint64_t>(limit));
  return Rows(s, [](Statement& row) { return row.UInt(0); });
}

Result<uint64_t> Catalog::Lookup(uint64_t parent, const std::string& name) {
  auto& s = Prepare("SELECT ino FROM dentries WHERE parent = ? AND name = ?");
  s.Bind(parent, name);
  if (s.Step()) return s.UInt(0);
  if (!s.status().ok()) return s.status();
  return Status::NotFound(name);
}

Status Catalog::InsertEntry(uint64_t parent, const std::string& name, uint64_t ino) {
  policy_changes_++;
  return Prepare("INSERT INTO dentries(parent, name, ino) VALUES(?, ?, ?)").Bind(parent, name, ino).Run();
}

Status Catalog::DeleteEntry(uint64_t parent, const std::string& name) {
  policy_changes_++;
  return Prepare("DELETE FROM dentries WHERE parent = ? AND name = ?").Bind(parent, name).Run();
}

Status Catalog::MoveEntry(uint64_t parent, const std::string& name, uint64_t new_parent,
                          const std::string& new_name) {
  policy_changes_++;
  return Prepare("UPDATE dentries SET parent = ?, name = ? WHERE parent = ? AND name = ?")
      .Bind(new_parent, new_name, parent, name)
      .Run();
}

Status Catalog::RepointEntry(uint64_t parent, const std::string& name, uint64_t ino) {
  policy_changes_++;
  return Prepare("UPDATE dentries SET ino = ? WHERE parent = ? AND name = ?").Bind(ino, parent, name).Run();
}

Result<bool> Catalog::HasEntries(uint64_t dir) {
  auto& s = Prepare("SELECT 1 FROM dentries WHERE parent = ? LIMIT 1");
  s.Bind(dir);
  if (s.Step()) return true;
  CAIRN_RETURN_IF_ERROR(s.status());
  return false;
}

Result<std::vector<DirEntryRecord>> Catalog::ListEntries(uint64_t dir, uint64_t after, size_t limit) {
  auto& s = Prepare("SELECT cookie, name, ino FROM dentries WHERE parent = ? AND cookie > ? ORDER BY cookie LIMIT ?");
  s.Bind(dir, after, static_cast<uint64_t>(limit));
  return Rows(s, [](Statement& row) { return DirEntryRecord{row.UInt(0), row.Text(1), row.UInt(2)}; });
}

Result<uint64_t> Catalog::ParentOf(uint64_t ino) {
  if (ino == kRootInode) return kRootInode;
  auto& s = Prepare("SELECT parent FROM dentries WHERE ino = ? LIMIT 1");
  s.Bind(ino);
  if (s.Step()) return s.UInt(0);
  if (!s.status().ok()) return s.status();
  return Status::NotFound(fmt::format("inode {} has no name", ino));
}

Result<bool> Catalog::IsWithin(uint64_t dir, uint64_t ancestor) {
  std::vector<uint64_t> walked;
  std::unordered_set<uint64_t> seen;
  for (uint64_t at = dir;;) {
    if (at == ancestor) return true;
    if (at == kRootInode) return false;
    if (!seen.insert(at).second) {
      return Status::Corruption(fmt::format(
          "directory cycle in the catalog: the parents of inode {} lead back to inode {} (walked inodes {}); run "
          "cairn fsck",
          dir, at, fmt::join(walked, " -> ")));
    }
    walked.push_back(at);
    auto up = ParentOf(at);
    if (!up.ok()) return up.status();
    at = *up;
  }
}

Result<std::pair<uint64_t, std::string>> Catalog::NameOf(uint64_t ino) {
  auto& s = Prepare("SELECT parent, name FROM dentries WHERE ino = ? LIMIT 1");
  s.Bind(ino);
  if (s.Step()) return std::make_pair(s.UInt(0), s.Text(1));
  if (!s.status().ok()) return s.status();
  return Status::NotFound(fmt::format("inode {} has no name", ino));
}

Result<std::vector<std::pair<std::string, InodeRecord>>> Catalog::EntriesWithoutData(uint64_t dir, size_t limit) {
  std::vector<std::pair<std::string, InodeRecord>> out;
  auto& s = Prepare("SELECT i.ino, i.mode, i.uid, i.gid, i.nlink, i.size, i.rdev, i.atime_ns, i.mtime_ns, i.ctime_ns, "
                    "i.segment_size, i.dirty, i.symlink, i.layout, i.generation, d.name FROM dentries d JOIN inodes i ON i.ino = d.ino "
                    "WHERE d.parent = ? AND ((i.mode & 61440) != 32768 OR i.size = 0) LIMIT ?");  // S_IFMT, S_IFREG
  s.Bind(dir, static_cast<uint64_t>(limit));
  while (s.Step()) out.emplace_back(s.Text(15), ReadInode(s));
  if (!s.status().ok()) return s.status();
  return out;
}

Result<std::vector<std::pair<uint64_t, std::string>>> Catalog::NamesOf(uint64_t ino, size_t limit) {
  std::vector<std::pair<uint64_t, std::string>> out;
  auto& s = Prepare("SELECT parent, name FROM dentries WHERE ino = ? ORDER BY cookie LIMIT ?");
  s.Bind(ino, static_cast<uint64_t>(limit));
  while (s.Step()) out.emplace_back(s.UInt(0), s.Text(1));
  if (!s.status().ok()) return s.status();
  return out;
}

Result<std::vector<uint8_t>> Catalog::GetXattr(uint64_t ino, const std::string& name) {
  auto& s = Prepare("SELECT value FROM xattrs WHERE ino = ? AND name = ?");
  s.Bind(ino, name);
  if (s.Step()) return s.Blob(0);
  if (!s.status().ok()) return s.status();
  return Status::NotFound(name);
}

Status Catalog::SetXattr(uint64_t ino, const std::string& name, std::span<const uint8_t> value) {
  policy_changes_++;
  return Prepare("INSERT OR REPLACE INTO xattrs(ino, name, value) VALUES(?, ?, ?)").Bind(ino, name, value).Run();
}

Status Catalog::RemoveXattr(uint64_t ino, const std::string& name) {
  policy_changes_++;
  CAIRN_RETURN_IF_ERROR(Prepare("DELETE FROM xattrs WHERE ino = ? AND name = ?").Bind(ino, name).Run());
  if (sqlite3_changes(db_) == 0) return Status::NotFound(name);
  return Status::OK();
}

Result<std::vector<std::string>> Catalog::ListXattrs(uint64_t ino) {
  auto& s = Prepare("SELECT name FROM xattrs WHERE ino = ? ORDER BY name");
  s.Bind(ino);
  return Rows(s, [](Statement& row) { return row.Text(0); });
}

Result<std::vector<uint64_t>> Catalog::InodesWithXattr(const std::string& name, std::string_view value,
                                                       size_t limit) {
  auto& s = Prepare("SELECT ino FROM xattrs WHERE name = ? AND value = ? ORDER BY ino LIMIT ?");
  s.Bind(name, value, static_cast<uint64_t>(limit));
  return Rows(s, [](Statement& row) { return row.UInt(0); });
}

Result<std::vector<std::pair<std::string, std::string>>> Catalog::XattrsWithPrefix(
    uint64_t ino, std::initializer_list<std::string_view> prefixes) {
  std::vector<std::pair<std::string, std::string>> out;
  auto& s = Prepare("SELECT name, value FROM xattrs WHERE ino = ?");
  s.Bind(ino);
  while (s.Step()) {
    std::string name = s.Text(0);
    for (std::string_view prefix : prefixes) {
      if (name.starts_with(prefix)) {
        out.emplace_back(std::move(name), s.Text(1));
        break;
      }
    }
  }
  CAIRN_RETURN_IF_ERROR(s.status());
  return out;
}

Result<std::vector<SegmentRecord>> Catalog::GetSegments(uint64_t ino) {
  auto& s = Prepare("SELECT " SEGMENT_COLUMNS " FROM segments WHERE ino = ? ORDER BY idx");
  s.Bind(ino);
  return Rows(s, ReadSegment);
}

Result<std::optional<SegmentRecord>> Catalog::GetSegment(uint64_t ino, uint64_t index) {
  auto& s = Prepare("SELECT " SEGMENT_COLUMNS " FROM segments WHERE ino = ? AND idx = ?");
  s.Bind(ino, index);
  if (s.Step()) return std::optional<SegmentRecord>(ReadSegment(s));
  CAIRN_RETURN_IF_ERROR(s.status());
  return std::optional<SegmentRecord>();
}

Result<SegmentSummary> Catalog::SummarizeSegments(uint64_t ino) {
  auto& s = Prepare(
      "SELECT COUNT(*), COALESCE(SUM(idx < 0 OR length < 0 OR extent_offset < 0), 0), COALESCE(MAX(idx), 0), "
      "COALESCE((SELECT length FROM segments WHERE ino = ?1 ORDER BY idx DESC LIMIT 1), 0), "
      "COALESCE(MAX(length), 0), COALESCE(MAX(CASE WHEN extent = 0 THEN 0 ELSE extent_offset END), 0) "
      "FROM segments WHERE ino = ?1");
  s.Bind(ino);
  if (!s.Step()) {
    CAIRN_RETURN_IF_ERROR(s.status());
    return Status::IOError(fmt::format("catalog: no segment summary of inode {}", ino));
  }
  return SegmentSummary{s.UInt(0), s.UInt(1), s.UInt(2), s.UInt(3), s.UInt(4), s.UInt(5)};
}

Status Catalog::PutSegment(const SegmentRecord& r) {
  return Prepare("INSERT OR REPLACE INTO segments(" SEGMENT_COLUMNS ") VALUES(?,?,?,?,?,?)")
      .Bind(r.ino, r.index, r.extent_id, r.extent_id == kHoleExtent ? r.hole_record : r.extent_offset, r.length,
            r.cached)
      .Run();
}

Status Catalog::DeleteSegment(uint64_t ino, uint64_t index) {
  return Prepare("DELETE FROM segments WHERE ino = ? AND idx = ?").Bind(ino, index).Run();
}

Status Catalog::SetSegmentsCached(uint64_t ino, bool cached) {
  return Prepare("UPDATE segments SET cached = ? WHERE ino = ?").Bind(cached, ino).Run();
}

Result<std::optional<SegmentRecord>> Catalog::LastCachedSegment(uint64_t ino) {
  auto& s = Prepare("SELECT " SEGMENT_COLUMNS " FROM segments WHERE ino = ? AND cached = 1 AND extent != 0 "
                        "ORDER BY idx DESC LIMIT 1");
  s.Bind(ino);
  if (s.Step()) return std::optional<SegmentRecord>(ReadSegment(s));
  CAIRN_RETURN_IF_ERROR(s.status());
  return std::optional<SegmentRecord>();
}

Status Catalog::SetSegmentCached(uint64_t ino, uint64_t index, bool cached) {
  return Prepare("UPDATE segments SET cached = ? WHERE ino = ? AND idx = ?").Bind(cached, ino, index).Run();
}

Result<ExtentRecord> Catalog::GetExtent(uint64_t id) {
  auto& s = Prepare("SELECT " EXTENT_COLUMNS " FROM extents WHERE id = ?");
  s.Bind(id);
  if (s.Step()) {
    ExtentRecord record = ReadExtentRow(s);
    CAIRN_RETURN_IF_ERROR(CheckExtentRecord(record));
    return record;
  }
  if (!s.status().ok()) return s.status();
  return Status::NotFound(fmt::format("extent {}", id));
}

Status Catalog::InsertExtent(const ExtentRecord& r) {
  return Prepare("INSERT INTO extents(" EXTENT_COLUMNS ") VALUES(?,?,?,?,?,?,?,?,?)")
      .Bind(r.id, r.payload_length, r.payload_crc, r.kind, r.refs, EncodeRedundancy(r.redundancy),
            EncodeChunks(r.chunks), r.logical_length, r.chain_stamp)
      .Run();
}

Status Catalog::SetExtentChunk(uint64_t id, size_t index, const ChunkPlacement& chunk) {
  auto extent = GetExtent(id);
  if (!extent.ok()) return extent.status();
  if (index >= extent->chunks.size()) return Status::InvalidArgument(fmt::format("extent {}: no chunk {}", id, index));
  extent->chunks[index] = chunk;
  return Prepare("UPDATE extents SET chunks = ? WHERE id = ?").Bind(EncodeChunks(extent->chunks), id).Run();
}

Status Catalog::SetExtentRefs(uint64_t id, uint64_t refs) {
  return Prepare("UPDATE extents SET refs = ? WHERE id = ?").Bind(refs, id).Run();
}

Status Catalog::DeleteExtent(uint64_t id) { return Prepare("DELETE FROM extents WHERE id = ?").Bind(id).Run(); }

Result<uint64_t> Catalog::CountSegmentsIn(uint64_t id) {
  auto& s = Prepare("SELECT (SELECT COUNT(*) FROM segments WHERE extent = ?1) + "
                    "(SELECT COUNT(*) FROM segments WHERE extent = 0 AND extent_offset = ?1)");
  s.Bind(id);
  if (!s.Step()) return s.status().ok() ? Status::Corruption("catalog: no segment count") : s.status();
  return s.UInt(0);
}

Result<std::vector<ExtentRecord>> Catalog::AllExtents() {
  auto& s = Prepare("SELECT " EXTENT_COLUMNS " FROM extents ORDER BY id");
  s.Bind();
  return Rows(s, ReadExtentRow);
}

Result<std::vector<ExtentRecord>> Catalog::ExtentsAfter(uint64_t after, size_t limit) {
  auto& s = Prepare("SELECT " EXTENT_COLUMNS " FROM extents WHERE id > ?1 ORDER BY id LIMIT ?2");
  s.Bind(static_cast<int64_t>(after), static_cast<int64_t>(limit));
  return Rows(s, ReadExtentRow);
}

Result<std::vector<SegmentRecord>> Catalog::AllSegments() {
  auto& s = Prepare("SELECT " SEGMENT_COLUMNS " FROM segments ORDER BY ino, idx");
  s.Bind();
  return Rows(s, ReadSegment);
}

Result<uint64_t> Catalog::MaxExtentIdEverUsed() {
  auto& s = Prepare("SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'extents'), 0), "
                    "COALESCE((SELECT MAX(id) FROM extents), 0)");
  s.Bind();
  if (s.Step()) return std::max(s.UInt(0), s.UInt(1));
  CAIRN_RETURN_IF_ERROR(s.status());
  return Status::Corruption("catalog: no highest extent id");
}

Status Catalog::DeleteFileKey(uint64_t ino) {
  return Prepare("DELETE FROM file_keys WHERE ino = ?").Bind(ino).Run();
}

Result<FileKeyRecord> Catalog::GetFileKey(uint64_t ino) {
  auto& s = Prepare("SELECT ino, key_name, master_version, wrapped FROM file_keys WHERE ino = ?");
  s.Bind(ino);
  if (s.Step()) return FileKeyRecord{s.UInt(0), s.Text(1), static_cast<uint32_t>(s.UInt(2)), s.Blob(3)};
  CAIRN_RETURN_IF_ERROR(s.status());
  return Status::NotFound(fmt::format("inode {} has no data key (never made, or erased by cairn key delete --erase)", ino));
}

Status Catalog::PutFileKey(const FileKeyRecord& r) {
  return Prepare("INSERT OR REPLACE INTO file_keys(ino, key_name, master_version, wrapped) VALUES(?,?,?,?)")
      .Bind(r.ino, r.key_name, r.master_version, std::span<const uint8_t>(r.wrapped))
      .Run();
}

Result<std::vector<FileKeyRecord>> Catalog::FileKeysUnder(const std::string& key_name) {
  auto& s = Prepare("SELECT ino, key_name, master_version, wrapped FROM file_keys WHERE key_name = ? ORDER BY ino");
  s.Bind(key_name);
  return ReadFileKeys(s);
}

Result<std::vector<FileKeyRecord>> Catalog::AllFileKeys() {
  auto& s = Prepare("SELECT ino, key_name, master_version, wrapped FROM file_keys ORDER BY ino");
  s.Bind();
  return ReadFileKeys(s);
}

Status Catalog::DeleteFileKeysUnder(const std::string& key_name) {
  return Prepare("DELETE FROM file_keys WHERE key_name = ?").Bind(key_name).Run();
}

Result<Catalog::Totals> Catalog::ComputeTotals() {
  auto& s = Prepare(
      "SELECT (SELECT COUNT(*) FROM inodes), (SELECT COUNT(*) FROM inodes WHERE dirty = 1), "
      "(SELECT COUNT(*) FROM extents), (SELECT COALESCE(SUM(length), 0) FROM segments), "
      "(SELECT COUNT(*) FROM policy_queue)");
  s.Bind();
  if (s.Step()) return Totals{s.UInt(0), s.UInt(1), s.UInt(2), s.UInt(3), 0, s.UInt(4)};
  CAIRN_RETURN_IF_ERROR(s.status());
  return Status::Corruption("catalog: no totals");
}

}  // namespace cairn
