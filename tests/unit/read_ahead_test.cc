// Reads of evicted files load the extents after a sequential reader's position ahead, and
// only for a sequential reader: counted as disk reads, a random reader reads only the extents
// it touches, and two sequential readers at a time each read every extent once.
#include <catch2/catch.hpp>

#include <fcntl.h>

#include <chrono>
#include <thread>

#include "archive_fixture.h"
#include "fault_disk.h"
#include "fs_read.h"
#include "test_util.h"

using namespace cairn;

namespace {

using test::kSegment;
constexpr uint64_t kSegments = 24;

// Files of kSegments segments on the disks only, behind disks that count their reads.
struct ColdFiles : test::ArchiveFixture {
  test::IoCounts io;
  std::vector<std::vector<uint8_t>> data;
  std::vector<uint64_t> inos;
  int reads_per_extent = 0;

  explicit ColdFiles(int files) {
    for (int i = 0; i < files; i++) {
      data.push_back(test::RandomBytes(kSegments * kSegment, 40 + i));
      inos.push_back(WriteFile("f" + std::to_string(i), data.back()));
    }
    uint64_t one = WriteFile("one", test::RandomBytes(kSegment, 39));
    REQUIRE(fs->PersistAll().ok());
    REQUIRE(fs->EvictAll().ok());
    Close();  // and nothing of them stays in memory
    wrap_disk = [this](std::unique_ptr<Disk> disk, size_t i) -> std::unique_ptr<Disk> {
      return std::make_unique<test::IoCountDisk>(std::move(disk), io, i);
    };
    Open();
    io.Clear();
    CHECK(ReadFile(one, kSegment) == test::RandomBytes(kSegment, 39));  // one extent, nothing after it
    reads_per_extent = SettledReads();
    REQUIRE(reads_per_extent > 0);
    io.Clear();
  }
  int Reads() {
    std::lock_guard lock(io.mutex);
    int n = 0;
    for (const auto& [disk, count] : io.reads) n += count;
    return n;
  }
  // Loads started ahead finish on the transform pool: waits until the count stops moving.
  int SettledReads() {
    int now = Reads();
    for (int before = -1; before != now; now = Reads()) {
      before = now;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return now;
  }
  std::vector<uint8_t> Read(FileHandle* fh, uint64_t offset, size_t size) {
    auto bytes = test::ReadBytes(*fs, fh, offset, size);
    REQUIRE(bytes.ok());
    return *bytes;
  }
};

}  // namespace

TEST_CASE("Read-ahead: a random reader of an evicted file reads only the extents it touches") {
  ColdFiles f(1);
  auto fh = f.fs->Open(f.inos[0], O_RDONLY, Caller{});
  REQUIRE(fh.ok());
  // No read starts in the segment where the one before ended, nor in the one after it.
  const std::vector<uint64_t> segments{12, 3, 20, 7, 16, 10, 22, 5};
  for (uint64_t s : segments) {
    auto bytes = f.Read(*fh, s * kSegment + 100, 4096);
    CHECK(std::equal(bytes.begin(), bytes.end(), f.data[0].begin() + static_cast<std::ptrdiff_t>(s * kSegment + 100)));
  }
  f.fs->Release(*fh);
  CHECK(f.SettledReads() == static_cast<int>(segments.size()) * f.reads_per_extent);
}

TEST_CASE("Read-ahead: two sequential readers at a time read each extent of their files once") {
  ColdFiles f(2);
  auto a = f.fs->Open(f.inos[0], O_RDONLY, Caller{});
  auto b = f.fs->Open(f.inos[1], O_RDONLY, Caller{});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  std::vector<uint8_t> read_a, read_b;
  for (uint64_t offset = 0; offset < kSegments * kSegment; offset += 16 << 10) {
    auto piece_a = f.Read(*a, offset, 16 << 10);
    auto piece_b = f.Read(*b, offset, 16 << 10);
    read_a.insert(read_a.end(), piece_a.begin(), piece_a.end());
    read_b.insert(read_b.end(), piece_b.begin(), piece_b.end());
  }
  f.fs->Release(*a);
  f.fs->Release(*b);
  CHECK(read_a == f.data[0]);
  CHECK(read_b == f.data[1]);
  // Each extent once. A load started ahead may run late, when its pool thread gets the CPU
  // only after the reader went on and read the extent itself: two such are let pass. Readers
  // whose loads ahead pushed out each other's (before the read ones made room) read 8 to 76
  // extents twice.
  int reads = f.SettledReads();
  CHECK(reads >= 2 * static_cast<int>(kSegments) * f.reads_per_extent);
  CHECK(reads <= (2 * static_cast<int>(kSegments) + 2) * f.reads_per_extent);
}
