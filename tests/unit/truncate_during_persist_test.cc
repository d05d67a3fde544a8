// A truncate while the persister has a file's segments in flight (read out of the staging
// cache, held at a slow disk, not committed): the file must stay dirty until that commit,
// and the commit must not bring back bytes the truncate cut off. An unlink meanwhile: what
// was written for the file must not come back either.
#include <catch2/catch.hpp>

#include <fcntl.h>

#include <chrono>
#include <functional>
#include <future>
#include <vector>

#include "archive_fixture.h"
#include "fault_disk.h"
#include "maintenance/recover.h"
#include "sql_faults.h"
#include "test_util.h"

using namespace cairn;

namespace {

using test::DiskGate;
using test::kSegment;
using namespace std::chrono_literals;

constexpr auto kPatience = 20s;  // what takes milliseconds, unless it waits for the gate

// Disk writes can be held at `gate`, and fail from `faults.fail_at` on (the power is off).
struct GatedArchive : test::ArchiveFixture {
  DiskGate gate;
  test::FaultPlan faults;
  GatedArchive() {
    Close();
    wrap_disk = [this](std::unique_ptr<Disk> disk, size_t) -> std::unique_ptr<Disk> {
      return std::make_unique<test::GateDisk>(std::make_unique<test::FaultDisk>(std::move(disk), faults), gate);
    };
    Open();
  }
  ~GatedArchive() { gate.Open(); }

  // Starts PersistAll on another thread and returns once it is held at its first disk write.
  std::future<Status> PersistHeld() {
    gate.Close(DiskGate::kWrite);
    auto persist = std::async(std::launch::async, [this] { return fs->PersistAll(); });
    REQUIRE(gate.WaitUntilHolding(kPatience));
    return persist;
  }
  // Runs `call` while the persist is held: it must not wait for the disk.
  Status Bounded(const std::function<Status()>& call) {
    auto done = std::async(std::launch::async, call);
    if (done.wait_for(kPatience) != std::future_status::ready) {
      gate.Open();
      done.wait();
      FAIL("the call waited for the held persist");
    }
    return done.get();
  }
  Status Resize(uint64_t ino, uint64_t size) {
    SetAttrRequest request;
    request.size = size;
    return fs->SetAttr(ino, request, Caller{}).status();
  }
  Status WriteAt(uint64_t ino, uint64_t offset, const std::vector<uint8_t>& data) {
    auto fh = fs->Open(ino, O_RDWR, Caller{});
    if (!fh.ok()) return fh.status();
    auto written = fs->Write(*fh, offset, data);
    Status synced = written.ok() ? fs->Fsync(*fh) : written.status();
    fs->Release(*fh);
    return synced;
  }
};

}  // namespace

TEST_CASE("Truncate during a persist: fsync'd data of the segment in flight survives a crash before its commit") {
  // Cut to exactly one segment, or grown within its last one: no segment becomes dirty,
  // but segment 0 is still on its way to the disks.
  const uint64_t old_size = kSegment + 5000;
  uint64_t new_size = GENERATE(values<uint64_t>({kSegment, 2 * kSegment - 100}));
  GatedArchive f;
  auto data = test::RandomBytes(old_size, 41);
  uint64_t ino = f.WriteFile("f", data);
  REQUIRE(f.fs->PersistAll().ok());
  auto rewrite = test::RandomBytes(kSegment, 42);
  REQUIRE(f.WriteAt(ino, 0, rewrite).ok());  // fsync'd: segment 0 dirty, durably
  std::copy(rewrite.begin(), rewrite.end(), data.begin());
  data.resize(new_size, 0);

  auto persist = f.PersistHeld();
  REQUIRE(f.Bounded([&] { return f.Resize(ino, new_size); }).ok());
  f.faults.fail_at = f.faults.operations + 1;  // the persist fails before its commit; then kill -9
  f.gate.Open();
  CHECK_FALSE(persist.get().ok());
  f.Crash();
  f.faults.fail_at = 0;
  f.Open();

  REQUIRE(f.fs->EvictAll().ok());  // persists what recovery found dirty, then drops the cache copies
  CHECK(f.ReadFile(ino, new_size) == data);
}

TEST_CASE("Truncate during a persist: the segment in flight is not committed where the file grows again") {
  GatedArchive f;
  auto data = test::RandomBytes(3 * kSegment, 43);
  uint64_t ino = f.WriteFile("f", data);
  REQUIRE(f.fs->PersistAll().ok());
  REQUIRE(f.WriteAt(ino, 2 * kSegment, test::RandomBytes(kSegment, 44)).ok());

  auto persist = f.PersistHeld();  // segment 2's new bytes in flight
  REQUIRE(f.Bounded([&] { return f.Resize(ino, 0); }).ok());
  // Segments 0, 1 and 3 written again; the write past the end leaves segment 2 a hole.
  auto head = test::RandomBytes(2 * kSegment, 45);
  auto tail = test::RandomBytes(1000, 46);
  REQUIRE(f.Bounded([&] { return f.WriteAt(ino, 0, head); }).ok());
  REQUIRE(f.Bounded([&] { return f.WriteAt(ino, 3 * kSegment + 100, tail); }).ok());
  std::vector<uint8_t> expected = head;
  expected.resize(3 * kSegment + 100, 0);
  expected.insert(expected.end(), tail.begin(), tail.end());
  f.gate.Open();
  REQUIRE(persist.get().ok());  // goes on to persist the writes too

  REQUIRE(f.fs->EvictAll().ok());
  auto segments = f.Segments(ino);
  REQUIRE(segments.size() == 4);
  CHECK(segments[2].extent_id == kHoleExtent);
  CHECK_FALSE(segments[2].cached);  // evicted: what reads as zeros below comes from the catalog
  CHECK(f.ReadFile(ino, expected.size()) == expected);
}

TEST_CASE("Truncate during a persist: a truncate that fails leaves the segment in flight dirty") {
  GatedArchive f;
  test::SqlFaults faults;
  faults.Watch(f.archive->catalog().handle());
  auto data = test::RandomBytes(3 * kSegment, 47);
  uint64_t ino = f.WriteFile("f", data);
  REQUIRE(f.fs->PersistAll().ok());
  auto rewrite = test::RandomBytes(kSegment, 48);
  REQUIRE(f.WriteAt(ino, 2 * kSegment, rewrite).ok());  // fsync'd: only in the staging cache
  std::copy(rewrite.begin(), rewrite.end(), data.begin() + 2 * kSegment);

  auto persist = f.PersistHeld();  // segment 2's new bytes in flight
  faults.Arm("FROM segments WHERE ino = ? ORDER BY idx");  // the truncate fails, its change rolled back
  CHECK_FALSE(f.Bounded([&] { return f.Resize(ino, kSegment + 10); }).ok());
  faults.Disarm();
  f.gate.Open();
  Status persisted = persist.get();
  INFO(persisted.message());
  REQUIRE(persisted.ok());

  REQUIRE(f.fs->EvictAll().ok());  // the rewrite is on the disks, or the cache copy stays
  CHECK(f.ReadFile(ino, data.size()) == data);
}

TEST_CASE("Unlink during a persist: what was written for the file is discarded, and recover does not bring it back") {
  GatedArchive f;
  uint64_t ino = f.WriteFile("gone", test::RandomBytes(kSegment + 100, 71));
  auto persist = f.PersistHeld();
  REQUIRE(f.Bounded([&] { return f.fs->Unlink(kRootInode, "gone", Caller{}); }).ok());
  f.fs->Forget(ino, 1);  // the create's lookup: the file is gone now, not an orphan
  f.gate.Open();
  REQUIRE(persist.get().ok());
  f.Close();
  auto recovered = RecoverCatalog(f.dir, RecoverOptions{.force = true});
  REQUIRE(recovered.ok());
  CHECK(recovered->files == 0);
  f.Open();
  CHECK(f.fs->LookupPath("/gone").status().IsNotFound());
}
