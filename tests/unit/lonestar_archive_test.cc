// A lonestar group inside an archive, driven through Filesystem on image disks: raid=2d by
// default there and one bucket per file, a read that touches its bucket alone and a write
// that touches exactly d, hP, vP and vhP, and the raid values a group cannot keep refused.
#include <catch2/catch.hpp>

#include <fcntl.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "archive/archive.h"
#include "archive_fixture.h"
#include "array/grid_geometry.h"
#include "maintenance/repair.h"

using namespace cairn;

namespace {

using test::kSegment;
constexpr uint32_t kPoolDisks = 3;  // disks 0..2; the group's 16 are 3..18, in grid order

std::span<const uint8_t> Bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

// The disk I/O counts, made before the archive whose disks count into them.
struct CountsDiskIo {
  test::IoCounts io;
};

// The fixture's archive (3 pool disks) with a 4x4:2+1 lonestar group of 8 MiB disks.
struct LoneStarArchive : CountsDiskIo, test::ArchiveFixture {
  GridGeometry geometry = *GridGeometry::Parse("4x4:2+1");
  uint64_t cold = 0;  // a directory placed in the group

  LoneStarArchive()
      : test::ArchiveFixture(
            [](MkfsOptions& mkfs) {
              mkfs.disk_size = 8 << 20;
              mkfs.groups.push_back({*ParseGroupSpec("cold:lonestar:4x4:2+1"), {}});
            },
            [this](std::unique_ptr<Disk> disk, size_t i) -> std::unique_ptr<Disk> {
              return std::make_unique<test::IoCountDisk>(std::move(disk), io, i);
            }) {
    auto made = fs->MakeNode(kRootInode, "cold", S_IFDIR | 0755, 0, Caller{});
    REQUIRE(made.ok());
    cold = made->ino;
    REQUIRE(fs->SetXattr(cold, "user.cairn.placement", Bytes("group=cold"), 0, Caller{}).ok());
  }

  std::string Xattr(uint64_t ino, const std::string& name) {
    auto value = fs->GetXattr(ino, name);
    REQUIRE(value.ok());
    return std::string(value->begin(), value->end());
  }
  // The disks holding chunks of `ino`'s segments.
  std::set<uint32_t> DisksOf(uint64_t ino) {
    std::lock_guard lock(archive->catalog_mutex());
    std::set<uint32_t> disks;
    auto segments = archive->catalog().GetSegments(ino);
    REQUIRE(segments.ok());
    for (const SegmentRecord& s : *segments) {
      auto extent = archive->catalog().GetExtent(s.extent_id);
      REQUIRE(extent.ok());
      CHECK(extent->redundancy.scheme == Redundancy::Scheme::kTwoDimensional);
      for (const ChunkPlacement& c : extent->chunks) disks.insert(c.disk);
    }
    return disks;
  }
  std::set<size_t> Touched(const std::map<size_t, int>& counts) {
    std::set<size_t> disks;
    for (const auto& [disk, n] : counts) disks.insert(disk);
    return disks;
  }
};

}  // namespace

TEST_CASE("Lonestar archive: a file placed in the group is raid=2d, whole on one bucket", "[array]") {
  LoneStarArchive a;
  auto data = test::RandomBytes(5 * kSegment + 123, 1);
  uint64_t ino = a.WriteFile("f", data, a.cold);
  REQUIRE(a.fs->PersistAll().ok());
  CHECK(a.Xattr(ino, "user.cairn.effective").starts_with("raid=2d "));
  CHECK(a.Xattr(ino, "user.cairn.effective.source").starts_with("raid=default:lonestar "));
  std::set<uint32_t> disks = a.DisksOf(ino);
  REQUIRE(disks.size() == 1);  // every extent of the file on the same bucket
  uint32_t position = *disks.begin() - kPoolDisks;
  CHECK(a.geometry.role(position) == DiskRole::kData);
  std::string location = a.Xattr(ino, "user.cairn.location");
  CHECK(location.find(fmt::format("cold.b{}@r{}c{}:disk{}@", *a.geometry.bucket(position), a.geometry.row(position),
                                  a.geometry.column(position), *disks.begin())) != std::string::npos);
  REQUIRE(a.fs->EvictAll().ok());
  CHECK(a.ReadFile(ino, data.size()) == data);
}

TEST_CASE("Lonestar archive: a read touches its bucket alone, a persist exactly d, hP, vP and vhP", "[array]") {
  LoneStarArchive a;
  auto data = test::RandomBytes(4 * kSegment, 2);
  uint64_t ino = a.WriteFile("f", data, a.cold);
  REQUIRE(a.fs->PersistAll().ok());
  REQUIRE(a.fs->EvictAll().ok());
  uint32_t bucket = *a.DisksOf(ino).begin();
  a.io.Clear();
  CHECK(a.ReadFile(ino, data.size()) == data);
  CHECK(a.Touched(a.io.reads) == std::set<size_t>{bucket});
  CHECK(a.io.writes.empty());

  a.io.Clear();
  uint64_t second = a.WriteFile("g", test::RandomBytes(3 * kSegment, 3), a.cold);
  REQUIRE(a.fs->PersistAll().ok());
  uint32_t position = *a.DisksOf(second).begin() - kPoolDisks;
  std::set<size_t> write_set;
  for (uint32_t p : a.geometry.WriteSet(position)) write_set.insert(p + kPoolDisks);
  CHECK(a.Touched(a.io.writes) == write_set);
}

TEST_CASE("Lonestar archive: raid values a group cannot keep are refused when set", "[array]") {
  LoneStarArchive a;
  Status rs = a.fs->SetXattr(a.cold, "user.cairn.raid", Bytes("rs-2-1"), 0, Caller{});
  CHECK(rs.sys_errno() == EINVAL);
  CHECK(rs.message().find("lonestar group cold keeps each whole on one bucket") != std::string::npos);
  uint64_t pool_file = a.WriteFile("p", test::RandomBytes(100, 4));
  Status twod = a.fs->SetXattr(pool_file, "user.cairn.raid", Bytes("2d"), 0, Caller{});
  CHECK(twod.sys_errno() == EINVAL);
  CHECK(twod.message().find("group default is a pool") != std::string::npos);
  REQUIRE(a.fs->SetXattr(pool_file, "user.cairn.raid", Bytes("rs-2-1"), 0, Caller{}).ok());
  Status moved = a.fs->SetXattr(pool_file, "user.cairn.placement", Bytes("group=cold"), 0, Caller{});
  CHECK(moved.sys_errno() == EINVAL);  // its explicit raid would not fit there
  // mirror-2 in the group: copies on two buckets in distinct columns and parity groups.
  REQUIRE(a.fs->SetXattr(a.cold, "user.cairn.raid", Bytes("mirror-2"), 0, Caller{}).ok());
  uint64_t mirrored = a.WriteFile("m", test::RandomBytes(2 * kSegment, 5), a.cold);
  REQUIRE(a.fs->PersistAll().ok());
  std::lock_guard lock(a.archive->catalog_mutex());
  auto segments = a.archive->catalog().GetSegments(mirrored);
  REQUIRE(segments.ok());
  for (const SegmentRecord& s : *segments) {
    auto extent = a.archive->catalog().GetExtent(s.extent_id);
    REQUIRE(extent.ok());
    REQUIRE(extent->chunks.size() == 2);
    uint32_t p0 = extent->chunks[0].disk - kPoolDisks, p1 = extent->chunks[1].disk - kPoolDisks;
    CHECK(a.geometry.column(p0) != a.geometry.column(p1));
    CHECK(*a.geometry.hpg(p0) != *a.geometry.hpg(p1));
  }
}

TEST_CASE("Lonestar archive: a file whose raid does not fit the group its directory moved to stays where it is, "
          "alone", "[array]") {
  LoneStarArchive a;
  auto dir = a.fs->MakeNode(kRootInode, "d", S_IFDIR | 0755, 0, Caller{});
  REQUIRE(dir.ok());
  const auto data = test::RandomBytes(2 * kSegment, 6);
  uint64_t good = a.WriteFile("good", data, dir->ino);
  uint64_t bad = a.WriteFile("bad", data, dir->ino);
  REQUIRE(a.fs->SetXattr(bad, "user.cairn.raid", Bytes("rs-2-1"), 0, Caller{}).ok());  // fits the pool
  REQUIRE(a.fs->PersistAll().ok());
  uint64_t good_new = a.WriteFile("good-new", data, dir->ino);  // not persisted yet
  uint64_t bad_new = a.WriteFile("bad-new", data, dir->ino);
  REQUIRE(a.fs->SetXattr(bad_new, "user.cairn.raid", Bytes("rs-2-1"), 0, Caller{}).ok());
  // The directory goes to the group: the files with rs-2-1 of their own cannot follow.
  REQUIRE(a.fs->SetXattr(dir->ino, "user.cairn.placement", Bytes("group=cold"), 0, Caller{}).ok());

  Status persisted = a.fs->PersistAll();  // bad-new is left out, not the batch
  CHECK(persisted.message().find(fmt::format("inode {}", bad_new)) != std::string::npos);
  CHECK(a.Xattr(good_new, "user.cairn.state").starts_with("persisted"));
  CHECK(a.DisksOf(good_new).size() == 1);  // one bucket of the group

  REQUIRE(a.fs->ApplyPolicy("/d", [](const Reconciler::Progress&) { return true; }).ok());  // good moves, bad stays
  CHECK(a.DisksOf(good).size() == 1);
  CHECK(*a.DisksOf(good).begin() >= kPoolDisks);
  CHECK(a.ReadFile(good, data.size()) == data);
  CHECK(a.ReadFile(bad, data.size()) == data);
  // Else the unmount could not persist it; the kernel's reference goes too, or it would live
  // on, unlinked, with its policy.
  REQUIRE(a.fs->Unlink(dir->ino, "bad-new", Caller{}).ok());
  a.fs->Forget(bad_new, 1);
}

TEST_CASE("Lonestar archive: a scrub keeps one budget for extents and parity, and goes on with the parity check it "
          "stopped in",
          "[array]") {
  LoneStarArchive a;
  a.WriteFile("f", test::RandomBytes(3 * kSegment, 2), a.cold);
  REQUIRE(a.fs->PersistAll().ok());
  RepairOptions budgeted;
  budgeted.budget_ns = 200'000'000;
  budgeted.batch_bytes = 1;  // a batch per extent
  bool slept = false;
  budgeted.progress = [&](const RepairReport& r) {
    if (!slept && r.extents_total > 0 && r.extents_done == r.extents_total) {
      slept = true;  // the last extent's batch takes longer than the whole budget
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    return true;
  };
  auto first = RepairArchive(*a.archive, budgeted);
  REQUIRE(first.ok());
  CHECK(first->extents_total >= 3);
  CHECK(first->extents_done == first->extents_total);
  CHECK_FALSE(first->finished);  // no time was left for the parity check: it waits for the next scrub
  CHECK(first->parity_bad == 0);

  auto second = RepairArchive(*a.archive, RepairOptions{});
  REQUIRE(second.ok());
  CHECK(second->extents_total == 0);  // the extents were verified: the parity check goes on
  CHECK(second->bytes_read > 0);
  CHECK(second->finished);

  auto third = RepairArchive(*a.archive, RepairOptions{});  // a new pass, from the extents
  REQUIRE(third.ok());
  CHECK(third->extents_total == first->extents_total);
  CHECK(third->finished);
}

TEST_CASE("Lonestar archive: a named policy is refused where its raid= would not fit the file's group", "[array]") {
  LoneStarArchive a;
  std::ofstream(a.archive->rules_path()) << "policy wide selectable\n  set raid=rs-2-1\n"
                                            "policy copies selectable\n  set raid=mirror-2\ndefault\n";
  REQUIRE(a.archive->LoadRules().ok());
  Status wide = a.fs->SetXattr(a.cold, "user.cairn.policy", Bytes("wide"), 0, Caller{});
  CHECK(wide.sys_errno() == EINVAL);
  CHECK(wide.message().find("policy 'wide': raid=rs-2-1 stripes extents across disks; lonestar group cold") !=
        std::string::npos);
  CHECK(a.fs->SetXattr(a.cold, "user.cairn.policy", Bytes("copies"), 0, Caller{}).ok());
  uint64_t pool_file = a.WriteFile("p", test::RandomBytes(100, 6));  // in the pool of 3 disks: it fits
  CHECK(a.fs->SetXattr(pool_file, "user.cairn.policy", Bytes("wide"), 0, Caller{}).ok());
}

TEST_CASE("Lonestar archive: a parity check that fails lets the next scrub verify the extents again", "[array]") {
  LoneStarArchive a;
  uint64_t ino = a.WriteFile("f", test::RandomBytes(3 * kSegment, 3), a.cold);
  REQUIRE(a.fs->PersistAll().ok());
  uint64_t offset;  // where the file's first extent is on its bucket: the parity there is not zero
  {
    std::lock_guard lock(a.archive->catalog_mutex());
    auto segments = a.archive->catalog().GetSegments(ino);
    REQUIRE(segments.ok());
    auto extent = a.archive->catalog().GetExtent(segments->front().extent_id);
    REQUIRE(extent.ok());
    offset = extent->chunks[0].offset;
  }
  // A scrub out of time after the extents: the parity check waits, begun, for the next one.
  RepairOptions budgeted;
  budgeted.budget_ns = 200'000'000;
  budgeted.progress = [](const RepairReport& r) {
    if (r.extents_total > 0 && r.extents_done == r.extents_total) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    return true;
  };
  auto first = RepairArchive(*a.archive, budgeted);
  REQUIRE(first.ok());
  REQUIRE_FALSE(first->finished);

  // A vP range that does not add up, whose repair cannot be written.
  uint32_t vp = 0;
  while (a.geometry.role(vp) != DiskRole::kVerticalParity) vp++;
  std::filesystem::path image = a.archive->options().disks.at(kPoolDisks + vp);
  if (image.is_relative()) image = std::filesystem::path(a.dir) / image;
  test::FaultPlan plan;
  a.Close();
  {
    std::fstream disk(image, std::ios::in | std::ios::out | std::ios::binary);
    disk.seekg(static_cast<std::streamoff>(offset + 100));
    char byte = 0;
    disk.read(&byte, 1);
    byte ^= 0x5a;
    disk.seekp(static_cast<std::streamoff>(offset + 100));
    disk.write(&byte, 1);
    REQUIRE(disk.good());
  }
  a.Open(&plan);
  plan.fail_at = plan.operations + 1;  // every write and sync from here on
  auto failed = RepairArchive(*a.archive, RepairOptions{});
  CHECK_FALSE(failed.ok());
  CHECK(plan.injected > 0);

  plan.fail_at = 0;  // the disk works again: the next scrub is a whole pass, extents first
  auto third = RepairArchive(*a.archive, RepairOptions{});
  REQUIRE(third.ok());
  CHECK(third->extents_total == first->extents_total);
  CHECK(third->parity_repaired >= 1);
  CHECK(third->finished);
}
