// Crash loops (power_loss.h): a step (persist, re-encode to a new policy, rebuild of a replaced
// and a failed disk) runs with the power cut at its N-th device operation, every write, sync,
// discard, truncate and delete of the disks and of the SQLite catalog counted, for N = 1, 2, ...
// until a run finishes before its cut. Each cut is replayed four ways: the disks' and the
// catalog's unsynced changes each lost (the files as at their last sync) or kept (the disk
// write in flight torn at a sector boundary). Then the archive is reopened: every byte that
// was fsync'd reads back, the interrupted step can finish, and fsck is clean.
#include <catch2/catch.hpp>

#include <fcntl.h>

#include <algorithm>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "archive/archive.h"
#include "archive/config.h"
#include "fs/filesystem.h"
#include "maintenance/extent_scan.h"
#include "maintenance/fsck.h"
#include "maintenance/repair.h"
#include "power_loss.h"
#include "fs_read.h"
#include "test_util.h"

using namespace cairn;
using test::Device;
using test::PowerSupply;
using test::Survivors;
using test::Unsynced;

namespace {

constexpr uint64_t kSegment = 64 << 10;
constexpr size_t kMaxFileSize = 2 << 20;  // of the files the loops write
constexpr int kMaxCrashPoints = 400;  // a step that needs more has changed: look at the loop's cost
constexpr Survivors kEveryFate[] = {{Unsynced::kLost, Unsynced::kLost},
                                    {Unsynced::kKept, Unsynced::kLost},
                                    {Unsynced::kLost, Unsynced::kKept},
                                    {Unsynced::kKept, Unsynced::kKept}};

const char* Name(Unsynced u) { return u == Unsynced::kLost ? "lost" : "kept"; }

using Files = std::map<std::string, std::vector<uint8_t>>;

// "" when `got` is `want`, else how they differ.
std::string Difference(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  if (got == want) return "";
  auto [at, unused] = std::mismatch(got.begin(), got.end(), want.begin(), want.end());
  auto zeros = std::find_if(at, got.end(), [](uint8_t b) { return b != 0; }) - at;
  return fmt::format("{} bytes read, {} expected; they differ from byte {} on ({} zeros there)", got.size(),
                     want.size(), at - got.begin(), zeros);
}

// Where the crash loops' archives go: in memory when the machine has /dev/shm, since the
// supply, not the file system, decides what survives, and the staging cache's real fsyncs
// would only cost time.
std::filesystem::path ScratchDir() {
  std::error_code error;
  return std::filesystem::is_directory("/dev/shm", error) ? "/dev/shm" : std::filesystem::temp_directory_path();
}

// One archive in a temporary directory whose disks and catalog run on `supply`.
struct CrashArchive {
  PowerSupply& supply;
  test::TempDir tmp{ScratchDir()};
  std::string dir = tmp / "arch";
  bool degraded = false;
  std::unique_ptr<Archive> archive;
  std::unique_ptr<Filesystem> fs;

  CrashArchive(PowerSupply& s, uint32_t disks) : supply(s) {
    MkfsOptions mkfs;
    mkfs.disk_count = disks;
    mkfs.disk_size = 4 << 20;
    mkfs.options.segment_size = kSegment;
    mkfs.options.pack_threshold = 8 << 10;
    REQUIRE(CreateArchive(dir, mkfs).ok());
  }

  Status OpenArchive() {
    Archive::OpenOptions open;
    open.degraded = degraded;
    open.wrap_disk = [this](std::unique_ptr<Disk> disk, size_t) -> std::unique_ptr<Disk> {
      return std::make_unique<test::PowerLossDisk>(std::move(disk), supply);
    };
    auto opened = Archive::Open(dir, open);
    if (!opened.ok()) return opened.status();
    archive = std::move(*opened);
    return Status::OK();
  }
  // Opens the archive, checking first that no extent id on the disks, those of extents a
  // crash left uncommitted included, is handed out again (an encrypted extent is bound to
  // its id, so two extents with one id could be swapped).
  void Open() {
    REQUIRE(OpenArchive().ok());
    ExtentScan scan = ScanDisks(*archive);
    REQUIRE(archive->extents().MaxExtentIdUsed() >= scan.max_extent_id);
    fs = std::make_unique<Filesystem>(*archive);
    REQUIRE(fs->Recover().ok());
  }
  // Unmounts if it can (with the power off it cannot), then drops everything in memory.
  void Unmount() {
    if (fs) (void)fs->Stop();
    fs.reset();
    archive.reset();
  }
  // Runs `step` and unmounts with the power cut at operation `cut_at`, leaves on the devices
  // what `survivors` says and opens the archive again. Whether the power was cut.
  bool PowerCutDuring(int cut_at, const Survivors& survivors, const std::function<void()>& step) {
    supply.Arm(cut_at);
    step();
    Unmount();
    bool cut = supply.cut();
    REQUIRE(supply.Restore(survivors).ok());
    Open();
    return cut;
  }

  void SetXattr(const std::string& name, const std::string& value) {
    REQUIRE(fs->SetXattr(kRootInode, name, {reinterpret_cast<const uint8_t*>(value.data()), value.size()}, 0, Caller{}).ok());
  }

  void Write(const std::string& name, uint64_t offset, const std::vector<uint8_t>& data) {
    auto found = fs->Lookup(kRootInode, name);
    InodeRecord attr;
    auto fh = found.ok() ? fs->Open(found->ino, O_RDWR, Caller{}) : fs->Create(kRootInode, name, 0644, O_RDWR, Caller{}, &attr);
    REQUIRE(fh.ok());
    REQUIRE(*fs->Write(*fh, offset, data) == data.size());
    REQUIRE(fs->Fsync(*fh).ok());
    fs->Release(*fh);
  }

  // Every file of the root directory reads back (from the disks) as `files` says, or as
  // `unacknowledged` says: changes not made durable that a power loss may undo or keep (a
  // file there and not in `files` may be gone).
  void CheckFiles(const Files& files, const Files& unacknowledged = {}) {
    REQUIRE(fs->EvictAll().ok());
    auto entries = fs->ReadDir(kRootInode, 0, 1000);
    REQUIRE(entries.ok());
    std::vector<std::string> names;
    for (const DirEntry& e : *entries) {
      if (e.name != "." && e.name != "..") names.push_back(e.name);
    }
    std::sort(names.begin(), names.end());
    std::vector<std::string> want;
    for (const auto& [name, data] : files) want.push_back(name);
    std::vector<std::string> required = names;
    std::erase_if(required, [&](const std::string& name) { return !files.contains(name) && unacknowledged.contains(name); });
    REQUIRE(required == want);
    for (const auto& name : names) {
      INFO(name);
      auto fh = fs->Open(fs->Lookup(kRootInode, name)->ino, O_RDONLY, Caller{});
      REQUIRE(fh.ok());
      auto read = test::ReadBytes(*fs, *fh, 0, kMaxFileSize);
      fs->Release(*fh);
      REQUIRE(read.ok());
      const std::vector<uint8_t>& back = *read;
      auto other = unacknowledged.find(name);
      if (other != unacknowledged.end() && back == other->second) continue;
      REQUIRE(Difference(back, files.contains(name) ? files.at(name) : other->second) == "");
    }
  }

  // fsck of the unmounted archive finds nothing but `expected` problems.
  void CheckFsck(const std::string& expected = "") {
    Unmount();
    REQUIRE(OpenArchive().ok());
    FsckReport report = CheckArchive(*archive);
    std::string problems;
    for (const auto& p : report.problems) {
      if (expected.empty() || p.find(expected) == std::string::npos) problems += p + "\n";
    }
    archive.reset();
    INFO(problems);
    REQUIRE(problems.empty());
  }
};

// Runs `scenario(supply, cut_at, survivors)` for every crash point and way unsynced changes
// survive, until a run finishes before its cut; `scenario` returns whether the power was cut.
template <typename Scenario>
void CrashLoop(const char* step, Scenario scenario) {
  PowerSupply supply;
  test::PowerLossVfs vfs(supply);
  for (int cut_at = 1;; cut_at++) {
    for (const Survivors& survivors : kEveryFate) {
      INFO("power cut at operation " << cut_at << "; unsynced disk writes " << Name(survivors.disks)
                                     << ", unsynced catalog writes " << Name(survivors.catalog));
      if (!scenario(supply, cut_at, survivors)) {
        // The step really went through the supply on both sides: a loop over nothing passes.
        REQUIRE(supply.operations(Device::kDisk) > 0);
        REQUIRE(supply.operations(Device::kCatalog) > 0);
        WARN(step << ": " << cut_at - 1 << " crash points");
        return;
      }
    }
    REQUIRE(cut_at < kMaxCrashPoints);
  }
}

}  // namespace

TEST_CASE("Power loss: persisting loses no fsync'd byte, at any crash point", "[power_loss]") {
  CrashLoop("persist", [](PowerSupply& supply, int cut_at, const Survivors& survivors) {
    CrashArchive a(supply, 3);
    a.Open();
    Files files = {{"big", test::RandomBytes(3 * kSegment + 999, 1)},
                   {"huge", test::RandomBytes(17 * kSegment + 5, 8)},
                   {"small", test::RandomBytes(3000, 2)},
                   {"doomed", test::RandomBytes(kSegment + 10, 3)},
                   {"steady", test::RandomBytes(kSegment, 12)}};
    for (const auto& [name, data] : files) a.Write(name, 0, data);
    REQUIRE(a.fs->PersistAll().ok());  // the first generation on the disks
    // The second, fsync'd to the staging cache: copy-on-write, packing, freeing, and space
    // freed by the first of the persist's commits reused by the second.
    auto patch = test::RandomBytes(kSegment, 4);
    a.Write("big", kSegment / 2, patch);
    std::copy(patch.begin(), patch.end(), files["big"].begin() + kSegment / 2);
    files["huge"] = test::RandomBytes(17 * kSegment + 5, 9);
    a.Write("huge", 0, files["huge"]);
    files["small"] = test::RandomBytes(3000, 5);
    a.Write("small", 0, files["small"]);
    files["fresh"] = test::RandomBytes(kSegment + 5000, 6);
    a.Write("fresh", 0, files["fresh"]);
    files["tiny"] = test::RandomBytes(100, 7);
    a.Write("tiny", 0, files["tiny"]);
    REQUIRE(a.fs->Unlink(kRootInode, "doomed", Caller{}).ok());
    files.erase("doomed");
    files["scratch"] = test::RandomBytes(5000, 10);  // fsync'd, never persisted
    a.Write("scratch", 0, files["scratch"]);
    files["shrunk"] = test::RandomBytes(kSegment + 3000, 11);
    a.Write("shrunk", 0, files["shrunk"]);
    REQUIRE(a.fs->SyncMetadata().ok());

    // Not made durable: a power loss may undo them, but never the bytes fsync'd before.
    Files unacknowledged = {{"scratch", files["scratch"]}, {"shrunk", files["shrunk"]}, {"steady", files["steady"]}};
    files.erase("scratch");
    files["shrunk"].resize(100);
    const std::vector<uint8_t> change(10, 0xEE);
    std::copy(change.begin(), change.end(), files["steady"].begin() + 7);
    bool cut = a.PowerCutDuring(cut_at, survivors, [&] {
      SetAttrRequest shrink;
      shrink.size = 100;
      auto steady = a.fs->Open(a.fs->Lookup(kRootInode, "steady")->ino, O_RDWR, Caller{});
      REQUIRE(steady.ok());
      uint64_t scratch = a.fs->Lookup(kRootInode, "scratch")->ino;
      if (a.fs->Unlink(kRootInode, "scratch", Caller{}).ok()) a.fs->Forget(scratch, 1000);  // the kernel forgets it: deleted
      if (a.fs->Write(*steady, 7, change).ok()) {
        (void)a.fs->SetAttr(a.fs->Lookup(kRootInode, "shrunk")->ino, shrink, Caller{});
      }
      a.fs->Release(*steady);
      (void)a.fs->PersistAll();
    });
    a.CheckFiles(files, unacknowledged);
    a.CheckFsck();
    return cut;
  });
}

TEST_CASE("Power loss: re-encoding to a new policy loses no byte, at any crash point", "[power_loss]") {
  CrashLoop("re-encode", [](PowerSupply& supply, int cut_at, const Survivors& survivors) {
    CrashArchive a(supply, 3);
    a.Open();
    Files files = {{"big", test::RandomBytes(2 * kSegment + 999, 11)},
                   {"small", test::RandomBytes(3000, 12)},
                   {"tiny", test::RandomBytes(200, 13)}};
    for (const auto& [name, data] : files) a.Write(name, 0, data);
    REQUIRE(a.fs->PersistAll().ok());
    a.SetXattr("user.cairn.raid", "mirror-2");
    REQUIRE(a.fs->SyncMetadata().ok());

    auto go_on = [](const Reconciler::Progress&) { return true; };
    bool cut = a.PowerCutDuring(cut_at, survivors, [&] { (void)a.fs->ApplyPolicy("/", go_on); });
    a.CheckFiles(files);
    REQUIRE(a.fs->ApplyPolicy("/", go_on).ok());  // the interrupted re-encode finishes
    for (const auto& [name, data] : files) {
      auto state = a.fs->GetXattr(a.fs->Lookup(kRootInode, name)->ino, "user.cairn.state");
      REQUIRE(state.ok());
      CHECK(std::string(state->begin(), state->end()) == "persisted");
    }
    a.CheckFiles(files);
    a.CheckFsck();
    return cut;
  });
}

TEST_CASE("Power loss: rebuilding a replaced and a failed disk loses no byte, at any crash point", "[power_loss]") {
  CrashLoop("rebuild", [](PowerSupply& supply, int cut_at, const Survivors& survivors) {
    CrashArchive a(supply, 7);
    a.Open();
    a.SetXattr("user.cairn.raid", "rs-4-2");
    Files files = {{"a", test::RandomBytes(2 * kSegment + 77, 21)}, {"b", test::RandomBytes(kSegment, 22)},
                   {"c", test::RandomBytes(5000, 23)}};
    for (const auto& [name, data] : files) a.Write(name, 0, data);
    REQUIRE(a.fs->EvictAll().ok());
    ArchiveId id = a.archive->id();
    a.Unmount();
    // cairn disk replace 0, cairn disk fail 1.
    auto config = LoadConfig(a.dir + "/cairn.conf");
    REQUIRE(config.ok());
    config->disks[0] = a.tmp / "new-0.img";
    config->rebuild_disks = {0};
    config->failed_disks = {1};
    REQUIRE(FormatDisk(config->disks[0], 0, id, 4 << 20).ok());
    REQUIRE(SaveConfig(a.dir, *config).ok());
    a.degraded = true;

    RepairOptions rebuild;
    rebuild.rebuild = true;
    rebuild.threads = 1;  // one order of operations
    rebuild.batch_bytes = 32 << 10;
    a.Open();
    bool cut = a.PowerCutDuring(cut_at, survivors, [&] {
      auto report = RepairArchive(*a.archive, rebuild);
      if (report.ok() && report->finished && report->extents_lost == 0) (void)a.archive->FinishRebuild();
    });
    a.CheckFiles(files);  // degraded reads
    auto report = RepairArchive(*a.archive, rebuild);
    REQUIRE(report.ok());
    CHECK(report->extents_lost == 0);
    REQUIRE(report->finished);
    REQUIRE(a.archive->FinishRebuild().ok());
    a.Unmount();
    a.Open();
    a.CheckFiles(files);
    a.CheckFsck("disk 1 is missing");  // failed for good; nothing is left on it
    return cut;
  });
}

TEST_CASE("PowerSupply: unsynced writes roll back or stay, the write cut by the power lands torn", "[power_loss]") {
  for (Unsynced fate : {Unsynced::kLost, Unsynced::kKept}) {
    INFO("unsynced disk writes " << Name(fate));
    test::TempDir tmp(ScratchDir());
    PowerSupply supply;
    std::vector<uint8_t> synced(3 * 4096, 0xAA), unsynced(4096, 0xBB), cut(3 * 4096, 0xCC);
    {
      auto image = CreateImageDisk(tmp / "disk", 1 << 20);
      REQUIRE(image.ok());
      test::PowerLossDisk disk(std::move(*image), supply);
      REQUIRE(disk.SectorSize() == 4096);
      supply.Arm(4);
      REQUIRE(disk.WriteAt(0, synced).ok());
      REQUIRE(disk.Sync().ok());
      REQUIRE(disk.WriteAt(4096, unsynced).ok());
      CHECK_FALSE(disk.WriteAt(0, cut).ok());  // operation 4: the power goes off
      CHECK_FALSE(disk.Sync().ok());
      CHECK(supply.cut());
    }
    REQUIRE(supply.Restore({fate, Unsynced::kLost}).ok());
    auto image = OpenImageDisk(tmp / "disk");
    REQUIRE(image.ok());
    std::vector<uint8_t> back(3 * 4096);
    REQUIRE((*image)->ReadAt(0, back).ok());
    std::vector<uint8_t> want = synced;
    if (fate == Unsynced::kKept) {
      std::fill(want.begin() + 4096, want.begin() + 2 * 4096, 0xBB);  // the unsynced write
      std::fill(want.begin(), want.begin() + 4096, 0xCC);              // one of the cut write's 3 sectors
    }
    CHECK(Difference(back, want) == "");
  }
}

namespace {

// A persisted file (clean, its cache copy kept) changed by a write that is not fsync'd,
// after a truncate that grows it when `grow_first`, with the power cut at each step: after
// the restart it reads the same from its cache copy and, once evicted, from the disks.
void ChangePersistedFile(const char* step, bool grow_first) {
  CrashLoop(step, [grow_first](PowerSupply& supply, int cut_at, const Survivors& survivors) {
    CrashArchive a(supply, 3);
    a.Open();
    const std::vector<uint8_t> data = test::RandomBytes(2 * kSegment, 21);
    a.Write("f", 0, data);
    REQUIRE(a.fs->PersistAll().ok());
    uint64_t ino = a.fs->Lookup(kRootInode, "f")->ino;
    const std::vector<uint8_t> change(10, 0xEE);
    bool cut = a.PowerCutDuring(cut_at, survivors, [&] {
      SetAttrRequest grow;
      grow.size = 3 * kSegment;
      if (grow_first && !a.fs->SetAttr(ino, grow, Caller{}).ok()) return;  // marks the file dirty
      auto fh = a.fs->Open(ino, O_RDWR, Caller{});
      REQUIRE(fh.ok());
      (void)a.fs->Write(*fh, kSegment + 7, change);  // kept or lost, but not both
      a.fs->Release(*fh);
    });
    auto read = [&] {
      auto fh = a.fs->Open(ino, O_RDONLY, Caller{});
      REQUIRE(fh.ok());
      auto bytes = test::ReadBytes(*a.fs, *fh, 0, kMaxFileSize);
      a.fs->Release(*fh);
      REQUIRE(bytes.ok());
      return *bytes;
    };
    std::vector<uint8_t> cached = read();
    REQUIRE(a.fs->EvictAll().ok());
    CHECK(read() == cached);
    a.Unmount();
    return cut;
  });
}

}  // namespace

TEST_CASE("Power loss: a change to a persisted file reads the same from its cache copy and from the disks",
          "[power_loss]") {
  ChangePersistedFile("overwrite", false);
}

TEST_CASE("Power loss: a persisted file grown by a truncate, then changed, reads the same from its cache copy and "
          "from the disks", "[power_loss]") {
  ChangePersistedFile("grow-overwrite", true);
}
