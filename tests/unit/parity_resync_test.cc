// ParityResync on an archive with a lonestar group: the parity a lost journal left undefined
// is re-derived in the background, and a step that fails is tried again.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "archive_fixture.h"
#include "daemon/parity_resync.h"
#include "fault_disk.h"
#include "test_util.h"

using namespace cairn;
using namespace std::chrono_literals;

namespace {

std::span<const uint8_t> Bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

// Waits up to 20 s for the group's defects to be gone; what is left then.
uint64_t WaitForNoDefects(const LoneStarArray& array) {
  for (int i = 0; i < 2000 && array.defective_bytes() > 0; i++) std::this_thread::sleep_for(10ms);
  return array.defective_bytes();
}

}  // namespace

TEST_CASE("ParityResync: re-derives undefined parity while mounted, and tries again after a failed step", "[array]") {
  test::ArchiveFixture a([](MkfsOptions& mkfs) {
    mkfs.disk_size = 8 << 20;
    mkfs.groups.push_back({*ParseGroupSpec("cold:lonestar:4x4:2+1"), {}});
  });
  auto cold = a.fs->MakeNode(kRootInode, "cold", S_IFDIR | 0755, 0, Caller{});
  REQUIRE(cold.ok());
  REQUIRE(a.fs->SetXattr(cold->ino, "user.cairn.placement", Bytes("group=cold"), 0, Caller{}).ok());
  auto data = test::RandomBytes(3 * test::kSegment + 5000, 4);
  uint64_t ino = a.WriteFile("f", data, cold->ino);
  REQUIRE(a.fs->PersistAll().ok());
  a.Close();
  std::filesystem::remove(LoneStarJournalPath(a.dir, "cold"));  // all parity of the group is undefined now
  bool fail_once = GENERATE(false, true);
  test::FaultPlan faults;
  a.Open(&faults);
  const LoneStarArray& array = *a.archive->arrays().front();
  REQUIRE(array.defective_bytes() > 0);
  if (fail_once) {  // the first write or sync from here on fails
    faults.transient = true;
    faults.fail_at = faults.operations + 1;
  }
  {
    ParityResync resync(*a.archive, {.recheck = 20ms, .after_error = 200ms});
    CHECK(WaitForNoDefects(array) == 0);
  }
  CHECK(faults.injected == (fail_once ? 1 : 0));
  auto report = a.archive->arrays().front()->CheckParity({0, 8 << 20}, false);
  REQUIRE(report.ok());
  CHECK(report->mismatches.empty());
  CHECK(a.ReadFile(ino, data.size()) == data);
}
