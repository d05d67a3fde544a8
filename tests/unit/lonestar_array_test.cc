// LoneStarArray on file-backed image disks: parity relations after writes in each mode, reads
// of lost disks, which disks a read and a write touch, crashes at every step boundary, the
// rebuild of a replaced disk and of parity whose journal was lost, and the parity check.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <array>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "array/lonestar_array.h"
#include "test_util.h"

using namespace cairn;

namespace {

constexpr uint64_t kDataStart = 4096;
constexpr uint64_t kDiskSize = 2 << 20;
constexpr uint32_t kFirstDisk = 10;  // the group's disks are the archive's disks 10..25

struct CountingObserver : ArrayIoObserver {
  std::mutex mutex;
  std::map<uint32_t, int> reads, writes;
  std::function<void(uint32_t disk, Access access)> also;  // a test's own step, before the access
  void WillAccess(uint32_t disk, Access access) override {
    {
      std::lock_guard lock(mutex);
      if (access == Access::kRead) reads[disk]++;
      if (access == Access::kWrite) writes[disk]++;
    }
    if (also) also(disk, access);
  }
  void Clear() {
    reads.clear();
    writes.clear();
  }
};

// A member whose next sync fails when the test says so (the disk said EIO), or whose next
// write lands and then reports EIO (a write torn by the error).
class SyncFaultDisk : public DiskWrapper {
 public:
  SyncFaultDisk(std::unique_ptr<Disk> target, std::atomic<bool>& fail_next, std::atomic<bool>& fail_next_write)
      : DiskWrapper(std::move(target)), fail_next_(fail_next), fail_next_write_(fail_next_write) {}
  Status Sync() override {
    if (fail_next_.exchange(false)) return Status::IOError(Name() + ": injected sync error");
    return DiskWrapper::Sync();
  }
  Status WriteGatherAt(uint64_t offset, std::span<const std::span<const uint8_t>> pieces) override {
    Status st = DiskWrapper::WriteGatherAt(offset, pieces);
    if (st.ok() && fail_next_write_.exchange(false)) return Status::IOError(Name() + ": injected write error");
    return st;
  }

 private:
  std::atomic<bool>& fail_next_;
  std::atomic<bool>& fail_next_write_;
};

// A 4x4:2+1 group of images (2 MiB unless told) and what its buckets should hold.
struct Group {
  test::TempDir tmp;
  GridGeometry geometry = *GridGeometry::Parse("4x4:2+1");
  ArrayWriteMode mode;
  uint64_t disk_size;
  uint64_t delta_cache = 256ull << 20;
  std::map<uint32_t, std::vector<uint8_t>> expected;  // bucket position -> its data range
  CountingObserver observer;  // before the array, which tells it of its I/O until it is gone
  std::array<std::atomic<bool>, 16> fail_next_sync{};   // by position
  std::array<std::atomic<bool>, 16> fail_next_write{};  // by position
  std::function<bool(std::string_view)> crash_point;
  std::unique_ptr<LoneStarArray> array;

  explicit Group(ArrayWriteMode m, uint64_t size = kDiskSize) : mode(m), disk_size(size) {
    for (uint32_t p = 0; p < geometry.disk_count(); p++) {
      REQUIRE(CreateImageDisk(Image(p), disk_size).ok());
      if (geometry.role(p) == DiskRole::kData) expected[p].assign(disk_size - kDataStart, 0);
    }
    Open(true);
  }
  std::string Image(uint32_t p) const { return tmp / fmt::format("disk-{}.img", p); }

  // Opens the group with `lost` members missing and `replaced` ones fresh.
  void Open(bool create = false, std::set<uint32_t> lost = {}, std::set<uint32_t> replaced = {}) {
    array.reset();
    std::vector<LoneStarArray::Member> members;
    for (uint32_t p = 0; p < geometry.disk_count(); p++) {
      LoneStarArray::Member m;
      m.disk = kFirstDisk + p;
      m.lost = lost.contains(p);
      m.replaced = replaced.contains(p);
      if (m.replaced) {
        std::filesystem::remove(Image(p));
        REQUIRE(CreateImageDisk(Image(p), disk_size).ok());
      }
      if (m.lost) {
        m.device = MissingDisk(Image(p), "taken out by the test");
      } else {
        auto disk = OpenImageDisk(Image(p));
        REQUIRE(disk.ok());
        m.device = std::make_unique<SyncFaultDisk>(std::move(*disk), fail_next_sync.at(p), fail_next_write.at(p));
      }
      members.push_back(std::move(m));
    }
    LoneStarArray::Options o(geometry);
    o.name = "cold";
    o.mode = mode;
    o.data_start = kDataStart;
    o.data_end = disk_size;
    o.delta_cache_bytes = delta_cache;
    o.journal_path = tmp / "cold.journal";
    o.identity = "test/cold";
    o.create = create;
    o.observer = &observer;
    o.crash_point = crash_point;
    auto opened = LoneStarArray::Open(std::move(o), std::move(members));
    INFO(opened.status().ToString());
    REQUIRE(opened.ok());
    array = std::move(*opened);
  }

  // Writes `n` random pieces at random places of random buckets (syncing as it goes).
  void WriteRandom(int n, uint32_t seed, bool sync = true) {
    std::mt19937 rng(seed);
    std::vector<uint32_t> buckets(geometry.data_disks().begin(), geometry.data_disks().end());
    for (int i = 0; i < n; i++) {
      uint32_t p = buckets[rng() % buckets.size()];
      uint64_t length = 1 + rng() % (3 * LoneStarArray::kUnit);
      uint64_t offset = kDataStart + rng() % (disk_size - kDataStart - length);
      auto data = test::RandomBytes(length, seed * 1000 + i);
      REQUIRE(array->Write(p, offset, data).ok());
      std::copy(data.begin(), data.end(), expected[p].begin() + (offset - kDataStart));
      if (sync) REQUIRE(array->Sync(p).ok());
    }
  }
  // Rebuilds every defective range, 1 MiB a step, in a few steps.
  void RebuildAll() {
    for (int steps = 0; *array->RebuildStep(1 << 20) > 0; steps++) REQUIRE(steps < 10);
  }
  void SyncAll() {
    for (const auto& [p, bytes] : expected) REQUIRE(array->Sync(p).ok());
  }
  void CheckBuckets() {
    for (const auto& [p, bytes] : expected) {
      std::vector<uint8_t> got(bytes.size());
      REQUIRE(array->Read(p, kDataStart, got).ok());
      auto differ = std::mismatch(got.begin(), got.end(), bytes.begin());
      INFO("bucket at grid position " << p << ", first wrong byte at offset " << kDataStart + (differ.first - got.begin()));
      CHECK(differ.first == got.end());
    }
  }
  void CheckParityClean() {
    auto report = array->CheckParity({kDataStart, disk_size - kDataStart}, false);
    REQUIRE(report.ok());
    INFO(fmt::format("{}", fmt::join(report->mismatches, "\n")));
    CHECK(report->mismatches.empty());
  }
  // Random bytes over the first `length` bytes of every bucket, synced, twice: in delayed mode
  // the first deltas are flushed, so that the parity disks hold bytes and the second ones wait.
  void FillBuckets(uint64_t length, uint32_t seed) {
    for (uint32_t round = 0; round < 2; round++) {
      for (auto& [p, bytes] : expected) {
        auto data = test::RandomBytes(length, seed + 100 * round + p);
        REQUIRE(array->Write(p, kDataStart, data).ok());
        REQUIRE(array->Sync(p).ok());
        std::copy(data.begin(), data.end(), bytes.begin());
      }
      if (round == 0) REQUIRE(array->FlushParity().ok());
    }
  }
  // Every member's image as it is on the disk, by position.
  std::vector<std::vector<uint8_t>> Images() const {
    std::vector<std::vector<uint8_t>> images;
    for (uint32_t p = 0; p < geometry.disk_count(); p++) {
      auto disk = OpenImageDisk(Image(p));
      REQUIRE(disk.ok());
      images.emplace_back(disk_size);
      REQUIRE((*disk)->ReadAt(0, images.back()).ok());
    }
    return images;
  }
  // Bytes of member `p` change under the array, as when they rot on the disk: XORed with `error`.
  void Rot(uint32_t p, uint64_t offset, std::span<const uint8_t> error) {
    auto disk = OpenImageDisk(Image(p));
    REQUIRE(disk.ok());
    std::vector<uint8_t> bytes(error.size());
    REQUIRE((*disk)->ReadAt(offset, bytes).ok());
    for (size_t i = 0; i < bytes.size(); i++) bytes[i] ^= error[i];
    REQUIRE((*disk)->WriteAt(offset, bytes).ok());
    REQUIRE((*disk)->Sync().ok());
  }
};

// The 4 KiB block of the parity check holding `offset` (blocks count from kDataStart).
std::string BlockBytes(uint64_t offset) {
  uint64_t begin = offset - (offset - kDataStart) % 4096;
  return fmt::format("bytes {}..{}", begin, begin + 4096);
}

ArrayWriteMode AnyMode() {
  return GENERATE(ArrayWriteMode::kSerialized, ArrayWriteMode::kDirect, ArrayWriteMode::kDelayed);
}

}  // namespace

TEST_CASE("LoneStarArray: writes keep every parity group XORing to zero, in each write mode", "[array]") {
  Group g(AnyMode());
  g.WriteRandom(40, 1);
  if (g.mode == ArrayWriteMode::kDelayed) {
    CHECK(g.array->pending_delta_bytes() > 0);
    g.CheckParityClean();  // pending deltas count as applied for readers of the parity
    REQUIRE(g.array->FlushParity().ok());
    CHECK(g.array->pending_delta_bytes() == 0);
  }
  g.CheckParityClean();
  g.CheckBuckets();
  g.Open();  // and after a clean reopen
  g.CheckParityClean();
  g.CheckBuckets();
}

TEST_CASE("LoneStarArray: any 1, 2 or 3 lost disks read back every byte", "[array]") {
  Group g(AnyMode());
  g.WriteRandom(30, 2);
  std::vector<std::set<uint32_t>> sets;
  for (uint32_t a = 0; a < 16; a++) sets.push_back({a});
  std::mt19937 rng(3);
  while (sets.size() < 16 + 12) {  // data only, parity only and mixed, at random
    std::set<uint32_t> s;
    size_t n = 2 + rng() % 2;
    while (s.size() < n) s.insert(rng() % 16);
    sets.push_back(s);
  }
  sets.push_back({0, 1, 3});      // three buckets
  sets.push_back({2, 12, 13});    // hP and two vPs
  sets.push_back({0, 2, 12});     // a bucket, its hP and its vP
  for (const auto& lost : sets) {
    INFO("lost grid positions " << fmt::format("{}", fmt::join(lost, ",")));
    g.Open(false, lost);
    g.CheckBuckets();
  }
}

TEST_CASE("LoneStarArray: a read touches its bucket alone, a write exactly d, hP, vP and vhP", "[array]") {
  Group g(ArrayWriteMode::kSerialized);
  uint32_t bucket = g.geometry.data_disks()[3];
  auto data = test::RandomBytes(200000, 4);
  g.observer.Clear();
  REQUIRE(g.array->Write(bucket, 100000, data).ok());
  REQUIRE(g.array->Sync(bucket).ok());
  std::set<uint32_t> written;
  for (const auto& [disk, n] : g.observer.writes) written.insert(disk - kFirstDisk);
  auto ws = g.geometry.WriteSet(bucket);
  CHECK(written == std::set<uint32_t>(ws.begin(), ws.end()));
  g.observer.Clear();
  std::vector<uint8_t> back(data.size());
  REQUIRE(g.array->Read(bucket, 100000, back).ok());
  CHECK(back == data);
  CHECK(g.observer.reads == std::map<uint32_t, int>{{kFirstDisk + bucket, 1}});
  CHECK(g.observer.writes.empty());
}

TEST_CASE("LoneStarArray: a write in pieces lands as their concatenation, on its bucket and in its delta", "[array]") {
  Group g(AnyMode());
  uint32_t bucket = g.geometry.data_disks()[2];
  auto view = g.array->View(bucket);
  // As the extent layer writes an extent (header, payload, padding, here with an empty piece):
  // first in fresh space, then over part of it (a read-modify-write), then on from the unit
  // the last one ended in into fresh units (read-modify-write for that one unit alone).
  for (auto [offset, seed] : {std::pair<uint64_t, uint32_t>{kDataStart + 5000, 7}, {kDataStart + 3000, 8},
                              {kDataStart + 77000, 9}}) {
    auto head = test::RandomBytes(100, seed);
    auto body = test::RandomBytes(70000, seed + 100);
    auto tail = test::RandomBytes(3000, seed + 200);
    const std::span<const uint8_t> pieces[] = {head, body, {}, tail};
    REQUIRE(view->WriteGatherAt(offset, pieces).ok());
    auto at = g.expected[bucket].begin() + static_cast<ptrdiff_t>(offset - kDataStart);
    for (const auto* piece : {&head, &body, &tail}) at = std::copy(piece->begin(), piece->end(), at);
  }
  REQUIRE(g.array->Sync(bucket).ok());
  g.CheckBuckets();
  // The bucket lost before any parity followed (delayed): it reads back from its parity groups
  // and the deltas the journal keeps.
  if (g.mode == ArrayWriteMode::kDelayed) CHECK(g.array->pending_delta_bytes() > 0);
  g.array->MarkLost(bucket, "taken out by the test");
  g.CheckBuckets();
  g.Open();
  g.CheckParityClean();
}

TEST_CASE("LoneStarArray: a crash at any step boundary keeps every synced byte and consistent parity", "[array]") {
  ArrayWriteMode mode = AnyMode();
  // Crash at the n-th step boundary reached, for n = 1, 2, ... until a run reaches none.
  for (int crash_at = 1;; crash_at++) {
    INFO("mode " << static_cast<int>(mode) << ", crash at step boundary " << crash_at);
    Group g(mode);
    g.WriteRandom(4, 5);  // synced: acknowledged
    if (mode == ArrayWriteMode::kDelayed) REQUIRE(g.array->FlushParity().ok());
    auto acknowledged = g.expected;
    int steps = 0;
    std::string where;
    g.crash_point = [&](std::string_view step) {
      if (++steps != crash_at) return false;
      where = step;
      return true;
    };
    g.Open();
    // A batch of writes to two buckets, synced, then (delayed) the parity flush.
    bool stopped = false;
    std::mt19937 rng(crash_at);
    for (uint32_t p : {g.geometry.data_disks()[0], g.geometry.data_disks()[5]}) {
      for (int i = 0; i < 3 && !stopped; i++) {
        uint64_t offset = kDataStart + rng() % (kDiskSize / 2);
        auto data = test::RandomBytes(70000 + i * 9000, crash_at * 10 + i);
        stopped = !g.array->Write(p, offset, data).ok();
        if (!stopped) std::copy(data.begin(), data.end(), g.expected[p].begin() + (offset - kDataStart));
      }
      if (!stopped) stopped = !g.array->Sync(p).ok();
      if (!stopped) acknowledged = g.expected;
    }
    if (!stopped && mode == ArrayWriteMode::kDelayed) stopped = !g.array->FlushParity().ok();
    g.crash_point = nullptr;
    if (!stopped) {
      CHECK(steps < crash_at);
      WARN(fmt::format("mode {}: {} step boundaries", static_cast<int>(mode), crash_at - 1));
      break;
    }
    INFO("stopped at " << where);
    g.array.reset();  // the process is gone: nothing more reaches the disks
    g.Open();         // replay and recovery
    g.expected = acknowledged;
    g.CheckParityClean();
    // Every acknowledged byte; what was written and never synced may read old or new.
    for (const auto& [p, bytes] : acknowledged) {
      std::vector<uint8_t> got(bytes.size());
      REQUIRE(g.array->Read(p, kDataStart, got).ok());
      size_t differ = 0;
      for (size_t i = 0; i < got.size(); i++) differ += got[i] != bytes[i];
      CHECK(differ <= 3 * (70000 + 18000));  // only the unacknowledged writes' bytes
    }
    REQUIRE(g.array->defective_bytes() == 0);
  }
}

TEST_CASE("LoneStarArray: a write behind another's parity update, both cut short by one crash, keeps the synced bytes",
          "[array]") {
  // Serialized: T1's parity is updated after its bucket's sync, without its units locked
  // between two parities, so T2 can write the same units meanwhile. After a crash then,
  // rolling T2's bucket range back from parity T1 left undefined would lose the whole unit.
  Group g(ArrayWriteMode::kSerialized);
  g.WriteRandom(30, 21);
  const auto acknowledged = g.expected;
  const uint32_t bucket = g.geometry.data_disks()[2];
  const uint64_t offset = kDataStart + 3 * LoneStarArray::kUnit + 1000;
  bool inside = false;
  bool second_written = false;
  g.crash_point = [&](std::string_view step) {
    if (inside || step != "hP-written") return false;
    inside = true;  // T2 goes through the crash points of its own write
    second_written = g.array->Write(bucket, offset + 50000, test::RandomBytes(3000, 2)).ok();
    inside = false;
    return true;
  };
  g.Open();
  REQUIRE(g.array->Write(bucket, offset, test::RandomBytes(40000, 1)).ok());
  CHECK_FALSE(g.array->Sync(bucket).ok());  // the crash, during T1's parity update
  REQUIRE(second_written);
  g.crash_point = nullptr;
  g.array.reset();
  g.Open();
  g.CheckParityClean();
  // Every byte synced before, outside what T1 and T2 wrote (not acknowledged: old or new).
  std::vector<uint8_t> got(acknowledged.at(bucket).size());
  REQUIRE(g.array->Read(bucket, kDataStart, got).ok());
  for (uint64_t at = 0; at < got.size(); at++) {
    uint64_t disk_offset = kDataStart + at;
    bool unacknowledged = (disk_offset >= offset && disk_offset < offset + 40000) ||
                          (disk_offset >= offset + 50000 && disk_offset < offset + 53000);
    if (!unacknowledged && got[at] != acknowledged.at(bucket)[at]) FAIL("byte at disk offset " << disk_offset);
  }
}

TEST_CASE("LoneStarArray: a bucket range a failed write left undefined outlives a crash in a promise over it",
          "[array]") {
  // The bucket and the three parities of a range, all undefined at once, could not be rebuilt:
  // neither a direct promise whose data write failed, cut short before it is done, nor the
  // next write over the range, cut short in its parity update, may leave them so.
  const ArrayWriteMode mode = GENERATE(ArrayWriteMode::kSerialized, ArrayWriteMode::kDirect);
  INFO("mode " << static_cast<int>(mode));
  Group g(mode);
  g.FillBuckets(64 << 10, 31);
  const uint32_t bucket = g.geometry.data_disks().front();
  const uint64_t offset = kDataStart + 4096;
  std::string crash_at;
  g.crash_point = [&](std::string_view step) { return step == crash_at; };
  g.Open();
  if (mode == ArrayWriteMode::kDirect) {
    // An open promise over the same units, not synced yet: its parity is written, not durable.
    auto before = test::RandomBytes(3000, 34);
    REQUIRE(g.array->Write(bucket, offset + 2000, before).ok());
    std::copy(before.begin(), before.end(), g.expected[bucket].begin() + (offset + 2000 - kDataStart));
    crash_at = "data-undefined";
  }
  g.fail_next_write[bucket] = true;  // lands, then reports EIO: its units are undefined on the bucket
  CHECK_FALSE(g.array->Write(bucket, offset, test::RandomBytes(5000, 32)).ok());
  REQUIRE(g.array->defects().contains(bucket));
  if (mode == ArrayWriteMode::kSerialized) {
    crash_at = "hP-written";
    auto data = test::RandomBytes(5000, 33);
    REQUIRE(g.array->Write(bucket, offset, data).ok());
    CHECK_FALSE(g.array->Sync(bucket).ok());  // its data was marked written before the crash
    std::copy(data.begin(), data.end(), g.expected[bucket].begin() + (offset - kDataStart));
  }
  crash_at.clear();
  g.array.reset();
  g.Open();
  for (int steps = 0;; steps++) {
    auto left = g.array->RebuildStep(1 << 20);
    INFO(left.status().ToString());
    REQUIRE(left.ok());
    if (*left == 0) break;
    REQUIRE(steps < 10);
  }
  g.CheckBuckets();
  g.CheckParityClean();
}

TEST_CASE("LoneStarArray: a replaced disk reads through its parity until rebuilt, then holds its bytes", "[array]") {
  Group g(AnyMode());
  g.WriteRandom(30, 6);
  uint32_t replaced = GENERATE(1, 2, 12);  // a bucket, an hP, a vP
  INFO("replaced grid position " << replaced);
  g.Open(false, {}, {replaced});
  CHECK(g.array->defective_bytes() == kDiskSize - kDataStart);
  g.CheckBuckets();  // on demand, from the parity groups
  for (int steps = 0; *g.array->RebuildStep(512 << 10) > 0; steps++) REQUIRE(steps < 100);
  g.Open();
  g.CheckParityClean();
  g.CheckBuckets();
}

TEST_CASE("LoneStarArray: a disk replaced where the old one had a defect is rebuilt whole", "[array]") {
  Group g(ArrayWriteMode::kSerialized);
  g.WriteRandom(30, 11);
  const uint32_t bucket = g.geometry.data_disks()[1];
  // A write cut short by a crash leaves a defect on the bucket; it fails before the next
  // open can rebuild it.
  g.crash_point = [](std::string_view step) { return step == "begin"; };
  g.Open();
  CHECK_FALSE(g.array->Write(bucket, kDataStart + 100000, test::RandomBytes(5000, 3)).ok());
  g.crash_point = nullptr;
  g.Open(false, {bucket});
  REQUIRE(g.array->defects().at(bucket).bytes() == LoneStarArray::kUnit);
  REQUIRE(g.array->Replacing(bucket).ok());  // cairn disk replace
  g.Open(false, {}, {bucket});               // a blank image in its place
  CHECK(g.array->defective_bytes() == kDiskSize - kDataStart);
  for (int steps = 0; *g.array->RebuildStep(1 << 20) > 0; steps++) REQUIRE(steps < 100);
  g.Open();
  g.CheckBuckets();
  g.CheckParityClean();
}

TEST_CASE("LoneStarArray: steps that leave replaced disks to cairn rebuild leave them alone", "[array]") {
  Group g(ArrayWriteMode::kSerialized);
  g.WriteRandom(10, 9);
  g.Open(false, {}, {1});  // bucket 1 replaced, nothing else defective
  CHECK(g.array->defective_bytes(false) == 0);
  uint64_t before = g.array->io_totals().disk_bytes_read;
  CHECK(*g.array->RebuildStep(1 << 20, false) == 0);
  CHECK(g.array->io_totals().disk_bytes_read == before);
  CHECK(g.array->defective_bytes() == kDiskSize - kDataStart);
  g.CheckBuckets();  // still read through its parity
}

TEST_CASE("LoneStarArray: a lost journal means all parity is re-derived, never trusted", "[array]") {
  Group g(ArrayWriteMode::kDelayed);
  g.WriteRandom(20, 7);  // their deltas are pending: the journal holds the only record of them
  g.array.reset();
  bool damaged = GENERATE(false, true);
  std::string journal = g.tmp / "cold.journal";
  if (damaged) {  // a record in the middle no longer matches its checksum
    test::Damage(journal, std::filesystem::file_size(journal) / 2);
  } else {
    std::filesystem::remove(journal);
  }
  g.Open();
  CHECK(g.array->defective_bytes() == g.geometry.parity_disk_count() * (kDiskSize - kDataStart));
  CHECK(g.array->defective_bytes(false) == g.array->defective_bytes());  // no disk awaits a rebuild
  g.CheckBuckets();  // from the buckets themselves
  while (*g.array->RebuildStep(1 << 20, false) > 0) {  // as a mount's background resync does
  }
  CHECK(g.array->defective_bytes() == 0);
  g.CheckParityClean();
  CHECK(std::filesystem::exists(journal));
  bool set_aside = false;
  for (const auto& entry : std::filesystem::directory_iterator(g.tmp.path())) {
    set_aside |= entry.path().filename().string().starts_with("cold.journal.damaged-");
  }
  CHECK(set_aside == damaged);
}

TEST_CASE("LoneStarArray: a delta damaged in the journal is never applied: its parity is recomputed", "[array]") {
  Group g(ArrayWriteMode::kDelayed);
  uint32_t bucket = g.geometry.data_disks()[1];
  auto data = test::RandomBytes(70000, 9);
  REQUIRE(g.array->Write(bucket, kDataStart + 8192, data).ok());
  REQUIRE(g.array->Sync(bucket).ok());
  std::copy(data.begin(), data.end(), g.expected[bucket].begin() + 8192);
  REQUIRE(g.array->pending_delta_bytes() > 0);
  // On the fast storage, bytes of the delta (the journal's last big record) change.
  std::string journal = g.tmp / "cold.journal";
  test::Damage(journal, std::filesystem::file_size(journal) - 1000);
  // The other bucket of its hPG, over one of those units and the next: its delta to their
  // shared hP and vhP overlaps the damaged one's ranges, and still goes to all of its own.
  uint32_t beside = g.geometry.data_disks()[0];
  auto more = test::RandomBytes(2 * LoneStarArray::kUnit, 10);
  REQUIRE(g.array->Write(beside, kDataStart + LoneStarArray::kUnit, more).ok());
  REQUIRE(g.array->Sync(beside).ok());
  std::copy(more.begin(), more.end(), g.expected[beside].begin() + LoneStarArray::kUnit);
  if (GENERATE(false, true)) {  // the compaction that takes the damaged record out fails at first
    std::filesystem::create_directory(journal + ".new");  // where it writes the new journal
    CHECK_FALSE(g.array->FlushParity().ok());
    std::filesystem::remove(journal + ".new");
  }
  REQUIRE(g.array->FlushParity().ok());  // logs it and leaves that parity to be recomputed
  CHECK(g.array->pending_delta_bytes() == 0);
  CHECK(g.array->defective_bytes() == 3 * 2 * LoneStarArray::kUnit);  // its hP, vP and vhP ranges
  g.CheckParityClean();
  g.CheckBuckets();
  g.Open();  // the journal was compacted without the damaged record: it is trusted
  for (int steps = 0; *g.array->RebuildStep(64 << 20, false) > 0; steps++) REQUIRE(steps < 100);
  CHECK(g.array->defective_bytes() == 0);
  g.CheckParityClean();
  g.Open();
  CHECK(g.array->defective_bytes() == 0);
  g.CheckParityClean();
  g.CheckBuckets();
}

TEST_CASE("LoneStarArray: what a running rebuild's finished slices see meanwhile outlives its end", "[array]") {
  // A rebuild frees each slice once it is written, but clears the defects of its whole range
  // only once all of it is synced. In between, a write behind it must still reach the parity it
  // rebuilt (or, on a replaced disk, leave its range a defect again), and a defect added there
  // must stay.
  bool replaced = GENERATE(false, true);  // the hP is a blank disk, else all parity is re-derived
  bool damage = GENERATE(false, true);    // the write's delta is damaged in the journal: its parity is a defect
  Group g(damage ? ArrayWriteMode::kDelayed : GENERATE(ArrayWriteMode::kDirect, ArrayWriteMode::kDelayed), 10 << 20);
  const auto set = g.geometry.WriteSet(g.geometry.data_disks().front());
  const uint32_t bucket = set[0], hp = set[1];
  for (uint32_t p : g.geometry.data_disks()) {  // the buckets of its hPG, read by each slice of the rebuild
    if (g.geometry.WriteSet(p)[1] != hp) continue;
    auto data = test::RandomBytes(g.expected[p].size(), p);
    REQUIRE(g.array->Write(p, kDataStart, data).ok());
    REQUIRE(g.array->Sync(p).ok());
    g.expected[p] = data;
  }
  REQUIRE(g.array->FlushParity().ok());
  if (replaced) {
    g.Open(false, {}, {hp});
  } else {  // a lost journal
    g.array.reset();
    std::filesystem::remove(g.tmp / "cold.journal");
    g.Open();
  }
  // Rebuilt in three slices of 64 units.
  bool slice_written = false;
  bool wrote = false;
  g.observer.also = [&](uint32_t disk, ArrayIoObserver::Access access) {
    // A read of the bucket for a later slice, once the rebuild has written a slice (the
    // third slice's reads come after the first one's write has finished at the latest).
    if (access == ArrayIoObserver::Access::kWrite) slice_written = true;
    if (disk != kFirstDisk + bucket || access != ArrayIoObserver::Access::kRead || !slice_written || wrote) return;
    wrote = true;
    auto data = test::RandomBytes(1000, 77);
    REQUIRE(g.array->Write(bucket, kDataStart + 4096, data).ok());
    REQUIRE(g.array->Sync(bucket).ok());
    std::copy(data.begin(), data.end(), g.expected[bucket].begin() + 4096);
    if (damage) test::Damage(g.tmp / "cold.journal", std::filesystem::file_size(g.tmp / "cold.journal") - 1000);
    if (g.mode == ArrayWriteMode::kDelayed) REQUIRE(g.array->FlushParity().ok());
  };
  auto left = g.array->RebuildStep(64 << 20);
  g.observer.also = nullptr;
  REQUIRE(left.ok());
  REQUIRE(wrote);
  // The damaged delta's hP, vP and vhP ranges are still to be rebuilt, the hP's included;
  // else the write's range of a replaced hP.
  CHECK(*left == (damage ? 3 : replaced ? 1 : 0) * LoneStarArray::kUnit);
  g.CheckParityClean();
  for (int steps = 0; *g.array->RebuildStep(64 << 20) > 0; steps++) REQUIRE(steps < 10);
  g.Open();
  g.CheckParityClean();
  g.CheckBuckets();
}

// Checks that after a repair only the members in `restored` changed, back to `before`, and every
// other member is as `rotted` left it; then that the parity holds and the buckets read right.
void CheckRepaired(Group& g, const std::vector<std::vector<uint8_t>>& before,
                   const std::vector<std::vector<uint8_t>>& rotted, std::set<uint32_t> restored) {
  const auto after = g.Images();
  for (uint32_t p = 0; p < g.geometry.disk_count(); p++) {
    INFO("position " << p << (restored.contains(p) ? ": restored" : ": not written"));
    CHECK((after[p] == (restored.contains(p) ? before[p] : rotted[p])));
  }
  g.CheckParityClean();
  g.CheckBuckets();
}

TEST_CASE("LoneStarArray: a range that cannot be rebuilt keeps neither the rest nor the members that can be from "
          "being rebuilt", "[array]") {
  Group g(ArrayWriteMode::kSerialized);
  g.FillBuckets(256 << 10, 9);
  // Bucket x is missing, and its hP, its vP and the vP of its hP's column are to be rebuilt:
  // none of the four can be. Bucket z, of another hPG and column, can be (from its hPG), and
  // its defect comes after the hP's in the order a rebuild takes them; it is blank.
  const uint32_t x = g.geometry.data_disks().front();
  const auto relations = g.geometry.WriteSet(x);
  uint32_t z = 0;
  for (uint32_t p : g.geometry.data_disks()) {
    auto its = g.geometry.WriteSet(p);
    if (p > relations[1] && its[1] != relations[1] && its[2] != relations[2]) {
      z = p;
      break;
    }
  }
  REQUIRE(z != 0);
  g.Open(false, {x}, {z});  // z blank
  for (uint32_t p : {relations[1], relations[2], relations[3], z}) REQUIRE(g.array->Replacing(p).ok());

  LoneStarArray::RebuildRun run;
  for (int steps = 0;; steps++) {
    REQUIRE(steps < 100);
    uint64_t before = g.array->defective_bytes();
    auto left = g.array->RebuildStep(1 << 20, true, &run);
    if (left.ok() && *left >= before) break;  // no progress: what is left cannot be rebuilt
  }
  CHECK(run.failures > 0);
  auto defects = g.array->defects();
  CHECK_FALSE(defects.contains(z));
  for (size_t role = 1; role < kPromiseRoles; role++) CHECK(defects.contains(relations[role]));
  std::vector<uint8_t> got(g.expected[z].size());
  REQUIRE(g.array->Read(z, kDataStart, got).ok());
  CHECK(got == g.expected[z]);
  // A fresh run tries the stuck ranges again, and fails on them again.
  LoneStarArray::RebuildRun again;
  CHECK_FALSE(g.array->RebuildStep(1 << 20, true, &again).ok());
  CHECK(again.failures == 1);
}

TEST_CASE("LoneStarArray: a replaced disk rebuilt and then written is not taken for blank by the next rebuild",
          "[array]") {
  Group g(ArrayWriteMode::kSerialized);
  g.FillBuckets(64 << 10, 11);
  const uint32_t bucket = g.geometry.data_disks().front();
  g.Open(false, {}, {bucket});  // blank, to be rebuilt
  REQUIRE(g.array->Replacing(bucket).ok());
  g.RebuildAll();
  g.CheckBuckets();
  // A write past its data that lands and fails: the range is to be rebuilt, as zeros.
  g.fail_next_write[bucket] = true;
  CHECK_FALSE(g.array->Write(bucket, kDataStart + (512 << 10), test::RandomBytes(10000, 12)).ok());
  CHECK(g.array->defective_bytes() > 0);
  g.RebuildAll();
  g.CheckBuckets();
  g.CheckParityClean();
}

TEST_CASE("LoneStarArray: a failed write the journal cannot record stops the group, and a reopen repairs it",
          "[array]") {
  Group g(ArrayWriteMode::kSerialized);
  g.FillBuckets(64 << 10, 13);
  const uint32_t bucket = g.geometry.data_disks().front();
  int journal = -1;  // the journal's descriptor, found by its path
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(fd.path(), ec) == std::filesystem::path(g.tmp / "cold.journal")) {
      journal = std::stoi(fd.path().filename().string());
    }
  }
  REQUIRE(journal >= 0);
  const int saved = ::dup(journal);
  const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  REQUIRE((saved >= 0 && full >= 0));
  // The write's promise is begun, then its data lands and fails, and the journal is full.
  g.observer.also = [&](uint32_t disk, ArrayIoObserver::Access access) {
    if (disk == kFirstDisk + bucket && access == ArrayIoObserver::Access::kWrite) ::dup2(full, journal);
  };
  g.fail_next_write[bucket] = true;
  CHECK_FALSE(g.array->Write(bucket, kDataStart + 4096, test::RandomBytes(5000, 14)).ok());
  g.observer.also = nullptr;
  ::dup2(saved, journal);  // the journal works again; the group must not believe the disk
  ::close(saved);
  ::close(full);
  auto again = test::RandomBytes(3000, 15);
  if (g.array->Write(bucket, kDataStart + 6000, again).ok()) {  // what a group that went on would keep
    REQUIRE(g.array->Sync(bucket).ok());
    std::copy(again.begin(), again.end(), g.expected[bucket].begin() + 6000 - kDataStart);
  }
  g.Open();  // the open promise: its range is rebuilt from the parity
  g.RebuildAll();
  g.CheckBuckets();
  g.CheckParityClean();
}

TEST_CASE("LoneStarArray: a parity disk missing while its bucket is written is rebuilt there when it comes back",
          "[array]") {
  Group g(AnyMode());
  g.FillBuckets(64 << 10, 16);
  REQUIRE(g.array->FlushParity().ok());
  const uint32_t bucket = g.geometry.data_disks().front();
  const uint32_t hp = g.geometry.HpgMembers(*g.geometry.hpg(bucket)).back();
  g.Open(false, {hp});  // a degraded mount: its hP disk is not there
  auto data = test::RandomBytes(100000, 17);
  REQUIRE(g.array->Write(bucket, kDataStart + 8192, data).ok());
  REQUIRE(g.array->Sync(bucket).ok());
  REQUIRE(g.array->FlushParity().ok());
  std::copy(data.begin(), data.end(), g.expected[bucket].begin() + 8192);
  g.Open();  // back, as it was: its range of the write is stale, and known to be
  CHECK(g.array->defective_bytes() > 0);
  g.RebuildAll();
  g.CheckParityClean();
  g.CheckBuckets();
}

TEST_CASE("LoneStarArray: direct mode: a parity disk whose sync failed is rebuilt, not taken as synced by a retry",
          "[array]") {
  Group g(ArrayWriteMode::kDirect);
  g.FillBuckets(64 << 10, 18);
  const uint32_t bucket = g.geometry.data_disks().front();
  const uint32_t hp = g.geometry.HpgMembers(*g.geometry.hpg(bucket)).back();
  auto data = test::RandomBytes(100000, 19);
  REQUIRE(g.array->Write(bucket, kDataStart + 8192, data).ok());
  std::copy(data.begin(), data.end(), g.expected[bucket].begin() + 8192);
  g.fail_next_sync[hp] = true;
  CHECK(g.array->Sync(bucket).ok());  // the data is durable; that range of hP is to be rebuilt
  // The failed sync dropped the parity written there, as a failed fsync may.
  g.Rot(hp, kDataStart + 8192 + 5000, test::RandomBytes(100, 20));
  REQUIRE(g.array->Sync(bucket).ok());
  CHECK(g.array->defects().contains(hp));
  g.RebuildAll();
  g.CheckParityClean();
  g.CheckBuckets();
}

TEST_CASE("LoneStarArray: a rebuild of a parity disk writes the deltas still owed to it where the group sees zeros",
          "[array]") {
  Group g(ArrayWriteMode::kDelayed);
  const uint32_t bucket = g.geometry.data_disks().front();
  const uint32_t hp = g.geometry.HpgMembers(*g.geometry.hpg(bucket)).back();
  REQUIRE(g.array->Write(bucket, kDataStart + 8192, test::RandomBytes(100000, 22)).ok());
  REQUIRE(g.array->Sync(bucket).ok());
  REQUIRE(g.array->FlushParity().ok());
  g.Open(false, {}, {hp});  // hP replaced, blank
  REQUIRE(g.array->Replacing(hp).ok());
  // Zeros over the bytes: the group sees zeros there, and hP is owed the delta (the old bytes).
  REQUIRE(g.array->Write(bucket, kDataStart + 8192, std::vector<uint8_t>(100000, 0)).ok());
  REQUIRE(g.array->Sync(bucket).ok());
  g.RebuildAll();
  REQUIRE(g.array->FlushParity().ok());
  g.CheckParityClean();  // before, hP kept zeros there, and the flush left the old bytes on it
  g.CheckBuckets();
}

TEST_CASE("LoneStarArray: deltas a delayed write left are applied when the group opens in another mode", "[array]") {
  Group g(ArrayWriteMode::kDelayed);
  g.crash_point = [](std::string_view step) { return step == "hP-written"; };
  g.Open();
  const uint32_t bucket = g.geometry.data_disks().front();
  auto data = test::RandomBytes(100000, 23);
  REQUIRE(g.array->Write(bucket, kDataStart + 8192, data).ok());
  REQUIRE(g.array->Sync(bucket).ok());
  std::copy(data.begin(), data.end(), g.expected[bucket].begin() + 8192);
  CHECK_FALSE(g.array->FlushParity().ok());  // the crash, with hP written and vP, vhP not
  g.array.reset();
  g.crash_point = nullptr;
  g.mode = ArrayWriteMode::kSerialized;  // cairn.conf says so now
  g.Open();
  CHECK(g.array->pending_delta_bytes() == 0);  // before, owed for good, read from the journal
  auto journal = PromiseJournal::Inspect(g.tmp / "cold.journal", "test/cold");
  REQUIRE(journal.ok());
  CHECK(journal->open.empty());
  g.CheckParityClean();
  g.CheckBuckets();
}

TEST_CASE("LoneStarArray: the parity check recomputes a damaged parity range", "[array]") {
  Group g(AnyMode());
  g.FillBuckets(12 * LoneStarArray::kUnit, 8);
  const uint32_t parity = GENERATE(2u, 13u);  // an hP (in hPG 0 and vPG 2) or a vP (in vPG 1 alone)
  REQUIRE(g.geometry.role(parity) != DiskRole::kData);
  const auto before = g.Images();
  g.Rot(parity, 500000, test::RandomBytes(100, 9));
  const auto rotted = g.Images();
  auto report = g.array->CheckParity({kDataStart, kDiskSize - kDataStart}, true);
  REQUIRE(report.ok());
  INFO(fmt::format("{}", fmt::join(report->mismatches, "\n")));
  // The parity disk is as it was (less the deltas it is still owed in delayed mode).
  CheckRepaired(g, before, rotted, {parity});
  REQUIRE(report->mismatches.size() == 1);
  CHECK_THAT(report->mismatches[0], Catch::Contains(fmt::format("{} of disk {} ({})", BlockBytes(500000),
                                                                kFirstDisk + parity, parity < 12 ? "hP" : "vP")));
  CHECK(report->repaired == 1);
  CHECK(report->buckets_rebuilt == 0);
}

TEST_CASE("LoneStarArray: the parity check rebuilds a rotted bucket range from its parity, never the parity from it",
          "[array]") {
  Group g(AnyMode());
  g.FillBuckets(12 * LoneStarArray::kUnit, 20);
  const uint32_t bucket = 3;  // in hPG 1 and vPG 3
  REQUIRE(g.geometry.role(bucket) == DiskRole::kData);
  const auto before = g.Images();
  g.Rot(bucket, 500000, test::RandomBytes(100, 21));
  const auto rotted = g.Images();
  auto report = g.array->CheckParity({kDataStart, kDiskSize - kDataStart}, true);
  REQUIRE(report.ok());
  INFO(fmt::format("{}", fmt::join(report->mismatches, "\n")));
  CheckRepaired(g, before, rotted, {bucket});  // no parity disk was written
  REQUIRE(report->mismatches.size() == 1);
  CHECK_THAT(report->mismatches[0],
             Catch::Contains(fmt::format("{} of disk {} (data)", BlockBytes(500000), kFirstDisk + bucket)));
  CHECK(report->repaired == 1);
  CHECK(report->buckets_rebuilt == 1);
}

TEST_CASE("LoneStarArray: the parity check repairs each block of a window from the disk wrong there", "[array]") {
  Group g(AnyMode());
  g.FillBuckets(12 * LoneStarArray::kUnit, 30);
  // One window, blocks of two disks: bucket 0 (hPG 0, vPG 0) and the vP of column 1.
  const uint32_t bucket = 0, vp = 13;
  const auto before = g.Images();
  g.Rot(bucket, 300000, test::RandomBytes(5000, 31));  // across two blocks
  g.Rot(vp, 700000, test::RandomBytes(10, 32));
  const auto rotted = g.Images();
  auto report = g.array->CheckParity({kDataStart, kDiskSize - kDataStart}, true);
  REQUIRE(report.ok());
  INFO(fmt::format("{}", fmt::join(report->mismatches, "\n")));
  CheckRepaired(g, before, rotted, {bucket, vp});
  REQUIRE(report->mismatches.size() == 2);
  CHECK_THAT(report->mismatches[0],
             Catch::Contains(fmt::format("bytes 299008..307200 of disk {} (data)", kFirstDisk + bucket)));
  CHECK_THAT(report->mismatches[1],
             Catch::Contains(fmt::format("{} of disk {} (vP)", BlockBytes(700000), kFirstDisk + vp)));
  CHECK(report->repaired == 2);
  CHECK(report->buckets_rebuilt == 1);
}

TEST_CASE("LoneStarArray: the parity check leaves alone a range that no single disk explains", "[array]") {
  Group g(AnyMode());
  g.FillBuckets(12 * LoneStarArray::kUnit, 40);
  // Buckets 0 and 1 (hPG 0; vPG 0 and vPG 1) rot over the same bytes. With different errors,
  // hPG 0, vPG 0 and vPG 1 are wrong; with the same error hPG 0 adds up and only the two
  // columns are wrong, which no disk is in both of: either way two disks are wrong there.
  const bool same_error = GENERATE(false, true);
  const auto before = g.Images();
  g.Rot(0, 500000, test::RandomBytes(100, 41));
  g.Rot(1, 500000, test::RandomBytes(100, same_error ? 41 : 42));
  const auto rotted = g.Images();
  auto report = g.array->CheckParity({kDataStart, kDiskSize - kDataStart}, true);
  REQUIRE(report.ok());
  INFO(fmt::format("{}", fmt::join(report->mismatches, "\n")));
  const auto after = g.Images();
  for (uint32_t p = 0; p < g.geometry.disk_count(); p++) {
    INFO("position " << p);
    CHECK((after[p] == rotted[p]));  // nothing was written
  }
  REQUIRE(report->mismatches.size() == 1);
  CHECK_THAT(report->mismatches[0], Catch::Contains(BlockBytes(500000)));
  CHECK_THAT(report->mismatches[0], Catch::Contains("vPG 0 (disks 10, 14, 18, 22)"));
  CHECK_THAT(report->mismatches[0], Catch::Contains("vPG 1 (disks 11, 15, 19, 23)"));
  CHECK_THAT(report->mismatches[0], Catch::Contains("ambiguous"));
  CHECK(report->repaired == 0);
  // The next check finds it again: it was not made to add up.
  auto again = g.array->CheckParity({kDataStart, kDiskSize - kDataStart}, false);
  REQUIRE(again.ok());
  CHECK(again->mismatches.size() == 1);
  // Once one of the two is right again (the chunk scrub rewrote it), the other is repaired.
  g.Rot(0, 500000, test::RandomBytes(100, 41));
  auto repaired = g.array->CheckParity({kDataStart, kDiskSize - kDataStart}, true);
  REQUIRE(repaired.ok());
  CheckRepaired(g, before, before, {});
  CHECK(repaired->buckets_rebuilt == 1);
}

TEST_CASE("LoneStarArray: the parity check pins a rotted bucket on it only where a lost disk leaves no doubt",
          "[array]") {
  Group g(AnyMode());
  g.FillBuckets(12 * LoneStarArray::kUnit, 50);
  // Bucket 3 (hPG 1, vPG 3) rots while a disk is lost. Disk 4 takes hPG 1 out of the check:
  // vPG 3 alone is wrong, which bucket 3 explains as well as the vP of column 3 does, so it
  // is left alone. The vP of column 3 takes vPG 3 out: hPG 1 alone is wrong, and bucket 3 is
  // its only member in no group that adds up.
  const uint32_t bucket = 3;
  const uint32_t lost = GENERATE(4u, 15u);
  g.Open(false, {lost});
  const auto before = g.Images();
  g.Rot(bucket, 500000, test::RandomBytes(100, 51));
  const auto rotted = g.Images();
  auto report = g.array->CheckParity({kDataStart, kDiskSize - kDataStart}, true);
  REQUIRE(report.ok());
  INFO(fmt::format("{}", fmt::join(report->mismatches, "\n")));
  REQUIRE(report->mismatches.size() == 1);
  if (lost == 4) {
    const auto after = g.Images();
    for (uint32_t p = 0; p < g.geometry.disk_count(); p++) {
      INFO("position " << p);
      CHECK((after[p] == rotted[p]));  // nothing was written
    }
    CHECK_THAT(report->mismatches[0], Catch::Contains("ambiguous"));
    CHECK_THAT(report->mismatches[0], Catch::Contains("out of service"));
    CHECK(report->repaired == 0);
  } else {
    CheckRepaired(g, before, rotted, {bucket});
    CHECK_THAT(report->mismatches[0], Catch::Contains(fmt::format("{} of disk {} (data)", BlockBytes(500000),
                                                                  kFirstDisk + bucket)));
    CHECK(report->buckets_rebuilt == 1);
  }
}

TEST_CASE("LoneStarArray: a new group reads nothing past what it wrote on a disk", "[array]") {
  constexpr uint64_t kBig = 200 << 20;  // sparse: three steps of high-water mark
  Group g(ArrayWriteMode::kSerialized, kBig);
  g.observer.Clear();
  g.CheckParityClean();  // zeros are their own parity
  g.CheckBuckets();
  CHECK(g.observer.reads.empty());
  // A write into fresh space reads nothing: the bucket's old bytes and its parity are zeros.
  auto data = test::RandomBytes(500000, 9);
  REQUIRE(g.array->Write(0, 1 << 20, data).ok());
  REQUIRE(g.array->Sync(0).ok());
  std::copy(data.begin(), data.end(), g.expected[0].begin() + ((1 << 20) - kDataStart));
  CHECK(g.observer.reads.empty());
  CHECK(g.observer.writes.size() == 4);
  g.Open();  // the marks are durable: a reopened group still reads nothing past them
  g.observer.Clear();
  std::vector<uint8_t> past(300000);
  REQUIRE(g.array->Read(0, 150 << 20, past).ok());
  CHECK(std::all_of(past.begin(), past.end(), [](uint8_t b) { return b == 0; }));
  CHECK(g.observer.reads.empty());
  g.CheckBuckets();
  g.CheckParityClean();
  // A write past a mark raises it; what lies between reads back as written.
  auto late = test::RandomBytes(100000, 10);
  REQUIRE(g.array->Write(0, (150 << 20) + 5000, late).ok());
  REQUIRE(g.array->Sync(0).ok());
  std::copy(late.begin(), late.end(), g.expected[0].begin() + ((150 << 20) + 5000 - kDataStart));
  g.Open();
  g.CheckBuckets();
  g.CheckParityClean();
}

TEST_CASE("LoneStarArray: a rebuild reads only as far as the group wrote", "[array]") {
  constexpr uint64_t kBig = 200 << 20;
  Group g(ArrayWriteMode::kSerialized, kBig);
  for (auto [bucket, offset] : {std::pair<uint32_t, uint64_t>{1, kDataStart}, {0, 10 << 20}}) {
    auto data = test::RandomBytes(1 << 20, bucket + 12);
    REQUIRE(g.array->Write(bucket, offset, data).ok());
    REQUIRE(g.array->Sync(bucket).ok());
    std::copy(data.begin(), data.end(), g.expected[bucket].begin() + (offset - kDataStart));
  }
  g.Open(false, {}, {1});
  uint64_t before = g.array->io_totals().disk_bytes_read;
  for (int steps = 0; *g.array->RebuildStep(64 << 20) > 0; steps++) REQUIRE(steps < 10);
  uint64_t read = g.array->io_totals().disk_bytes_read - before;
  // The two survivors of its hPG (bucket 0, hP 2) up to where their data ends (11 MiB): not
  // to their marks (a 68 MiB step), nor 200 MiB each.
  CHECK(read > 0);
  CHECK(read <= 2 * ((11 << 20) + LoneStarArray::kUnit));
  g.Open();
  g.CheckBuckets();
  g.CheckParityClean();
}

TEST_CASE("LoneStarArray: delayed mode's background flush waits for the writes to pause", "[array]") {
  Group g(ArrayWriteMode::kDelayed);
  g.delta_cache = 8 * LoneStarArray::kUnit;
  g.Open();
  uint32_t bucket = g.geometry.data_disks().front();
  auto data = test::RandomBytes(10 * LoneStarArray::kUnit, 7);  // past the cache, not twice past it
  auto written_at = std::chrono::steady_clock::now();
  REQUIRE(g.array->Write(bucket, kDataStart, data).ok());
  REQUIRE(g.array->Sync(bucket).ok());
  std::copy(data.begin(), data.end(), g.expected[bucket].begin());
  for (int i = 0; i < 1000 && g.array->pending_delta_bytes() > g.delta_cache; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(g.array->pending_delta_bytes() <= g.delta_cache);
  CHECK(std::chrono::steady_clock::now() - written_at >= LoneStarArray::kQuietBeforeFlush);
  g.CheckBuckets();
  g.CheckParityClean();
}

TEST_CASE("LoneStarArray: delayed mode flushes its parity in the background past the delta cache", "[array]") {
  Group g(ArrayWriteMode::kDelayed);
  g.delta_cache = 4 * LoneStarArray::kUnit;
  g.Open();
  g.WriteRandom(12, 13);  // each synced: 12 to 36 units of deltas, well past the cache
  for (int i = 0; i < 1000 && g.array->pending_delta_bytes() > g.delta_cache; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(g.array->pending_delta_bytes() <= g.delta_cache);  // with no FlushParity called
  g.CheckParityClean();
  g.array.reset();  // a clean close flushes the rest
  auto state = PromiseJournal::Inspect(g.tmp / "cold.journal", "test/cold");
  REQUIRE(state.ok());
  CHECK(state->open.empty());
}

TEST_CASE("LoneStarArray: a bucket sync that fails keeps its promises for the next one, and its ranges are rebuilt",
          "[array]") {
  Group g(GENERATE(ArrayWriteMode::kSerialized, ArrayWriteMode::kDirect, ArrayWriteMode::kDelayed));
  const uint32_t bucket = g.geometry.data_disks()[3];
  auto data = test::RandomBytes(100000, 5);
  REQUIRE(g.array->Write(bucket, kDataStart + 5000, data).ok());
  std::copy(data.begin(), data.end(), g.expected[bucket].begin() + 5000);
  g.fail_next_sync[bucket] = true;
  CHECK_FALSE(g.array->Sync(bucket).ok());
  // A failed fsync may drop the pages it did not write, and the next one succeed: the bucket
  // holds what it held before (zeros), and the parity must give the data back.
  g.Rot(bucket, kDataStart + 5000, data);
  CHECK(g.array->defects().at(bucket).Overlaps({kDataStart + 5000, data.size()}));
  REQUIRE(g.array->Sync(bucket).ok());  // acknowledged now
  g.CheckBuckets();  // the range is read through its parity until rebuilt
  g.RebuildAll();
  CHECK(g.array->defects().empty());
  g.array.reset();
  g.Open();  // nothing is left open for recovery to roll back
  g.CheckBuckets();
  g.CheckParityClean();
}

TEST_CASE("LoneStarArray: a parity sync that fails during the flush leaves its ranges to be rebuilt", "[array]") {
  Group g(ArrayWriteMode::kDelayed);
  const uint32_t bucket = g.geometry.data_disks()[3];
  auto data = test::RandomBytes(100000, 6);
  REQUIRE(g.array->Write(bucket, kDataStart + 5000, data).ok());
  REQUIRE(g.array->Sync(bucket).ok());
  std::copy(data.begin(), data.end(), g.expected[bucket].begin() + 5000);
  const uint32_t hp = g.geometry.WriteSet(bucket)[1];
  g.fail_next_sync[hp] = true;  // what was written there may not be on the disk
  REQUIRE(g.array->FlushParity().ok());
  CHECK(g.array->defects().at(hp).bytes() == 2 * LoneStarArray::kUnit);
  g.RebuildAll();
  g.CheckParityClean();
  g.CheckBuckets();
}

TEST_CASE("LoneStarArray: a Sync of a bucket returns once the promises another Sync took are durable", "[array]") {
  Group g(GENERATE(ArrayWriteMode::kSerialized, ArrayWriteMode::kDirect));
  const uint32_t bucket = g.geometry.data_disks()[3];
  std::atomic<bool> first_done{false};
  std::future<Status> second;
  bool second_returned_early = false;
  g.observer.also = [&](uint32_t disk, ArrayIoObserver::Access access) {
    // The first Sync is syncing the bucket: a second one starts and must wait for it. In
    // direct mode the hook comes first from the write's parity update, before any Sync.
    if (disk != kFirstDisk + bucket || access != ArrayIoObserver::Access::kSync || second.valid()) return;
    second = std::async(std::launch::async, [&] { return g.array->Sync(bucket); });
    second_returned_early = second.wait_for(std::chrono::milliseconds(300)) == std::future_status::ready &&
                            !first_done;
  };
  auto data = test::RandomBytes(100000, 7);
  REQUIRE(g.array->Write(bucket, kDataStart + 5000, data).ok());
  std::copy(data.begin(), data.end(), g.expected[bucket].begin() + 5000);
  REQUIRE(g.array->Sync(bucket).ok());
  first_done = true;
  g.observer.also = nullptr;
  REQUIRE(second.valid());
  CHECK(second.get().ok());
  CHECK_FALSE(second_returned_early);
  g.array.reset();
  g.Open();
  g.CheckBuckets();
  g.CheckParityClean();
}

TEST_CASE("LoneStarArray: direct mode: a Sync during a write's parity update leaves that promise to a later Sync",
          "[array]") {
  Group g(ArrayWriteMode::kDirect);
  const uint32_t bucket = g.geometry.data_disks()[3];
  const uint32_t hp = g.geometry.WriteSet(bucket)[1];
  bool synced_meanwhile = false;
  g.observer.also = [&](uint32_t disk, ArrayIoObserver::Access access) {
    if (disk != kFirstDisk + hp || access != ArrayIoObserver::Access::kWrite || synced_meanwhile) return;
    synced_meanwhile = true;
    CHECK(g.array->Sync(bucket).ok());  // the promise is not this Sync's yet: its parity is being written
  };
  auto data = test::RandomBytes(100000, 8);
  REQUIRE(g.array->Write(bucket, kDataStart + 5000, data).ok());
  g.observer.also = nullptr;
  REQUIRE(synced_meanwhile);
  std::copy(data.begin(), data.end(), g.expected[bucket].begin() + 5000);
  REQUIRE(g.array->Sync(bucket).ok());
  g.array.reset();
  g.Open();
  g.CheckBuckets();
  g.CheckParityClean();
}
