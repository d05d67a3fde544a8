#include <catch2/catch.hpp>

#include <set>

#include "archive/archive.h"
#include "archive/config.h"
#include "archive_fixture.h"
#include "redundancy/striping.h"
#include "test_util.h"

using namespace cairn;

namespace {

// An archive of 5 file-backed disks at dir/a in groups "hot" (disks 3, 4, listed first) and
// "cold" (disks 0-2).
std::unique_ptr<Archive> OpenGrouped(const test::TempDir& dir) {
  MkfsOptions mkfs;
  mkfs.disk_count = 5;
  mkfs.disk_size = 16 << 20;
  REQUIRE(CreateArchive(dir / "a", mkfs).ok());
  auto options = LoadConfig(dir / "a/cairn.conf");
  REQUIRE(options.ok());
  options->groups = {{"hot", "pool", {3, 4}}, {"cold", "pool", {0, 1, 2}}};
  REQUIRE(SaveConfig(dir / "a", *options).ok());
  auto archive = Archive::Open(dir / "a", {});
  REQUIRE(archive.ok());
  return std::move(*archive);
}

Redundancy Parse(const char* raid) {
  auto r = ParseRedundancy(raid, "none");
  REQUIRE(r.ok());
  return *r;
}

}  // namespace

TEST_CASE("Archive: new extents go to the first disk group, and raid= must fit it", "[groups]") {
  test::TempDir dir;
  auto archive = OpenGrouped(dir);
  REQUIRE(archive->groups().size() == 2);
  CHECK(archive->groups()[0].name() == "hot");
  CHECK(&archive->group_of(1) == &archive->groups()[1]);
  CHECK(archive->CheckRaidInGroup("mirror-2", "balanced").ok());
  CHECK(archive->CheckRaidInGroup("mirror-3", "balanced").message() ==
        "raid=mirror-3 puts 3 chunks on distinct disks; group hot (where new data goes) has 2 disks");
  CHECK(archive->CheckRaidInGroup("mirror-3", "group=cold").ok());
  for (int round = 0; round < 6; round++) {
    auto payload = test::RandomBytes(50000, round);
    auto extent = archive->extents().WriteExtentToDisk(ExtentKind::kFileSegment, 1, 0, payload,
                                                       test::PlainEncoding("", Parse("mirror-2"), payload));
    REQUIRE(extent.ok());
    std::set<uint32_t> disks;
    for (const ChunkPlacement& chunk : extent->chunks) disks.insert(chunk.disk);
    CHECK(disks == std::set<uint32_t>{3, 4});
    auto back = archive->extents().ReadExtentPayload(*extent);
    REQUIRE(back.ok());
    CHECK(*back == payload);
    archive->extents().ReleaseUncommitted(*extent);
  }
  auto small = test::RandomBytes(100, 9);
  auto wide = archive->extents().WriteExtentToDisk(ExtentKind::kFileSegment, 1, 0, small,
                                                   test::PlainEncoding("", Parse("rs-2-1"), small));
  REQUIRE_FALSE(wide.ok());
  CHECK(wide.status().message().find("only 2 found among the 2 disks of group hot") != std::string::npos);
}

TEST_CASE("Archive: a chunk relocated off a failed disk stays in its group", "[groups]") {
  test::TempDir dir;
  auto archive = OpenGrouped(dir);
  auto payload = test::RandomBytes(50000, 1);
  auto extent = archive->extents().WriteExtentToDisk(ExtentKind::kFileSegment, 1, 0, payload,
                                                     test::PlainEncoding("", Parse("mirror-2"), payload));
  REQUIRE(extent.ok());
  REQUIRE(archive->FailDisk(4).ok());
  size_t on_failed = extent->chunks[0].disk == 4 ? 0 : 1;
  // Group hot has no other disk: the cold disks with room are not used.
  auto nowhere = archive->extents().ReserveRelocation(*extent, on_failed);
  REQUIRE_FALSE(nowhere.ok());
  CHECK(nowhere.status().code() == Status::Code::kNoSpace);

  // In group cold, a chunk of a failed disk moves to the cold disk in service that holds no
  // other chunk of the extent, though the hot disk 3 has more room.
  archive->extents().ReleaseUncommitted(*extent);
  ExtentRecord cold = *extent;
  cold.chunks[0].disk = 0;  // a cold extent on disks 0 and 1
  cold.chunks[1].disk = 1;
  REQUIRE(archive->store(2).Reserve(1 << 20, 0));
  REQUIRE(archive->FailDisk(0).ok());
  auto moved = archive->extents().ReserveRelocation(cold, 0);
  REQUIRE(moved.ok());
  CHECK(moved->disk == 2);
  CHECK(moved->crc == cold.chunks[0].crc);
  archive->extents().ReleaseUncommittedChunk(*moved);
}
