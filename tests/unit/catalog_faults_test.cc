// A failing catalog query is an error all the way up, never an empty or partial answer:
// each case fails one query with SqlFaults and checks that its callers say so.
#include <catch2/catch.hpp>

#include "catalog/catalog.h"
#include "pipeline/member_metadata.h"
#include "policy/resolver.h"
#include "sql_faults.h"
#include "test_util.h"

using namespace cairn;

namespace {

struct FailingCatalog {
  test::TempDir dir;
  std::unique_ptr<Catalog> catalog = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
  test::SqlFaults faults;
  uint64_t d = Make(kRootInode, "d", 040755);
  uint64_t f = Make(d, "f", 0100644);

  FailingCatalog() { faults.Watch(catalog->handle()); }
  uint64_t Make(uint64_t parent, const char* name, uint32_t mode) {
    InodeRecord r;
    r.mode = mode;
    r.nlink = 1;
    uint64_t ino = *catalog->InsertInode(r);
    REQUIRE(catalog->InsertEntry(parent, name, ino).ok());
    return ino;
  }
  // Arms the fault on queries containing `fragment` and checks that it fired.
  template <typename Call>
  Status FailWith(const char* fragment, Call call) {
    int before = faults.injected();
    faults.Arm(fragment);
    Status st = call();
    faults.Disarm();
    CHECK(faults.injected() > before);
    return st;
  }
};

template <typename T>
Status StatusOf(const Result<T>& r) {
  return r.status();
}

}  // namespace

TEST_CASE("SqlFaults: fails only the statements it is armed for") {
  FailingCatalog c;
  c.faults.Arm("FROM xattrs");
  CHECK(c.catalog->Lookup(c.d, "f").ok());
  CHECK_FALSE(c.catalog->GetXattr(c.f, "user.x").status().IsNotFound());
  c.faults.Disarm();
  CHECK(c.catalog->GetXattr(c.f, "user.x").status().IsNotFound());
}

TEST_CASE("Catalog: a failing xattr query fails policy resolution and member metadata") {
  FailingCatalog c;
  PolicyContext none{nullptr, 4 << 20};
  REQUIRE(ResolvePolicy(*c.catalog, c.f, none).ok());
  CHECK_FALSE(c.FailWith("SELECT name, value FROM xattrs", [&] { return StatusOf(c.catalog->XattrsWithPrefix(c.f, {""})); }).ok());
  CHECK_FALSE(c.FailWith("SELECT name, value FROM xattrs", [&] { return StatusOf(ResolvePolicy(*c.catalog, c.f, none)); }).ok());
  CHECK_FALSE(c.FailWith("SELECT name, value FROM xattrs", [&] { return StatusOf(DescribeInodes(*c.catalog, {c.f})); }).ok());
  CHECK_FALSE(c.FailWith("FROM dentries WHERE ino = ?", [&] { return StatusOf(ResolvePolicy(*c.catalog, c.f, none)); }).ok());
  CHECK_FALSE(c.FailWith("FROM dentries WHERE ino = ?", [&] { return StatusOf(PathOf(*c.catalog, c.f)); }).ok());
}

TEST_CASE("Catalog: a failing rule xattr lookup fails policy resolution") {
  FailingCatalog c;
  auto rules = RuleSet::Parse("rule tagged\n    where xattr user.tag = yes\n    set segment_size=1M\ndefault\n", "rules");
  REQUIRE(rules.ok());
  PolicyContext context{std::make_shared<const RuleSet>(std::move(*rules)), 4 << 20};
  REQUIRE(ResolvePolicy(*c.catalog, c.f, context).ok());
  CHECK_FALSE(c.FailWith("SELECT value FROM xattrs", [&] { return StatusOf(ResolvePolicy(*c.catalog, c.f, context)); }).ok());
}

TEST_CASE("Catalog: a failing segment or extent-id query is an error, not 'none'") {
  FailingCatalog c;
  REQUIRE(c.catalog->PutSegment({c.f, 0, 0, 0, 10, true}).ok());
  CHECK(c.catalog->GetSegment(c.f, 0)->has_value());
  CHECK_FALSE(c.FailWith("FROM segments WHERE ino = ? AND idx = ?", [&] { return StatusOf(c.catalog->GetSegment(c.f, 0)); }).ok());
  CHECK_FALSE(c.FailWith("FROM sqlite_sequence WHERE name = 'extents'", [&] { return StatusOf(c.catalog->MaxExtentIdEverUsed()); }).ok());
}

TEST_CASE("Catalog: an operation whose release fails is rolled back, and its listeners told so") {
  FailingCatalog c;
  int committed = 0, rolled_back = 0;
  c.catalog->SetListener({[&] { committed++; }, [&] { rolled_back++; }});
  REQUIRE(c.catalog->Begin().ok());
  REQUIRE(c.catalog->PutSegment({c.f, 0, 0, 0, 10, true}).ok());
  CHECK_FALSE(c.FailWith("RELEASE op", [&] { return c.catalog->Commit(); }).ok());
  CHECK(committed == 0);
  CHECK(rolled_back == 1);  // the archive frees nothing it queued during the operation
  c.catalog->Rollback();    // what InTransaction does then: nothing more
  CHECK(rolled_back == 1);
  CHECK_FALSE(c.catalog->GetSegment(c.f, 0)->has_value());
}

TEST_CASE("Catalog: a change outside an operation joins the batch, whose commit a sync then waits for") {
  FailingCatalog c;
  REQUIRE(c.catalog->Flush().ok());
  uint64_t before = c.catalog->commit_sequence();
  REQUIRE(c.catalog->SetSegmentsCached(c.f, false).ok());  // as eviction does, outside an operation
  REQUIRE(c.catalog->Flush().ok());
  CHECK(c.catalog->commit_sequence() > before);  // else SyncThrough(commit_sequence()) would not sync it
}

TEST_CASE("Catalog: a change outside an operation that cannot join a batch fails, never commits on its own") {
  FailingCatalog c;
  REQUIRE(c.catalog->Flush().ok());
  uint64_t before = c.catalog->commit_sequence();
  auto inode = c.catalog->GetInode(c.f);
  REQUIRE(inode.ok());
  InodeRecord changed = *inode;
  changed.size = 12345;
  Status st = c.FailWith("BEGIN IMMEDIATE", [&] { return c.catalog->UpdateInode(changed); });
  CHECK_FALSE(st.ok());
  // Not in the database behind the catalog's back, where no commit_sequence() counts it: a
  // SyncThrough would return without syncing it, and a batch replayed later would land over it.
  sqlite3_stmt* s = nullptr;
  REQUIRE(sqlite3_prepare_v2(c.catalog->handle(), "SELECT size FROM inodes WHERE ino = ?", -1, &s, nullptr) ==
          SQLITE_OK);
  sqlite3_bind_int64(s, 1, static_cast<int64_t>(c.f));
  REQUIRE(sqlite3_step(s) == SQLITE_ROW);
  CHECK(sqlite3_column_int64(s, 0) == static_cast<int64_t>(inode->size));
  sqlite3_finalize(s);
  CHECK(c.catalog->commit_sequence() == before);
  // Once a batch opens again, the same change goes through and counts.
  REQUIRE(c.catalog->UpdateInode(changed).ok());
  REQUIRE(c.catalog->Flush().ok());
  CHECK(c.catalog->commit_sequence() > before);
  CHECK(c.catalog->GetInode(c.f)->size == 12345u);
}

TEST_CASE("Catalog: after SQLite drops the batch, reads see its operations again and the next flush commits them") {
  FailingCatalog c;  // its two inodes wait in the open batch, acknowledged
  REQUIRE(c.catalog->PutSegment({c.f, 0, kHoleExtent, 0, 4096, true}).ok());
  // An interrupted UPDATE in an explicit transaction: SQLite rolls the whole batch back.
  Status st = c.FailWith("UPDATE segments SET cached", [&] { return c.catalog->SetSegmentsCached(c.f, false); });
  REQUIRE_FALSE(st.ok());
  CHECK(c.catalog->Lookup(c.d, "f").ok());
  CHECK(c.catalog->Flush().ok());
  CHECK(c.catalog->Lookup(c.d, "f").ok());
  CHECK(c.catalog->Begin().ok());  // writable again
  c.catalog->Rollback();
}

TEST_CASE("Catalog: a batch SQLite drops in the middle of an operation is not replayed under it") {
  FailingCatalog c;
  REQUIRE(c.catalog->Flush().ok());
  REQUIRE(c.catalog->Begin().ok());
  REQUIRE(c.catalog->InsertEntry(c.d, "a", c.f).ok());
  Status st = c.FailWith("INSERT INTO dentries", [&] { return c.catalog->InsertEntry(c.d, "b", c.f); });
  REQUIRE_FALSE(st.ok());  // SQLite rolled the whole batch back, the operation's savepoint with it
  CHECK_FALSE(c.catalog->Lookup(c.d, "f").ok());  // not replayed here, under the operation
  CHECK_FALSE(c.catalog->InsertEntry(c.d, "c", c.f).ok());
  c.catalog->Rollback();  // replays the batch without the operation
  REQUIRE(c.catalog->Flush().ok());
  CHECK(c.catalog->Lookup(c.d, "f").ok());
  for (const char* name : {"a", "b", "c"}) CHECK(c.catalog->Lookup(c.d, name).status().IsNotFound());
}

TEST_CASE("Catalog: a query that could not be prepared is prepared again on its next use") {
  test::TempDir dir;
  auto catalog = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
  auto exec = [&](const char* sql) { REQUIRE(sqlite3_exec(catalog->handle(), sql, nullptr, nullptr, nullptr) == SQLITE_OK); };
  exec("ALTER TABLE xattrs RENAME TO xattrs_away");  // as a passing failure to read the schema would
  auto failed = catalog->GetXattr(kRootInode, "user.a");
  REQUIRE_FALSE(failed.ok());
  CHECK_FALSE(failed.status().IsNotFound());
  CHECK_THAT(failed.status().message(), Catch::Contains("cannot prepare"));
  exec("ALTER TABLE xattrs_away RENAME TO xattrs");
  CHECK(catalog->GetXattr(kRootInode, "user.a").status().IsNotFound());
}

TEST_CASE("Catalog: an operation whose rollback fails leaves none of its changes to be committed") {
  // "ROLLBACK TO op" fails alone, or "ROLLBACK" of the whole transaction fails too.
  const char* fragment = GENERATE("ROLLBACK TO op", "ROLLBACK");
  FailingCatalog c;
  REQUIRE(c.catalog->Flush().ok());
  REQUIRE(c.catalog->Begin().ok());
  REQUIRE(c.catalog->InsertEntry(c.d, "kept", c.f).ok());
  REQUIRE(c.catalog->Commit().ok());  // acknowledged, in the open batch
  REQUIRE(c.catalog->Begin().ok());
  REQUIRE(c.catalog->InsertEntry(c.d, "undone", c.f).ok());
  CHECK(c.FailWith(fragment, [&] {
    c.catalog->Rollback();
    return Status::OK();
  }).ok());
  CHECK(c.catalog->Lookup(c.d, "undone").status().IsNotFound());
  CHECK(c.catalog->Lookup(c.d, "kept").ok());
  CHECK(c.catalog->Begin().sys_errno() == EROFS);  // until a commit succeeds
  REQUIRE(c.catalog->Flush().ok());
  CHECK(c.catalog->Lookup(c.d, "undone").status().IsNotFound());
  CHECK(c.catalog->Lookup(c.d, "kept").ok());
  REQUIRE(c.catalog->Begin().ok());  // writable again
  c.catalog->Rollback();
}
