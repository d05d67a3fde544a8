// Reads of evicted files load the extents after a sequential reader's position ahead, and
// only for a sequential reader: counted as disk reads, a random reader reads only the extents
// it touches, and two sequential readers at a time each read every extent once.
#include <catch2/catch.hpp>

#include <fcntl.h>


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

  // `read_ahead`: the kernel's read-ahead window the archive is set for; reads that far behind
  // the furthest one still count as sequential.
  explicit ColdFiles(int files, uint64_t read_ahead = 0)
      : ArchiveFixture([read_ahead](MkfsOptions& mkfs) { mkfs.options.read_ahead = read_ahead; }) {
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
  // The disk reads so far, the loads started ahead over.
  int SettledReads() {
    fs->WaitForLoadsAhead();
    return Reads();
  }
  // A read, and the loads it started ahead (so that what a test counts does not depend on
  // when the transform pool gets to them).
  std::vector<uint8_t> Read(FileHandle* fh, uint64_t offset, size_t size) {
    auto bytes = test::ReadBytes(*fs, fh, offset, size);
    REQUIRE(bytes.ok());
    fs->WaitForLoadsAhead();
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
  // Each extent once: readers whose loads ahead pushed out each other's (before the extents
  // read to their end made room) read 8 to 76 extents twice.
  CHECK(f.SettledReads() == 2 * static_cast<int>(kSegments) * f.reads_per_extent);
}

TEST_CASE("Read-ahead: reads that come out of order within the kernel's read-ahead are sequential") {
  ColdFiles f(1, 1 << 20);
  auto fh = f.fs->Open(f.inos[0], O_RDONLY, Caller{});
  REQUIRE(fh.ok());
  constexpr uint64_t kRead = 128 << 10;  // two segments a read, in pairs swapped: 1 0 3 2 5 4 ...
  std::vector<uint8_t> read(kSegments * kSegment);
  bool ahead_seen = false;
  for (uint64_t pair = 0; pair < kSegments * kSegment / (2 * kRead); pair++) {
    for (uint64_t k : {2 * pair + 1, 2 * pair}) {
      auto bytes = f.Read(*fh, k * kRead, kRead);
      std::copy(bytes.begin(), bytes.end(), read.begin() + static_cast<std::ptrdiff_t>(k * kRead));
      // Past the furthest read, extents were read before any reader asked for them.
      uint64_t furthest_segment = (2 * pair + 2) * kRead / kSegment;
      if (f.Reads() > static_cast<int>(furthest_segment) * f.reads_per_extent) ahead_seen = true;
    }
  }
  f.fs->Release(*fh);
  CHECK(read == f.data[0]);
  CHECK(ahead_seen);
  CHECK(f.SettledReads() == static_cast<int>(kSegments) * f.reads_per_extent);
}

TEST_CASE("Read-ahead: a small file read to its end leaves its pack to the next small file in it") {
  ColdFiles f(1);  // and small files, packed together into one extent (pack_threshold 8K)
  f.Close();
  f.wrap_disk = {};
  f.Open();
  std::vector<uint64_t> small;
  for (int i = 0; i < 4; i++) small.push_back(f.WriteFile("s" + std::to_string(i), test::RandomBytes(4096, 60 + i)));
  REQUIRE(f.fs->PersistAll().ok());
  REQUIRE(f.fs->EvictAll().ok());
  f.Close();
  f.wrap_disk = [&f](std::unique_ptr<Disk> disk, size_t i) -> std::unique_ptr<Disk> {
    return std::make_unique<test::IoCountDisk>(std::move(disk), f.io, i);
  };
  f.Open();
  auto large = f.fs->Open(f.inos[0], O_RDONLY, Caller{});
  REQUIRE(large.ok());
  for (uint64_t s = 0; s < 16; s++) f.Read(*large, s * kSegment, kSegment);  // the read buffer full
  CHECK(f.ReadFile(small[0], 4096) == test::RandomBytes(4096, 60));
  f.Read(*large, 16 * kSegment, 4096);  // buffers another extent of the large file, ahead of it
  int before = f.SettledReads();
  CHECK(f.ReadFile(small[1], 4096) == test::RandomBytes(4096, 61));  // from the pack still buffered
  CHECK(f.SettledReads() == before);
  f.fs->Release(*large);
}

TEST_CASE("Read-ahead: a reader that starts over from the beginning of its file reads ahead again") {
  ColdFiles f(1);
  auto fh = f.fs->Open(f.inos[0], O_RDONLY, Caller{});
  REQUIRE(fh.ok());
  // The second half of the file, then the whole of it from the start (none of the first half's
  // extents were read yet).
  for (uint64_t s = kSegments / 2; s < kSegments; s++) f.Read(*fh, s * kSegment, kSegment);
  const int before = f.SettledReads();
  std::vector<uint8_t> read = f.Read(*fh, 0, kSegment);
  // Those after the first were read ahead, as for a handle that had just been opened: before,
  // a read that far behind the furthest one counted as random.
  CHECK(f.SettledReads() - before > f.reads_per_extent);
  for (uint64_t s = 1; s < kSegments; s++) {
    auto bytes = f.Read(*fh, s * kSegment, kSegment);
    read.insert(read.end(), bytes.begin(), bytes.end());
  }
  f.fs->Release(*fh);
  CHECK(read == f.data[0]);
  CHECK(f.SettledReads() - before <= static_cast<int>(kSegments) * f.reads_per_extent);  // none twice
}
