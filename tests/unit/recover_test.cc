#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>

#include "archive_fixture.h"
#include "maintenance/recover.h"
#include "sql_faults.h"
#include "test_util.h"

using namespace cairn;

TEST_CASE("Recover: the old catalog's data keys keep their inodes, never a new file's", "[recover]") {
  test::ArchiveFixture a;
  a.WriteFile("f", test::RandomBytes(1000, 1));
  REQUIRE(a.fs->PersistAll().ok());
  {  // the data key of a file whose data never reached the disks (its persist failed)
    std::lock_guard lock(a.archive->catalog_mutex());
    REQUIRE(a.archive->catalog().PutFileKey({100, "k1", 1, std::vector<uint8_t>(60, 7)}).ok());
  }
  REQUIRE(a.archive->CommitDurably().ok());
  a.Close();
  auto recovered = RecoverCatalog(a.dir, RecoverOptions{.force = true});
  REQUIRE(recovered.ok());
  CHECK(recovered->files == 1);
  a.Open();
  auto made = a.fs->MakeNode(kRootInode, "new", S_IFREG | 0644, 0, Caller{});
  REQUIRE(made.ok());
  CHECK(made->ino > 100);
}

TEST_CASE("Recover: a second recover in the same second keeps the first one's backups", "[recover]") {
  test::ArchiveFixture a;
  a.WriteFile("f", test::RandomBytes(1000, 2));
  REQUIRE(a.fs->PersistAll().ok());
  a.Close();
  auto first = RecoverCatalog(a.dir, RecoverOptions{.force = true});
  REQUIRE(first.ok());
  auto second = RecoverCatalog(a.dir, RecoverOptions{.force = true});
  REQUIRE(second.ok());
  REQUIRE_FALSE(first->catalog_backup.empty());
  CHECK(second->catalog_backup != first->catalog_backup);
  CHECK(std::filesystem::exists(first->catalog_backup));
  CHECK(std::filesystem::exists(second->catalog_backup));
  a.Open();
  CHECK(a.fs->LookupPath("/f").ok());
}

TEST_CASE("Recover: a recover that fails before it began leaves a catalog no mount opens", "[recover]") {
  test::ArchiveFixture a;
  a.WriteFile("f", test::RandomBytes(1000, 3));
  REQUIRE(a.fs->PersistAll().ok());
  {  // a data key to carry over to the new catalog, which will fail
    std::lock_guard lock(a.archive->catalog_mutex());
    REQUIRE(a.archive->catalog().PutFileKey({100, "k1", 1, std::vector<uint8_t>(60, 7)}).ok());
  }
  REQUIRE(a.archive->CommitDurably().ok());
  a.Close();
  {
    test::SqlFaults faults;
    faults.Arm("INTO file_keys");
    CHECK_FALSE(RecoverCatalog(a.dir, RecoverOptions{.force = true}).ok());
  }
  // Before, an empty catalog without the unfinished mark: the mount took every disk for free.
  auto opened = Archive::Open(a.dir, {});
  INFO(opened.status().ToString());
  CHECK_FALSE(opened.ok());
  // A recover that finishes makes it whole.
  REQUIRE(RecoverCatalog(a.dir, RecoverOptions{.force = true}).ok());
  a.Open();
  CHECK(a.fs->LookupPath("/f").ok());
}
