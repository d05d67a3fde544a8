// The reconciler re-encoding files while other things happen to them, through Filesystem:
// its extent writes held at a gated disk while the change happens.
#include <catch2/catch.hpp>

#include <fcntl.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "archive_fixture.h"
#include "codec/plugin_loader.h"
#include "fault_disk.h"
#include "keys/keystore.h"

using namespace cairn;

namespace {

using test::DiskGate;
using test::kSegment;
using namespace std::chrono_literals;

constexpr auto kPatience = 20s;  // what takes milliseconds, unless it waits for the gate

std::span<const uint8_t> Bytes(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

// Disk writes can be held at `gate`; master key k1 is in the keystore.
struct GatedKeyArchive : test::ArchiveFixture {
  DiskGate gate;
  explicit GatedKeyArchive(const std::function<void(MkfsOptions&)>& customize = {}) : ArchiveFixture(customize) {
    Close();
    wrap_disk = [this](std::unique_ptr<Disk> disk, size_t) -> std::unique_ptr<Disk> {
      return std::make_unique<test::GateDisk>(std::move(disk), gate);
    };
    Open();
    REQUIRE(LoadPlugins(CAIRN_BUILD_PLUGIN_DIR).ok());  // aes-256-gcm
    Keystore store(dir + "/keystore");
    REQUIRE(store.AddVersion(*NewInlineMasterKey("k1")).ok());
    REQUIRE(store.Save().ok());
  }
  ~GatedKeyArchive() { gate.Open(); }

  void AddMasterKey(const std::string& name) {
    auto store = Keystore::Load(dir + "/keystore");
    REQUIRE(store.ok());
    REQUIRE(store->AddVersion(*NewInlineMasterKey(name)).ok());
    REQUIRE(store->Save().ok());
  }

  Status Set(uint64_t ino, const std::string& name, std::string_view value) {
    return fs->SetXattr(ino, name, Bytes(value), 0, Caller{});
  }
  // Starts `policy apply /` on another thread and returns once it is held at its first
  // disk write.
  std::future<Status> ApplyHeld() {
    gate.Close(DiskGate::kWrite);
    auto apply = std::async(std::launch::async, [this] {
      return fs->ApplyPolicy("/", [](const Reconciler::Progress&) { return true; });
    });
    REQUIRE(gate.WaitUntilHolding(kPatience));
    return apply;
  }
  // The segments of `ino` are in the extents `before` lists.
  void CheckSameExtents(uint64_t ino, const std::vector<SegmentRecord>& before) {
    auto now = Segments(ino);
    REQUIRE(now.size() == before.size());
    for (size_t i = 0; i < now.size(); i++) CHECK(now[i].extent_id == before[i].extent_id);
  }
  // Erases the data keys master key k1 wraps (one file's) while `policy apply /` is held
  // there, then lets the apply finish. The erase must not wait for it.
  void EraseK1WhileApplyHeld() {
    auto apply = ApplyHeld();
    auto erase = std::async(std::launch::async, [this] { return fs->ChangeFileKeys("erase", "k1"); });
    if (erase.wait_for(kPatience) != std::future_status::ready) {
      gate.Open();
      FAIL("the erase waited for the held re-encode");
    }
    auto erased = erase.get();
    REQUIRE(erased.ok());
    CHECK(*erased == 1);
    gate.Open();
    REQUIRE(apply.get().ok());
  }
};

}  // namespace

TEST_CASE("Reconciler: a crypto-erase while a file is rewritten in clear is not undone", "[reconciler][keys]") {
  GatedKeyArchive a;
  auto dir = a.fs->MakeNode(kRootInode, "d", S_IFDIR | 0755, 0, Caller{});
  REQUIRE(dir.ok());
  REQUIRE(a.Set(dir->ino, "user.cairn.encrypt", "aes-256-gcm").ok());
  REQUIRE(a.Set(dir->ino, "user.cairn.key", "k1").ok());
  const auto data = test::RandomBytes(200 << 10, 1);
  uint64_t file = a.WriteFile("f", data, dir->ino);
  REQUIRE(a.fs->PersistAll().ok());
  const auto sealed = a.Segments(file);
  REQUIRE(a.Set(file, "user.cairn.encrypt", "off").ok());  // queued to be rewritten in clear

  a.EraseK1WhileApplyHeld();  // its plaintext read, the clear extents on their way to the disks

  // Still the sealed extents, whose data key is gone: nothing to read.
  a.CheckSameExtents(file, sealed);
  auto fh = a.fs->Open(file, O_RDONLY, Caller{});
  REQUIRE(fh.ok());
  auto read = test::ReadBytes(*a.fs, *fh, 0, data.size());
  a.fs->Release(*fh);
  INFO(read.status().ToString());
  CHECK(read.status().IsCorruption());
  // Left alone, not retried forever: its data cannot be read again.
  std::lock_guard lock(a.archive->catalog_mutex());
  auto queued = a.archive->catalog().PolicyQueue(0, 16);
  REQUIRE(queued.ok());
  CHECK(std::find(queued->begin(), queued->end(), file) == queued->end());
}

TEST_CASE("Reconciler: a file rewritten in clear during a crypto-erase of its key leaves no plaintext in a pack",
          "[reconciler][keys]") {
  GatedKeyArchive a;
  a.AddMasterKey("k2");
  auto dir = a.fs->MakeNode(kRootInode, "d", S_IFDIR | 0755, 0, Caller{});
  REQUIRE(dir.ok());
  REQUIRE(a.Set(dir->ino, "user.cairn.encrypt", "aes-256-gcm").ok());
  // Two small files, g sealed under k2 and f under k1 (a file keeps the master key it was
  // first sealed under); rewritten in clear, they go into one pack.
  REQUIRE(a.Set(dir->ino, "user.cairn.key", "k2").ok());
  const auto g_data = test::RandomBytes(4000, 3);
  uint64_t g = a.WriteFile("g", g_data, dir->ino);
  REQUIRE(a.fs->PersistAll().ok());
  REQUIRE(a.Set(dir->ino, "user.cairn.key", "k1").ok());
  const auto f_data = test::RandomBytes(4000, 4);
  uint64_t f = a.WriteFile("f", f_data, dir->ino);
  REQUIRE(a.fs->PersistAll().ok());
  const auto f_sealed = a.Segments(f);
  const auto g_sealed = a.Segments(g);
  REQUIRE(a.Set(dir->ino, "user.cairn.encrypt", "off").ok());  // both queued to be rewritten in clear

  a.EraseK1WhileApplyHeld();  // the pack of both on its way to the disks

  a.CheckSameExtents(f, f_sealed);
  a.CheckSameExtents(g, g_sealed);  // its new extent held f's plaintext: it waits
  auto on_disks = [&](const std::vector<uint8_t>& data) {
    for (size_t i = 0; i < a.archive->extents().disk_count(); i++) {
      Disk& disk = a.archive->extents().disk(i);
      std::vector<uint8_t> image(disk.Size());
      REQUIRE(disk.ReadAt(0, image).ok());
      if (std::search(image.begin(), image.end(), data.begin(), data.end()) != image.end()) return true;
    }
    return false;
  };
  CHECK_FALSE(on_disks(f_data));
  // The next pass rewrites g alone, in clear.
  REQUIRE(a.fs->ApplyPolicy("/", [](const Reconciler::Progress&) { return true; }).ok());
  CHECK(a.ReadFile(g, g_data.size()) == g_data);
  CHECK(on_disks(g_data));
  CHECK_FALSE(on_disks(f_data));
}

TEST_CASE("Reconciler: a crypto-erase while a file is re-encrypted under another key is not undone",
          "[reconciler][keys]") {
  // One transform worker: the extents after the first few look up their key only once the
  // first is written, which the gate holds until after the erase.
  GatedKeyArchive a([](MkfsOptions& mkfs) { mkfs.options.transform_workers = 1; });
  a.AddMasterKey("k2");
  auto dir = a.fs->MakeNode(kRootInode, "d", S_IFDIR | 0755, 0, Caller{});
  REQUIRE(dir.ok());
  REQUIRE(a.Set(dir->ino, "user.cairn.encrypt", "aes-256-gcm").ok());
  REQUIRE(a.Set(dir->ino, "user.cairn.key", "k1").ok());
  const auto data = test::RandomBytes(8 * kSegment + 1000, 2);
  uint64_t file = a.WriteFile("f", data, dir->ino);
  REQUIRE(a.fs->PersistAll().ok());
  const auto sealed = a.Segments(file);
  REQUIRE(a.Set(file, "user.cairn.key", "k2").ok());  // queued to be rewritten

  a.EraseK1WhileApplyHeld();  // its plaintext read, the first extent on its way to the disks

  // No segment was sealed with a new key and swapped in: nothing of the file reads.
  a.CheckSameExtents(file, sealed);
  auto fh = a.fs->Open(file, O_RDONLY, Caller{});
  REQUIRE(fh.ok());
  for (uint64_t at = 0; at < data.size(); at += kSegment) {
    auto read = test::ReadBytes(*a.fs, *fh, at, std::min<uint64_t>(kSegment, data.size() - at));
    INFO("offset " << at << ": " << read.status().ToString());
    CHECK(read.status().IsCorruption());
  }
  a.fs->Release(*fh);
  std::lock_guard lock(a.archive->catalog_mutex());
  auto key = a.archive->catalog().GetFileKey(file);
  CHECK(key.status().IsNotFound());  // no new data key made for it
}

TEST_CASE("Reconciler: a policy change during a file's first persist leaves the file queued", "[reconciler]") {
  GatedKeyArchive a;
  auto dir = a.fs->MakeNode(kRootInode, "d", S_IFDIR | 0755, 0, Caller{});
  REQUIRE(dir.ok());
  uint64_t file = a.WriteFile("f", test::RandomBytes(3 * kSegment, 5), dir->ino);
  a.gate.Close(DiskGate::kWrite);
  auto persist = std::async(std::launch::async, [&] { return a.fs->PersistAll(); });
  REQUIRE(a.gate.WaitUntilHolding(kPatience));
  // Its plan is made (the old segment size); the directory's new one reaches files with a
  // layout only, and this one has none until its persist commits.
  REQUIRE(a.Set(dir->ino, "user.cairn.segment_size", std::to_string(2 * kSegment)).ok());
  REQUIRE(a.fs->ApplyPolicy("/", [](const Reconciler::Progress&) { return true; }).ok());
  a.gate.Open();
  REQUIRE(persist.get().ok());
  {
    std::lock_guard lock(a.archive->catalog_mutex());
    auto queued = a.archive->catalog().PolicyQueue(0, 16);
    REQUIRE(queued.ok());
    CHECK(std::find(queued->begin(), queued->end(), file) != queued->end());  // before, out of policy for good
  }
  REQUIRE(a.fs->ApplyPolicy("/", [](const Reconciler::Progress&) { return true; }).ok());
  auto segments = a.Segments(file);
  REQUIRE(segments.size() == 2);  // rewritten in the new segment size
}

TEST_CASE("Reconciler: files that stay queued do not keep the background from the rest of the queue",
          "[reconciler]") {
  GatedKeyArchive a([](MkfsOptions& mkfs) {
    mkfs.options.reconcile_idle_seconds = 0;
    mkfs.options.reconcile_rate = 0;
    mkfs.options.persist_idle_seconds = 3600;  // files open for writing stay dirty
  });
  auto dir = a.fs->MakeNode(kRootInode, "d", S_IFDIR | 0755, 0, Caller{});
  REQUIRE(dir.ok());
  std::vector<uint64_t> files;
  for (int i = 0; i <= 256; i++) {
    files.push_back(a.WriteFile(fmt::format("f{}", i), test::RandomBytes(1000, i), dir->ino));
  }
  REQUIRE(a.fs->PersistAll().ok());
  REQUIRE(std::is_sorted(files.begin(), files.end()));
  // The lowest 256 (a page of the queue) are being written: busy, they stay queued.
  std::vector<FileHandle*> handles;
  for (size_t i = 0; i < 256; i++) {
    auto fh = a.fs->Open(files[i], O_RDWR, Caller{});
    REQUIRE(fh.ok());
    REQUIRE(a.fs->Write(*fh, 0, Bytes("x")).ok());
    handles.push_back(*fh);
  }
  REQUIRE(a.Set(dir->ino, "user.cairn.encrypt", "aes-256-gcm").ok());
  REQUIRE(a.Set(dir->ino, "user.cairn.key", "k1").ok());
  REQUIRE(a.fs->StartBackground().ok());

  auto sealed = [&] {
    auto key = a.archive->file_keys().KeyNameOf(files.back());
    REQUIRE(key.ok());
    return key->has_value();
  };
  auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (!sealed() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(50ms);
  CHECK(sealed());
  CHECK_FALSE(a.archive->file_keys().KeyNameOf(files.front())->has_value());  // still being written
  for (FileHandle* fh : handles) a.fs->Release(fh);
}

TEST_CASE("Reconciler: policy apply accounts for a file found in policy by its turn", "[reconciler]") {
  GatedKeyArchive a;
  auto dir = a.fs->MakeNode(kRootInode, "d", S_IFDIR | 0755, 0, Caller{});
  REQUIRE(dir.ok());
  uint64_t first = a.WriteFile("f1", test::RandomBytes(3000, 1), dir->ino);
  uint64_t second = a.WriteFile("f2", test::RandomBytes(3000, 2), dir->ino);
  REQUIRE(a.fs->PersistAll().ok());
  for (uint64_t file : {first, second}) REQUIRE(a.Set(file, "user.cairn.compress", "lz4").ok());
  Reconciler::Progress last;
  bool collected = false;
  REQUIRE(a.fs->ApplyPolicy("/", [&](const Reconciler::Progress& p) {
    if (!collected) {  // found out of policy; put back in policy before its turn, as the background could
      collected = true;
      REQUIRE(p.files_total == 2);
      REQUIRE(a.fs->RemoveXattr(first, "user.cairn.compress", Caller{}).ok());
    }
    last = p;
    return true;
  }).ok());
  CHECK(last.files_total == 2);
  CHECK(last.files_done == 1);
  CHECK(last.files_in_policy == 1);
  CHECK(last.files_done + last.files_busy + last.files_failed + last.files_in_policy == last.files_total);
}
