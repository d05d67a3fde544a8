// The catalog when a batch cannot commit (inode numbers, generations, the replayed batch),
// bounded parent walks in a damaged catalog, and the schema upgrades that added generations
// and logical lengths.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <cerrno>

#include <fmt/format.h>

#include "catalog/catalog.h"
#include "power_loss.h"
#include "test_util.h"

using namespace cairn;

namespace {

// Makes every COMMIT of `db` fail (SQLite then rolls the transaction back) while *fail.
void FailCommits(Catalog& catalog, bool* fail) {
  sqlite3_commit_hook(catalog.handle(), [](void* flag) { return *static_cast<bool*>(flag) ? 1 : 0; }, fail);
}

InodeRecord File() {
  InodeRecord file;
  file.mode = 0100644;
  file.nlink = 1;
  return file;
}

Result<uint64_t> CreateFile(Catalog& c, const std::string& name) {
  CAIRN_RETURN_IF_ERROR(c.Begin());
  auto ino = c.InsertInode(File());
  Status st = ino.ok() ? c.InsertEntry(kRootInode, name, *ino) : ino.status();
  if (st.ok()) st = c.Commit();
  if (!st.ok()) {
    c.Rollback();
    return st;
  }
  return ino;
}

// Takes `catalog` back to schema version 4 (no logical lengths, no transform chains, no file keys).
void MakeVersion4(Catalog& catalog) {
  char* error = nullptr;
  REQUIRE(sqlite3_exec(catalog.handle(),
                       "ALTER TABLE extents DROP COLUMN logical_length; ALTER TABLE extents DROP COLUMN chain; "
                       "DROP TABLE file_keys; UPDATE meta SET value = '4' WHERE CAST(key AS TEXT) = 'schema_version'",
                       nullptr, nullptr, &error) == SQLITE_OK);
}

}  // namespace

TEST_CASE("Catalog: a failed batch commit keeps acknowledged operations and no inode number comes back") {
  test::TempDir dir;
  bool fail = false;
  uint64_t kept = 0;
  {
    auto c = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
    REQUIRE(c->Begin().ok());
    auto undone = c->InsertInode(File());
    REQUIRE(undone.ok());
    c->Rollback();
    auto before = CreateFile(*c, "before");
    REQUIRE(before.ok());
    CHECK(*before > *undone);  // a rolled-back operation does not give its number back
    REQUIRE(c->Flush().ok());

    auto acknowledged = CreateFile(*c, "acknowledged");
    REQUIRE(acknowledged.ok());
    kept = *acknowledged;
    FailCommits(*c, &fail);
    fail = true;
    Status st = c->Flush();
    REQUIRE_FALSE(st.ok());
    CHECK_FALSE(c->write_failure().ok());
    // The acknowledged create is still there; new operations are refused with EROFS.
    CHECK(c->Lookup(kRootInode, "acknowledged").ok());
    CHECK(c->GetInode(kept).ok());
    CHECK(c->Begin().sys_errno() == EROFS);
    CHECK_FALSE(c->Flush().ok());  // retried, still failing
    CHECK(c->Lookup(kRootInode, "acknowledged").ok());

    fail = false;
    REQUIRE(c->Flush().ok());
    CHECK(c->write_failure().ok());
    auto after = CreateFile(*c, "after");
    REQUIRE(after.ok());
    CHECK(*after > kept);
    REQUIRE(c->FlushDurably().ok());
  }
  auto c = std::move(*Catalog::Open(dir / "c.db"));
  CHECK(*c->Lookup(kRootInode, "acknowledged") == kept);
  CHECK(c->Lookup(kRootInode, "after").ok());
}

TEST_CASE("Catalog: a number reused after a batch was lost for good has another generation") {
  test::TempDir dir;
  bool fail = false;
  uint64_t lost = 0;
  uint64_t lost_generation = 0;
  {
    auto c = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
    CHECK(c->GetInode(kRootInode)->generation == 0);  // the kernel's root has generation 0
  }
  {
    auto c = std::move(*Catalog::Open(dir / "c.db"));
    auto ino = CreateFile(*c, "lost");
    REQUIRE(ino.ok());
    lost = *ino;
    lost_generation = c->GetInode(lost)->generation;
    CHECK(lost_generation > 0);
    FailCommits(*c, &fail);
    fail = true;  // closing cannot commit it either: the batch is lost (and logged)
  }
  auto c = std::move(*Catalog::Open(dir / "c.db"));
  CHECK(c->Lookup(kRootInode, "lost").status().IsNotFound());
  auto reused = CreateFile(*c, "new");
  REQUIRE(reused.ok());
  REQUIRE(*reused == lost);  // never committed, so the number may come back in a new epoch...
  CHECK(c->GetInode(*reused)->generation > lost_generation);  // ...as a different file to the kernel
}

TEST_CASE("Catalog: a directory cycle stops the parent walk with an error naming its inodes") {
  test::TempDir dir;
  auto c = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
  InodeRecord d;
  d.mode = 040755;
  d.nlink = 2;
  uint64_t p = *c->InsertInode(d);
  uint64_t q = *c->InsertInode(d);
  uint64_t other = *c->InsertInode(d);
  REQUIRE(c->InsertEntry(kRootInode, "p", p).ok());
  REQUIRE(c->InsertEntry(p, "q", q).ok());
  REQUIRE(c->InsertEntry(kRootInode, "other", other).ok());
  CHECK(*c->IsWithin(q, p));
  CHECK_FALSE(*c->IsWithin(q, other));
  REQUIRE(c->MoveEntry(kRootInode, "p", q, "p").ok());  // damage: p's only parent is now its child q
  auto walk = c->IsWithin(q, other);
  REQUIRE_FALSE(walk.ok());
  CHECK(walk.status().IsCorruption());
  std::string message = walk.status().message();
  CHECK(message.find(fmt::format("inode {}", q)) != std::string::npos);
  CHECK(message.find(fmt::format("{} -> {}", q, p)) != std::string::npos);
}

TEST_CASE("Catalog: a version 3 catalog is upgraded when opened for writing") {
  test::TempDir dir;
  {
    auto c = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
    REQUIRE(CreateFile(*c, "old").ok());
    REQUIRE(c->Flush().ok());
    char* error = nullptr;
    REQUIRE(sqlite3_exec(c->handle(),
                         "ALTER TABLE inodes DROP COLUMN generation; DROP TABLE file_keys; "
                         "ALTER TABLE extents DROP COLUMN logical_length; ALTER TABLE extents DROP COLUMN chain; "
                         "UPDATE meta SET value = '3' WHERE CAST(key AS TEXT) = 'schema_version'",
                         nullptr, nullptr, &error) == SQLITE_OK);
  }
  auto c = std::move(*Catalog::Open(dir / "c.db"));
  CHECK(*c->GetMeta("schema_version") == std::to_string(kCatalogSchemaVersion));
  auto old = c->Lookup(kRootInode, "old");
  REQUIRE(old.ok());
  CHECK(c->GetInode(*old)->generation == 0);
  auto fresh = CreateFile(*c, "new");
  REQUIRE(fresh.ok());
  CHECK(*fresh > *old);
  CHECK(c->GetInode(*fresh)->generation > 0);
}

TEST_CASE("Catalog: an upgrade whose commit fails leaves the old schema whole, never its version number alone") {
  test::TempDir dir;
  constexpr uint64_t kExtents = 2000;  // the upgrade rewrites every extent row: far more WAL than the meta row
  {
    auto c = std::move(*Catalog::Create(dir / "v4.db", 0, 0, 0));
    for (uint64_t id = 1; id <= kExtents; id++) {
      ExtentRecord e{id, 5000, 0xabc, 1, 1, Redundancy{}, {{0, id * 8192, ExtentAllocation(5000), 0x11}}};
      REQUIRE(c->InsertExtent(e).ok());
    }
    REQUIRE(c->Flush().ok());
    MakeVersion4(*c);
  }  // the last connection checkpoints and removes the WAL
  // The schema version of the catalog at `path` and whether its extents have logical lengths.
  auto schema_of = [](const std::string& path) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    std::string version;
    bool logical_length = false;
    sqlite3_stmt* s = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "SELECT CAST(value AS TEXT) FROM meta WHERE CAST(key AS TEXT) = 'schema_version'",
                               -1, &s, nullptr) == SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW) version = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    REQUIRE(sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info('extents') WHERE name = 'logical_length'", -1, &s,
                               nullptr) == SQLITE_OK);
    logical_length = sqlite3_step(s) == SQLITE_ROW;
    sqlite3_finalize(s);
    sqlite3_close(db);
    return std::make_pair(version, logical_length);
  };
  // Writes past the file size limit fail (EFBIG): with a limit at every KiB from small to
  // large, the upgrade fails in its statements, at its commit, or not at all. Whatever the
  // catalog then commits (its destructor flushes what it kept), the schema version and the
  // tables agree.
  // The process's file size limit, lowered while it lives (SIGXFSZ ignored: the write fails instead).
  struct FileSizeLimit {
    explicit FileSizeLimit(rlim_t bytes) : old_handler(std::signal(SIGXFSZ, SIG_IGN)) {
      REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
      rlimit limit = old_limit;
      limit.rlim_cur = bytes;
      REQUIRE(::setrlimit(RLIMIT_FSIZE, &limit) == 0);
    }
    ~FileSizeLimit() {
      ::setrlimit(RLIMIT_FSIZE, &old_limit);
      std::signal(SIGXFSZ, old_handler);
    }
    void (*old_handler)(int);
    rlimit old_limit{};
  };
  int failed_at_commit = 0;
  // Below 32 KiB SQLite cannot make its shared-memory file, and the catalog does not open.
  for (rlim_t limit_kib = 32; limit_kib <= 320; limit_kib++) {
    const std::string path = dir / fmt::format("c{}.db", limit_kib);
    std::filesystem::copy_file(dir / "v4.db", path);
    Status opened;
    {
      FileSizeLimit limit(limit_kib << 10);
      opened = Catalog::Open(path).status();  // its destructor flushes whatever it kept
    }
    // Catalog::Exec quotes the statement that failed.
    if (!opened.ok() && opened.message().find("'COMMIT'") != std::string::npos) failed_at_commit++;
    auto [version, logical_length] = schema_of(path);
    INFO("limit " << limit_kib << " KiB: " << (opened.ok() ? "opened" : opened.message()));
    CHECK(((version == "4" && !logical_length) || (version == std::to_string(kCatalogSchemaVersion) && logical_length)));
    auto c = Catalog::Open(path);  // and the upgrade goes through once it can commit
    REQUIRE(c.ok());
    CHECK(*(*c)->GetMeta("schema_version") == std::to_string(kCatalogSchemaVersion));
    auto extent = (*c)->GetExtent(kExtents);
    REQUIRE(extent.ok());
    CHECK(extent->logical_length == 5000);
  }
  CHECK(failed_at_commit > 0);  // the case this is about was met
}

// Makes SQLite roll back the next `n` commits of every connection opened while it lives, as
// it does on an I/O error or when out of memory (a commit hook that says no).
class RolledBackCommits {
 public:
  explicit RolledBackCommits(int n) {
    remaining_ = n;
    sqlite3_auto_extension(reinterpret_cast<void (*)()>(&Install));
  }
  ~RolledBackCommits() { sqlite3_cancel_auto_extension(reinterpret_cast<void (*)()>(&Install)); }
  RolledBackCommits(const RolledBackCommits&) = delete;
  RolledBackCommits& operator=(const RolledBackCommits&) = delete;

 private:
  static int Install(sqlite3* db, const char**, const void*) {
    sqlite3_commit_hook(db, [](void*) { return remaining_ > 0 ? (remaining_--, 1) : 0; }, nullptr);
    return SQLITE_OK;
  }
  static inline int remaining_ = 0;
};

TEST_CASE("Catalog: an upgrade whose commit SQLite rolls back leaves the older catalog whole, and goes through later") {
  test::TempDir dir;
  {
    auto c = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
    ExtentRecord e{1, 5000, 0xabc, 1, 1, Redundancy{}, {{0, 8192, ExtentAllocation(5000), 0x11}}};
    REQUIRE(c->InsertExtent(e).ok());
    REQUIRE(c->Flush().ok());
    MakeVersion4(*c);
  }
  {
    RolledBackCommits refused(1);
    auto c = Catalog::Open(dir / "c.db");
    CHECK_FALSE(c.ok());  // and whatever it kept is flushed as it goes
  }
  auto c = Catalog::Open(dir / "c.db");
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(*(*c)->GetMeta("schema_version") == std::to_string(kCatalogSchemaVersion));
  auto extent = (*c)->GetExtent(1);
  REQUIRE(extent.ok());
  CHECK(extent->logical_length == 5000);
}

TEST_CASE("Catalog: a version 4 catalog gets logical lengths equal to the stored ones and no transform chain") {
  test::TempDir dir;
  const uint64_t kAlloc = ExtentAllocation(5000);
  {
    auto c = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
    ExtentRecord e{7, 5000, 0xabc, 1, 1, Redundancy{}, {{0, 4096, kAlloc, 0x11}}};
    REQUIRE(c->InsertExtent(e).ok());
    REQUIRE(c->Flush().ok());
    MakeVersion4(*c);
  }
  auto c = std::move(*Catalog::Open(dir / "c.db"));
  CHECK(*c->GetMeta("schema_version") == std::to_string(kCatalogSchemaVersion));
  auto extent = c->GetExtent(7);
  REQUIRE(extent.ok());
  CHECK(extent->logical_length == 5000);
  CHECK(extent->chain_stamp.empty());
  CHECK(c->GetFileKey(1).status().IsNotFound());  // and an empty file_keys table
  CHECK(c->AllFileKeys()->empty());
}

TEST_CASE("Catalog: SyncThrough fsyncs the WAL through the connection's VFS, once for all commits before it") {
  test::PowerSupply supply;  // never armed: its VFS shows the test every sync
  test::PowerLossVfs vfs(supply);
  std::atomic<int> wal_syncs = 0;
  supply.BeforeSync([&](test::Device, const std::string& path) { wal_syncs += path.ends_with("-wal"); });
  test::TempDir dir;
  auto c = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
  CHECK(wal_syncs > 0);  // the new catalog is durable
  wal_syncs = 0;
  REQUIRE(CreateFile(*c, "f").ok());
  REQUIRE(c->Flush().ok());  // committed, not synced
  uint64_t first = c->commit_sequence();
  REQUIRE(CreateFile(*c, "g").ok());
  REQUIRE(c->Flush().ok());
  uint64_t second = c->commit_sequence();
  CHECK(second == first + 1);
  CHECK(wal_syncs == 0);
  REQUIRE(c->Flush().ok());  // nothing to commit: no new commit to sync
  CHECK(c->commit_sequence() == second);
  REQUIRE(c->SyncThrough(second).ok());
  CHECK(wal_syncs == 1);
  REQUIRE(c->SyncThrough(first).ok());  // the sync of the later commit covered it
  REQUIRE(c->SyncThrough(second).ok());
  CHECK(wal_syncs == 1);
  REQUIRE(CreateFile(*c, "h").ok());
  REQUIRE(c->FlushDurably().ok());
  CHECK(wal_syncs == 2);
}

TEST_CASE("Catalog: a replayed batch writes the very values of its operations") {
  test::TempDir dir;
  bool fail = false;
  auto c = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
  InodeRecord old_file = File();
  old_file.mtime_ns = -1234567890123;  // before 1970
  old_file.size = uint64_t{1} << 62;
  old_file.symlink = std::string("a\0b", 3);
  std::vector<uint8_t> binary{0, 0xff, 0x80, 0x7f, 0};
  ExtentRecord extent{9, 5000, 0xfedcba98, 1, 1, {}, {{2, 1ull << 40, 12288, 0x55}}};
  extent.logical_length = 4000;
  extent.chain_stamp = "squash@2";
  REQUIRE(c->Begin().ok());
  auto ino = c->InsertInode(old_file);
  REQUIRE(ino.ok());
  REQUIRE(c->InsertEntry(kRootInode, std::string("n\0\xff", 3), *ino).ok());
  REQUIRE(c->SetXattr(*ino, "user.binary", binary).ok());
  REQUIRE(c->SetXattr(*ino, "user.empty", {}).ok());
  REQUIRE(c->InsertExtent(extent).ok());
  REQUIRE(c->Commit().ok());
  FailCommits(*c, &fail);
  fail = true;
  REQUIRE_FALSE(c->Flush().ok());  // dropped by SQLite, replayed from the journal
  fail = false;
  REQUIRE(c->Flush().ok());
  auto inode = c->GetInode(*ino);
  REQUIRE(inode.ok());
  CHECK(inode->mtime_ns == old_file.mtime_ns);
  CHECK(inode->size == old_file.size);
  CHECK(inode->symlink == old_file.symlink);
  CHECK(*c->Lookup(kRootInode, std::string("n\0\xff", 3)) == *ino);
  CHECK(*c->GetXattr(*ino, "user.binary") == binary);
  auto empty = c->GetXattr(*ino, "user.empty");
  REQUIRE(empty.ok());
  CHECK(empty->empty());
  auto back = c->GetExtent(9);
  REQUIRE(back.ok());
  CHECK(back->payload_crc == extent.payload_crc);
  CHECK(back->chunks == extent.chunks);
  CHECK(back->logical_length == extent.logical_length);
  CHECK(back->chain_stamp == extent.chain_stamp);
}
