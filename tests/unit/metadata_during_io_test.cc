// No lock that metadata operations need is held while a disk is read, written, synced or
// discarded, or while the catalog's WAL is synced: with one of those held at a DiskGate
// (a disk that takes as long as the test wants, like one spinning up), stat, readdir,
// lookup, create, setxattr and statfs on the same archive still finish.
#include <catch2/catch.hpp>

#include <fcntl.h>

#include <chrono>
#include <future>
#include <thread>

#include <fmt/format.h>

#include "archive_fixture.h"
#include "fault_disk.h"
#include "maintenance/repair.h"
#include "power_loss.h"
#include "test_util.h"

using namespace cairn;

namespace {

using test::DiskGate;
using test::kSegment;
using namespace std::chrono_literals;

// Generous: these calls take milliseconds unless a lock held across the gate blocks them,
// and then they never finish while the gate is closed.
constexpr auto kPatience = 20s;

struct GatedArchive : test::ArchiveFixture {
  DiskGate gate;
  explicit GatedArchive(const std::function<void(MkfsOptions&)>& customize = {}) : ArchiveFixture(customize) {
    Close();
    wrap_disk = [this](std::unique_ptr<Disk> disk, size_t) -> std::unique_ptr<Disk> {
      return std::make_unique<test::GateDisk>(std::move(disk), gate);
    };
    Open();
  }
  ~GatedArchive() { gate.Open(); }  // nothing may stay held at the gate when the archive closes
};

// Runs metadata calls on `fs` while something is held at `gate`: each must finish within
// kPatience. `held` says whether that something is still held afterwards. When they do not
// finish, the gate opens so that the test fails instead of hanging.
void MetadataGoesOn(Filesystem& fs, DiskGate& gate, const std::function<bool()>& held, const std::string& name) {
  auto calls = std::async(std::launch::async, [&]() -> Status {
    auto root = fs.GetAttr(kRootInode);
    if (!root.ok()) return root.status();
    auto listed = fs.ReadDir(kRootInode, 0, 100);
    if (!listed.ok()) return listed.status();
    InodeRecord attr;
    auto fh = fs.Create(kRootInode, name, 0644, O_WRONLY, Caller{}, &attr);
    if (!fh.ok()) return fh.status();
    fs.Release(*fh);
    auto found = fs.Lookup(kRootInode, name);
    if (!found.ok()) return found.status();
    std::vector<uint8_t> value{'v'};
    CAIRN_RETURN_IF_ERROR(fs.SetXattr(attr.ino, "user.note", value, 0, Caller{}));
    auto stats = fs.StatFs();
    return stats.status();
  });
  if (calls.wait_for(kPatience) != std::future_status::ready) {
    gate.Open();
    calls.wait();
    FAIL("metadata calls waited for the disk (a lock they need is held across its I/O)");
  }
  Status st = calls.get();
  INFO(st.ToString());
  CHECK(st.ok());
  CHECK(held());  // the calls above did not just wait for the gate to open
}

}  // namespace

TEST_CASE("Metadata during I/O: a read held by a slow disk holds up no metadata call") {
  GatedArchive f;
  auto data = test::RandomBytes(3 * kSegment, 1);
  uint64_t ino = f.WriteFile("cold", data);
  REQUIRE(f.fs->PersistAll().ok());
  REQUIRE(f.fs->EvictAll().ok());
  f.gate.Close(DiskGate::kRead);
  auto reader = std::async(std::launch::async, [&] { return f.ReadFile(ino, data.size()); });
  REQUIRE(f.gate.WaitUntilHolding(kPatience));
  MetadataGoesOn(*f.fs, f.gate, [&] { return reader.wait_for(0s) == std::future_status::timeout; }, "during-read");
  f.gate.Open();
  CHECK(reader.get() == data);
}

TEST_CASE("Metadata during I/O: a read held by a slow disk holds up no other file's persist or eviction") {
  // The read holds its file's data lock while it waits for the disk: a lock shared with other
  // files (64 stripes, once) kept their writes, persists and evictions waiting too.
  GatedArchive f([](MkfsOptions& mkfs) { mkfs.options.cache_size = 1 << 20; });
  auto data = test::RandomBytes(3 * kSegment, 7);
  uint64_t cold = f.WriteFile("cold", data);
  REQUIRE(f.fs->PersistAll().ok());
  REQUIRE(f.fs->EvictAll().ok());
  f.gate.Close(DiskGate::kRead);
  auto reader = std::async(std::launch::async, [&] { return f.ReadFile(cold, data.size()); });
  REQUIRE(f.gate.WaitUntilHolding(kPatience));
  std::vector<uint64_t> warm;  // 4 MiB of new files, four times the cache's budget
  for (int i = 0; i < 64; i++) warm.push_back(f.WriteFile(fmt::format("warm-{}", i), test::RandomBytes(64 << 10, 100 + i)));
  // Persisted (written to the disks, which the gate lets through), then evicted over budget.
  auto persist = std::async(std::launch::async, [&] { return f.fs->PersistAll(); });
  if (persist.wait_for(kPatience) != std::future_status::ready) {
    f.gate.Open();
    persist.wait();
    FAIL("the persist of other files waited for the data lock of the file being read from the slow disk");
  }
  REQUIRE(persist.get().ok());
  CHECK(std::count_if(warm.begin(), warm.end(), [&](uint64_t ino) { return f.archive->cache().Usage(ino) == 0; }) > 0);
  CHECK(reader.wait_for(0s) == std::future_status::timeout);  // still at the gate meanwhile
  f.gate.Open();
  CHECK(reader.get() == data);
  for (int i = 0; i < 64; i++) CHECK(f.ReadFile(warm[i], 64 << 10) == test::RandomBytes(64 << 10, 100 + i));
}

TEST_CASE("Metadata during I/O: a persist held by a slow disk write or sync holds up no metadata call") {
  int kind = GENERATE(DiskGate::kWrite, DiskGate::kSync);
  GatedArchive f;
  auto data = test::RandomBytes(2 * kSegment, 2);
  uint64_t ino = f.WriteFile("new", data);
  f.gate.Close(kind);
  auto persist = std::async(std::launch::async, [&] { return f.fs->PersistAll(); });
  REQUIRE(f.gate.WaitUntilHolding(kPatience));
  MetadataGoesOn(*f.fs, f.gate, [&] { return persist.wait_for(0s) == std::future_status::timeout; }, "during-persist");
  f.gate.Open();
  REQUIRE(persist.get().ok());
  REQUIRE(f.fs->EvictAll().ok());
  CHECK(f.ReadFile(ino, data.size()) == data);
}

TEST_CASE("Metadata during I/O: freed space held by a slow discard holds up no metadata call") {
  GatedArchive f;
  uint64_t ino = f.WriteFile("doomed", test::RandomBytes(2 * kSegment, 3));
  REQUIRE(f.fs->PersistAll().ok());
  uint64_t free_before = f.FreeBytes();
  REQUIRE(f.fs->Unlink(kRootInode, "doomed", Caller{}).ok());
  f.fs->Forget(ino, 1);  // the kernel's reference: the inode and its extents go now
  f.WriteFile("next", test::RandomBytes(100, 3));
  f.gate.Close(DiskGate::kDiscard);
  // The persist's commit makes the deletion durable, then frees (and discards) its space.
  auto sync = std::async(std::launch::async, [&] { return f.fs->PersistAll(); });
  REQUIRE(f.gate.WaitUntilHolding(kPatience));
  MetadataGoesOn(*f.fs, f.gate, [&] { return sync.wait_for(0s) == std::future_status::timeout; }, "during-discard");
  f.gate.Open();
  REQUIRE(sync.get().ok());
  CHECK(f.FreeBytes() > free_before);
}

TEST_CASE("Metadata during I/O: a failed persist discarding what it wrote on a slow disk holds up no metadata call") {
  GatedArchive f;
  test::FaultPlan faults;
  f.Close();
  f.wrap_disk = [&](std::unique_ptr<Disk> disk, size_t) -> std::unique_ptr<Disk> {
    return std::make_unique<test::GateDisk>(std::make_unique<test::FaultDisk>(std::move(disk), faults), f.gate);
  };
  f.Open();
  // A persist like the one below counts its disk operations: writes, then the syncs.
  f.WriteFile("measure", test::RandomBytes(4 * kSegment, 7));
  const int before = faults.operations;
  REQUIRE(f.fs->PersistAll().ok());
  const int persist_operations = faults.operations - before;
  uint64_t ino = f.WriteFile("new", test::RandomBytes(4 * kSegment, 8));
  faults.transient = true;
  faults.fail_at = faults.operations + persist_operations;  // its last sync fails: every extent is given back
  f.gate.Close(DiskGate::kDiscard);
  // The persist gives back the room of what it wrote, discarding it.
  auto persist = std::async(std::launch::async, [&] { return f.fs->PersistAll(); });
  REQUIRE(f.gate.WaitUntilHolding(kPatience));
  MetadataGoesOn(*f.fs, f.gate, [&] { return persist.wait_for(0s) == std::future_status::timeout; }, "during-release");
  f.gate.Open();
  CHECK_FALSE(persist.get().ok());
  faults.fail_at = 0;
  REQUIRE(f.fs->PersistAll().ok());
  REQUIRE(f.fs->EvictAll().ok());
  CHECK(f.ReadFile(ino, 4 * kSegment) == test::RandomBytes(4 * kSegment, 8));
}

TEST_CASE("Metadata during I/O: a scrub rewriting a chunk on a slow disk holds up no metadata call") {
  GatedArchive f;
  auto data = test::RandomBytes(kSegment, 4);
  uint64_t ino = f.WriteFile("damaged", data);
  std::string raid = "mirror-2";  // a second copy to rewrite the damaged one from
  REQUIRE(f.fs->SetXattr(ino, "user.cairn.raid", std::span(reinterpret_cast<const uint8_t*>(raid.data()), raid.size()), 0, Caller{}).ok());
  REQUIRE(f.fs->PersistAll().ok());
  ExtentRecord extent = f.Extents().at(0);
  {  // flip a byte of its payload: the scrub finds the chunk bad and rewrites it
    const ChunkPlacement& chunk = extent.chunks.at(0);
    std::vector<uint8_t> byte(1);
    Disk& disk = f.archive->disk(chunk.disk);
    uint64_t at = chunk.locator().address + kBlockSize + 100;
    REQUIRE(disk.ReadAt(at, byte).ok());
    byte[0] ^= 0xFF;
    REQUIRE(disk.WriteAt(at, byte).ok());
  }
  f.gate.Close(DiskGate::kWrite);
  RepairOptions scrub;
  auto repair = std::async(std::launch::async, [&] { return RepairArchive(*f.archive, scrub); });
  REQUIRE(f.gate.WaitUntilHolding(kPatience));
  MetadataGoesOn(*f.fs, f.gate, [&] { return repair.wait_for(0s) == std::future_status::timeout; }, "during-scrub");
  f.gate.Open();
  auto report = repair.get();
  REQUIRE(report.ok());
  CHECK(report->chunks_repaired == 1);
  REQUIRE(f.fs->EvictAll().ok());
  CHECK(f.ReadFile(ino, data.size()) == data);
}

TEST_CASE("Metadata during I/O: an fsync held in the catalog's WAL sync holds up no metadata call") {
  test::PowerSupply supply;  // never armed: its VFS only shows the test the catalog's syncs
  test::PowerLossVfs vfs(supply);
  DiskGate wal_gate;
  supply.BeforeSync([&](test::Device device, const std::string& path) {
    if (device == test::Device::kCatalog && path.ends_with("-wal")) wal_gate.Pass(DiskGate::kSync);
  });
  {
    test::ArchiveFixture f;  // opened through the VFS
    uint64_t ino = f.WriteFile("synced", test::RandomBytes(1000, 5));
    auto fh = f.fs->Open(ino, O_RDWR, Caller{});
    REQUIRE(fh.ok());
    wal_gate.Close(DiskGate::kSync);
    auto fsync = std::async(std::launch::async, [&] { return f.fs->Fsync(*fh); });
    REQUIRE(wal_gate.WaitUntilHolding(kPatience));
    MetadataGoesOn(*f.fs, wal_gate, [&] { return fsync.wait_for(0s) == std::future_status::timeout; }, "during-fsync");
    wal_gate.Open();
    CHECK(fsync.get().ok());
    f.fs->Release(*fh);
  }
}
