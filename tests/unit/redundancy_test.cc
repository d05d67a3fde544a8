#include <catch2/catch.hpp>

#include <set>

#include "archive/archive.h"
#include "archive/config.h"
#include "archive_fixture.h"
#include "fault_disk.h"
#include "maintenance/repair.h"
#include "redundancy/intra_disk.h"
#include "redundancy/striping.h"
#include "test_util.h"
#include "util/coding.h"

using namespace cairn;

namespace {

// An archive of `disks` file-backed disks at dir/a.
void MakeArchive(const test::TempDir& dir, uint32_t disks, uint64_t disk_size) {
  MkfsOptions mkfs;
  mkfs.disk_count = disks;
  mkfs.disk_size = disk_size;
  REQUIRE(CreateArchive(dir / "a", mkfs).ok());
}

Redundancy Parse(const char* raid, const char* idr = "none") {
  auto r = ParseRedundancy(raid, idr);
  REQUIRE(r.ok());
  return *r;
}

using test::PlainEncoding;

}  // namespace

TEST_CASE("Striping: every loss the redundancy covers gives the payload back", "[striping]") {
  for (const char* raid : {"none", "mirror-3", "rs-4-2", "rs-3-1", "rs-1-2"}) {
    Redundancy r = Parse(raid);
    for (size_t size : {1, 63, 4096 * 5 + 7, 1 << 20}) {
      INFO(raid << " payload " << size);
      auto payload = test::RandomBytes(size, static_cast<uint32_t>(size));
      auto chunks = MakeChunks(payload, r);
      REQUIRE(chunks.size() == r.chunk_count());
      for (const auto& c : chunks) CHECK(c.size() == r.ChunkLength(size));
      size_t tolerated = r.chunk_count() - ChunksNeeded(r);
      // Every pattern of up to `tolerated` lost chunks, and one pattern too many.
      for (uint32_t mask = 0; mask < (1u << chunks.size()); mask++) {
        size_t lost = static_cast<size_t>(__builtin_popcount(mask));
        if (lost > tolerated + 1) continue;
        std::vector<std::optional<std::vector<uint8_t>>> have(chunks.size());
        for (size_t i = 0; i < chunks.size(); i++) {
          if (!(mask & (1u << i))) have[i] = chunks[i];
        }
        auto rebuilt = have;
        auto back = JoinChunks(have, r, size);
        std::vector<size_t> wanted;
        for (size_t i = 0; i < chunks.size(); i++) {
          if (mask & (1u << i)) wanted.push_back(i);
        }
        Status st = RebuildChunks(rebuilt, r, size, wanted);
        if (lost <= tolerated) {
          REQUIRE(back.ok());
          CHECK(*back == payload);
          REQUIRE(st.ok());
          for (size_t i = 0; i < chunks.size(); i++) CHECK(*rebuilt[i] == chunks[i]);  // exactly as written
        } else {
          CHECK(back.status().IsCorruption());
          CHECK(st.IsCorruption());
        }
      }
    }
  }
}

TEST_CASE("Striping: a rebuild decodes only the chunks it must", "[striping]") {
  Redundancy r = Parse("rs-4-2");
  auto payload = test::RandomBytes(1 << 20, 3);
  auto chunks = MakeChunks(payload, r);
  ChunkSet have(chunks.begin(), chunks.end());
  have[0].reset();  // lost
  have[5].reset();  // not read: chunks 1 to 4 are enough
  const size_t wanted[] = {0};
  REQUIRE(RebuildChunks(have, r, payload.size(), wanted).ok());
  CHECK(*have[0] == chunks[0]);
  CHECK_FALSE(have[5].has_value());
  have[2].reset();  // now chunk 5 must be read, and 2 is decoded on the way
  have[5] = chunks[5];
  have[0].reset();
  REQUIRE(RebuildChunks(have, r, payload.size(), wanted).ok());
  CHECK(*have[0] == chunks[0]);
  CHECK(*have[2] == chunks[2]);
}

TEST_CASE("Striping: parsing raid and idr values", "[striping]") {
  CHECK(Parse("rs-10-4").chunk_count() == 14);
  CHECK(Parse("mirror-2").chunk_count() == 2);
  CHECK(Parse("none", "spc-16-1-s8").idr_scramble == 8);
  CHECK(Parse("none", "spc-16-1").idr_scramble == 1);
  CHECK_FALSE(ParseRedundancy("rs-0-2", "none").ok());
  CHECK_FALSE(ParseRedundancy("mirror-9", "none").ok());
  CHECK_FALSE(ParseRedundancy("raid5", "none").ok());
  CHECK_FALSE(ParseRedundancy("none", "spc-16-2").ok());
  CHECK(Parse("rs-4-2").ChunkLength(1000) == 256);  // a quarter, rounded up to 64
}

// A file-backed archive of six disks whose reads the test can fail block by block.
TEST_CASE("Archive: degraded reads rebuild from intra-disk parity first, then from other disks", "[striping]") {
  test::TempDir dir;
  MakeArchive(dir, 6, 64 << 20);
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> bad(6);
  Archive::OpenOptions open;
  open.repair_on_read = false;
  open.wrap_disk = [&](std::unique_ptr<Disk> disk, size_t i) -> std::unique_ptr<Disk> {
    return std::make_unique<test::BadBlocksDisk>(std::move(disk), bad[i]);
  };
  auto archive = Archive::Open(dir / "a", open);
  REQUIRE(archive.ok());
  auto payload = test::RandomBytes(3 << 20, 5);
  Redundancy r = Parse("rs-4-2", "spc-16-1-s4");
  auto extent = (*archive)->extents().WriteExtentToDisk(ExtentKind::kFileSegment, 9, 0, payload,
                                                       PlainEncoding("raid=rs-4-2", r, payload));
  REQUIRE(extent.ok());
  REQUIRE(extent->chunks.size() == 6);
  auto read = [&]() { return (*archive)->extents().ReadExtentPayload(*extent); };
  REQUIRE(*read() == payload);

  SECTION("a burst of unreadable blocks inside one chunk: intra-disk parity fixes it on that disk alone") {
    const ChunkPlacement& c = extent->chunks[0];
    bad[c.disk].push_back({c.offset + kExtentHeaderSize + 5 * kIdrBlockSize, 4 * kIdrBlockSize});
    auto again = (*archive)->extents().ReadChunk(*extent, 0);
    REQUIRE(again.ok());  // the chunk itself decodes: IDR, not the other disks
    CHECK(*read() == payload);
  }
  SECTION("two whole disks unreadable: Reed-Solomon rebuilds, the result is checked") {
    bad[extent->chunks[1].disk].push_back({0, 64 << 20});
    bad[extent->chunks[3].disk].push_back({0, 64 << 20});
    CHECK(*read() == payload);
  }
  SECTION("three disks unreadable: a clear error, never wrong bytes") {
    for (size_t i : {0, 2, 4}) bad[extent->chunks[i].disk].push_back({0, 64 << 20});
    auto r3 = read();
    REQUIRE_FALSE(r3.ok());
    CHECK(r3.status().message().find("too few readable chunks (3 of 4 needed)") != std::string::npos);
  }
  SECTION("silent corruption in a data chunk is located and repaired by its checksum") {
    const ChunkPlacement& c = extent->chunks[2];
    uint8_t junk[16] = {1, 2, 3};
    REQUIRE((*archive)->disk(c.disk).WriteAt(c.offset + kExtentHeaderSize + 70000, junk).ok());
    CHECK((*archive)->extents().ReadChunk(*extent, 2).ok());
    CHECK(*read() == payload);
  }
  std::lock_guard lock((*archive)->catalog_mutex());
  (*archive)->extents().ReleaseUncommitted(*extent);
}

TEST_CASE("Archive: chunks of an extent go to distinct failure domains", "[striping]") {
  test::TempDir dir;
  MakeArchive(dir, 6, 16 << 20);
  auto options = LoadConfig(dir / "a/cairn.conf");
  REQUIRE(options.ok());
  for (uint32_t i = 0; i < 6; i++) options->disk_domains[i] = i < 2 ? "shelf-a" : i < 4 ? "shelf-b" : "shelf-c";
  REQUIRE(SaveConfig(dir / "a", *options).ok());
  auto archive = Archive::Open(dir / "a", {});
  REQUIRE(archive.ok());
  CHECK((*archive)->CheckRaidInGroup("rs-2-1", "balanced").ok());
  Status too_wide = (*archive)->CheckRaidInGroup("rs-3-1", "balanced");
  CHECK(too_wide.message() == "raid=rs-3-1 puts 4 chunks in distinct failure domains; this archive's 6 disks are in 3 "
                              "domains");
  for (int round = 0; round < 5; round++) {
    auto payload = test::RandomBytes(100000, round);
    auto extent = (*archive)->extents().WriteExtentToDisk(ExtentKind::kFileSegment, 1, 0, payload,
                                                          PlainEncoding("", Parse("rs-2-1"), payload));
    REQUIRE(extent.ok());
    std::set<std::string> domains;
    for (const auto& c : extent->chunks) domains.insert((*archive)->DomainOf(c.disk));
    CHECK(domains.size() == 3);
    std::lock_guard lock((*archive)->catalog_mutex());
    (*archive)->extents().ReleaseUncommitted(*extent);
  }
}

// A disk goes missing; rebuild moves its chunks to another disk. The moved chunks keep their
// digests, and a replaced disk waiting for a rebuild gets no new data.
TEST_CASE("Repair: relocated chunks keep their digest; replaced disks get nothing new", "[striping]") {
  test::TempDir dir;
  MakeArchive(dir, 3, 16 << 20);
  auto payload = test::RandomBytes(300000, 77);
  ExtentRecord extent;
  {
    auto archive = Archive::Open(dir / "a", {});
    REQUIRE(archive.ok());
    auto written = (*archive)->extents().WriteExtentToDisk(
        ExtentKind::kFileSegment, 1, 0, payload,
        PlainEncoding("checksum=sha256", *ParseRedundancy("mirror-2", "none", "sha256"), payload));
    REQUIRE(written.ok());
    extent = *written;
    extent.refs = 1;
    {
      std::lock_guard lock((*archive)->catalog_mutex());
      REQUIRE(InTransaction((*archive)->catalog(), [&] { return (*archive)->catalog().InsertExtent(extent); }).ok());
    }
    REQUIRE((*archive)->CommitDurably().ok());
  }
  REQUIRE(MarkDiskFailed(dir / "a", extent.chunks[0].disk).ok());
  Archive::OpenOptions open;
  open.degraded = true;
  open.repair_on_read = false;
  {
    auto archive = Archive::Open(dir / "a", open);
    REQUIRE(archive.ok());
    RepairOptions options;
    options.rebuild = true;
    auto report = RepairArchive(**archive, options);
    REQUIRE(report.ok());
    CHECK(report->chunks_repaired == 1);
    std::lock_guard lock((*archive)->catalog_mutex());
    extent = *(*archive)->catalog().GetExtent(extent.id);
  }
  auto archive = Archive::Open(dir / "a", open);
  REQUIRE(archive.ok());
  for (size_t i = 0; i < 2; i++) {
    CHECK((*archive)->extents().ReadChunk(extent, i).ok());  // both copies, digests and all
  }
  CHECK(*(*archive)->extents().ReadExtentPayload(extent) == payload);
  archive->reset();

  auto options = LoadConfig(dir / "a/cairn.conf");
  options->failed_disks.clear();
  options->rebuild_disks = {1};
  REQUIRE(SaveConfig(dir / "a", *options).ok());
  archive = Archive::Open(dir / "a", {});
  REQUIRE(archive.ok());
  for (int round = 0; round < 4; round++) {
    auto more = (*archive)->extents().WriteExtentToDisk(ExtentKind::kFileSegment, 2, 0, payload,
                                                        PlainEncoding("", Parse("none"), payload));
    REQUIRE(more.ok());
    CHECK(more->chunks[0].disk != 1);
    CHECK(*(*archive)->extents().ReadExtentPayload(*more) == payload);
    std::lock_guard lock((*archive)->catalog_mutex());
    (*archive)->extents().ReleaseUncommitted(*more);
  }
}

// An archive of file-backed disks holding rs-4-2 extents of 1 MiB, then disk 0 replaced by an
// empty image waiting for a rebuild (cairn disk replace), and optionally another disk failed.
struct RebuildFixture {
  test::TempDir dir;
  std::vector<ExtentRecord> extents;
  std::vector<std::vector<uint8_t>> payloads;

  RebuildFixture(uint32_t disks, int count, std::optional<uint32_t> failed = std::nullopt) {
    MakeArchive(dir, disks, 64 << 20);
    ArchiveId id;
    {
      auto archive = Archive::Open(dir / "a", {});
      REQUIRE(archive.ok());
      id = (*archive)->id();
      for (int i = 0; i < count; i++) {
        payloads.push_back(test::RandomBytes(1 << 20, 100 + i));
        auto written = (*archive)->extents().WriteExtentToDisk(
            ExtentKind::kFileSegment, 1, uint64_t(i) << 20, payloads.back(),
            PlainEncoding("raid=rs-4-2", Parse("rs-4-2", "spc-16-1-s4"), payloads.back()));
        REQUIRE(written.ok());
        written->refs = 1;
        extents.push_back(*written);
        std::lock_guard lock((*archive)->catalog_mutex());
        REQUIRE(
            InTransaction((*archive)->catalog(), [&] { return (*archive)->catalog().InsertExtent(*written); }).ok());
      }
      REQUIRE((*archive)->CommitDurably().ok());
    }
    auto config = LoadConfig(dir / "a/cairn.conf");
    REQUIRE(config.ok());
    config->disks[0] = dir / "new-0.img";
    config->rebuild_disks = {0};
    if (failed) config->failed_disks = {*failed};
    REQUIRE(FormatDisk(config->disks[0], 0, id, 64 << 20).ok());
    REQUIRE(SaveConfig(dir / "a", *config).ok());
  }

  size_t ChunksOn(uint32_t disk) const {
    size_t n = 0;
    for (const auto& e : extents) {
      for (const auto& c : e.chunks) n += c.disk == disk;
    }
    return n;
  }

  Result<std::unique_ptr<Archive>> Open(std::function<std::unique_ptr<Disk>(std::unique_ptr<Disk>, size_t)> wrap) {
    Archive::OpenOptions open;
    open.degraded = true;
    open.repair_on_read = false;
    open.wrap_disk = std::move(wrap);
    return Archive::Open(dir / "a", open);
  }

  // Opens the archive with `wrap` around its disks and runs a repair that must succeed.
  RepairReport Repair(std::function<std::unique_ptr<Disk>(std::unique_ptr<Disk>, size_t)> wrap,
                      const RepairOptions& options) {
    auto archive = Open(std::move(wrap));
    REQUIRE(archive.ok());
    auto report = RepairArchive(**archive, options);
    REQUIRE(report.ok());
    return *report;
  }

  // After a complete rebuild: every chunk of every extent reads and checks, none is on
  // `gone`, and every payload is what was written.
  void CheckRebuilt(std::optional<uint32_t> gone = std::nullopt) {
    auto config = LoadConfig(dir / "a/cairn.conf");
    config->rebuild_disks.clear();
    REQUIRE(SaveConfig(dir / "a", *config).ok());
    Archive::OpenOptions open;
    open.degraded = gone.has_value();
    auto archive = Archive::Open(dir / "a", open);
    REQUIRE(archive.ok());
    for (size_t i = 0; i < extents.size(); i++) {
      ExtentRecord now;
      {
        std::lock_guard lock((*archive)->catalog_mutex());
        now = *(*archive)->catalog().GetExtent(extents[i].id);
      }
      for (size_t c = 0; c < now.chunks.size(); c++) {
        INFO("extent " << i << " chunk " << c);
        CHECK((*archive)->extents().ReadChunk(now, c).ok());
        if (gone) CHECK(now.chunks[c].disk != *gone);
      }
      CHECK(*(*archive)->extents().ReadExtentPayload(now) == payloads[i]);
    }
  }
};

// A replaced disk is rebuilt batch by batch: each survivor is read front to back, a failure
// midway keeps what was committed, and the next run continues from there.
TEST_CASE("Repair: a rebuild reads survivors in order and resumes after a failure", "[striping]") {
  RebuildFixture f(6, 24);
  const size_t on_disk0 = f.ChunksOn(0);
  REQUIRE(on_disk0 > 10);
  test::FaultPlan plan;
  std::mutex log_mutex;
  std::vector<std::vector<uint64_t>> reads(6);
  auto wrap = [&](std::unique_ptr<Disk> disk, size_t i) -> std::unique_ptr<Disk> {
    if (i == 0) return std::make_unique<test::FaultDisk>(std::move(disk), plan);
    return std::make_unique<test::ReadLogDisk>(std::move(disk), reads[i], log_mutex);
  };
  RepairOptions options;
  options.rebuild = true;
  options.threads = 1;
  options.batch_bytes = 3 << 20;  // three extents (4 chunks of 256 KiB each) per commit
  {
    plan.fail_at = 12;  // some chunk writes and syncs of disk 0 in, the disk fails
    auto archive = f.Open(wrap);
    REQUIRE(archive.ok());
    auto report = RepairArchive(**archive, options);
    REQUIRE_FALSE(report.ok());
    CHECK(report.status().message().find("injected") != std::string::npos);
  }
  plan.fail_at = 0;
  for (auto& r : reads) r.clear();
  RepairReport report = f.Repair(wrap, options);
  CHECK(report.extents_done == on_disk0);
  CHECK(report.extents_total == on_disk0);
  CHECK(report.extents_lost == 0);
  CHECK(report.chunks_bad == report.chunks_repaired);
  CHECK(report.chunks_repaired < on_disk0);  // the first run's committed batches were not redone
  for (size_t d = 1; d < 6; d++) {
    INFO("disk " << d);
    CHECK(std::is_sorted(reads[d].begin(), reads[d].end()));  // front to back
  }
  f.CheckRebuilt();
}

// An extent that could not be rebuilt (two survivors unreadable for now) is not skipped by
// the next run, even when the run that failed on it was cancelled later on.
TEST_CASE("Repair: an interrupted rebuild retries the extents it could not rebuild", "[striping]") {
  RebuildFixture f(6, 12);
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> bad(6);
  auto wrap = [&](std::unique_ptr<Disk> disk, size_t i) -> std::unique_ptr<Disk> {
    return std::make_unique<test::BadBlocksDisk>(std::move(disk), bad[i]);
  };
  RepairOptions options;
  options.rebuild = true;
  options.threads = 1;
  options.batch_bytes = 1;  // one extent per batch
  int batches = 0;
  options.progress = [&](const RepairReport&) { return ++batches < 6; };  // then cancelled
  {
    auto archive = f.Open(wrap);
    REQUIRE(archive.ok());
    // The extents are rebuilt in the order of their chunks on disk 0; make the second unreadable.
    std::vector<ExtentRecord> order = f.extents;
    auto on0 = [](const ExtentRecord& e) {
      return std::find_if(e.chunks.begin(), e.chunks.end(), [](auto& c) { return c.disk == 0; })->offset;
    };
    std::sort(order.begin(), order.end(), [&](auto& a, auto& b) { return on0(a) < on0(b); });
    for (size_t c : {1, 2}) bad[order[1].chunks[c].disk].push_back({order[1].chunks[c].offset, 1});
    auto report = RepairArchive(**archive, options);
    REQUIRE(report.ok());
    CHECK(report->extents_lost == 1);
    CHECK_FALSE(report->finished);
  }
  for (auto& b : bad) b.clear();  // the survivors read again
  options.progress = nullptr;
  RepairReport report = f.Repair(wrap, options);
  CHECK(report.extents_lost == 0);
  CHECK(report.finished);
  CHECK(report.chunks_repaired == f.ChunksOn(0) - 1);  // the first extent's batch was committed before
  f.CheckRebuilt();
}

// Two lost disks at once: disk 0 replaced (rebuilt in place) and disk 1 failed (its chunks
// move to disks without a chunk of their extent). A failure midway loses nothing.
TEST_CASE("Repair: a rebuild of a replaced and a failed disk survives a failure midway", "[striping]") {
  RebuildFixture f(8, 16, 1);
  test::FaultPlan plan;
  auto wrap = [&](std::unique_ptr<Disk> disk, size_t i) -> std::unique_ptr<Disk> {
    if (i == 0) return std::make_unique<test::FaultDisk>(std::move(disk), plan);
    return disk;
  };
  RepairOptions options;
  options.rebuild = true;
  options.batch_bytes = 2 << 20;
  {
    plan.fail_at = 9;
    auto archive = f.Open(wrap);
    REQUIRE(archive.ok());
    CHECK_FALSE(RepairArchive(**archive, options).ok());
  }
  plan.fail_at = 0;
  RepairReport report = f.Repair(wrap, options);
  CHECK(report.extents_lost == 0);
  CHECK(report.finished);
  f.CheckRebuilt(1);
}
