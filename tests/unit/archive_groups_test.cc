#include <catch2/catch.hpp>

#include <set>

#include "archive/archive.h"
#include "archive/config.h"
#include "archive/rules_fit.h"
#include "policy/rules.h"
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

TEST_CASE("CheckRulesFit: a raid= beside a placement= must fit the group it names, one without some group",
          "[groups][rules]") {
  ArchiveOptions options;
  options.disks.resize(19);
  options.groups = {{"hot", "pool", {0, 1}}, {"cold", "lonestar", {}, "4x4:2+1"}};
  for (uint32_t d = 2; d < 18; d++) options.groups[1].disks.push_back(d);
  auto check = [&](const std::string& text) {
    auto rules = RuleSet::Parse(text, "rules");
    REQUIRE(rules.ok());
    return CheckRulesFit(*rules, options, "rules");
  };
  // Fits: 2d and mirrors in the lonestar group, a 2-way mirror in the 2-disk pool; without a
  // placement= beside it, a raid= that some group keeps (an attribute or a pin may place the
  // files there).
  CHECK(check("rule iso\n  where name *.iso\n  set raid=2d placement=group=cold\ndefault\n").ok());
  CHECK(check("rule iso\n  where name *.iso\n  set raid=2d\ndefault\n").ok());
  CHECK(check("rule m\n  where name *.m\n  set raid=mirror-3 placement=group=cold\ndefault\n").ok());
  CHECK(check("rule hot\n  where name *.db\n  set placement=group=hot\ndefault\n  set raid=mirror-2\n").ok());
  CHECK(check("policy flat selectable\n  set raid=2d\ndefault\n").ok());
  CHECK(check("policy wide selectable\n  set raid=rs-4-2\ndefault\n").message() ==
        "rules:1: policy wide: no disk group can keep raid=rs-4-2: raid=rs-4-2 puts 6 chunks on distinct disks; group "
        "hot (where new data goes) has 2 disks");

  // Refused: the pair a statement sets, itself or through its named policy.
  CHECK(check("rule iso\n  where name *.iso\n  set raid=rs-2-1 placement=group=cold\ndefault\n").message() ==
        "rules:1: rule iso: raid=rs-2-1 stripes extents across disks; lonestar group cold keeps each whole on one "
        "bucket under its parity grid (use raid=2d, or mirror-N for copies on N buckets)");
  CHECK(check("rule iso\n  where name *.iso\n  set raid=2d placement=group=hot\ndefault\n").message() ==
        "rules:1: rule iso: raid=2d keeps each extent whole on one bucket of a lonestar group; group hot is a pool "
        "(set placement=group=<a lonestar group>)");
  CHECK(check("policy p\n  set placement=group=hot\nrule db\n  where name *.db\n  set policy=p raid=mirror-3\n"
              "default\n")
            .message() ==
        "rules:3: rule db: raid=mirror-3 puts 3 chunks on distinct disks; group hot (where new data goes) has 2 disks");
  CHECK(check("rule x\n  where name *.x\n  set placement=group=lukewarm\ndefault\n").message() ==
        "rules:1: rule x: placement=group=lukewarm: this archive has no disk group lukewarm (groups: hot, cold)");
  CHECK(check("default\n  set raid=mirror-5 placement=group=cold\n").message() ==
        "rules:1: default: raid=mirror-5 puts 5 copies on buckets in distinct columns and parity groups; lonestar "
        "group cold (4x4:2+1) has room for 4");
  // Its buckets (grid positions 0, 1, 3, 4, 6, 7, 9, 10: disks 2, 3, 5, 6, 8, 9, 11, 12) on two shelves.
  for (uint32_t d : {2, 3, 5, 6}) options.disk_domains[d] = "shelf-a";
  for (uint32_t d : {8, 9, 11, 12}) options.disk_domains[d] = "shelf-b";
  CHECK(check("default\n  set raid=mirror-2 placement=group=cold\n").ok());
  CHECK(check("default\n  set raid=mirror-3 placement=group=cold\n").message() ==
        "rules:1: default: raid=mirror-3 puts 3 copies on buckets in distinct failure domains; the buckets of lonestar "
        "group cold are in 2 domains");
}
