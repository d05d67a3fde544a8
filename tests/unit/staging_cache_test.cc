#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "cache/staging_cache.h"
#include "test_util.h"

using namespace cairn;

TEST_CASE("StagingCache: HasData finds data and holes without reading") {
  test::TempDir dir;
  StagingCache cache(dir.path());
  auto file = cache.Open(3);
  REQUIRE(file.ok());
  int fd = (*file)->fd();
  constexpr uint64_t kMiB = 1 << 20;
  REQUIRE(::ftruncate(fd, 1024 * kMiB) == 0);
  auto data = test::RandomBytes(10, 1);
  REQUIRE(StagingCache::WriteAt(fd, 8 * kMiB + 5, data).ok());
  auto has = [&](uint64_t offset, uint64_t length) {
    auto r = StagingCache::HasData(fd, offset, length);
    REQUIRE(r.ok());
    return *r;
  };
  CHECK_FALSE(has(0, 4 * kMiB));
  CHECK_FALSE(has(4 * kMiB, 4 * kMiB));
  CHECK(has(8 * kMiB, 4 * kMiB));
  CHECK(has(4 * kMiB, 4 * kMiB + 6));  // reaches the first byte of data
  CHECK_FALSE(has(12 * kMiB, 1000 * kMiB));
  CHECK_FALSE(has(2048 * kMiB, 4 * kMiB));  // past the end
}

TEST_CASE("StagingCache: Open shares a descriptor; Remove forgets it") {
  test::TempDir dir;
  StagingCache cache(dir.path());
  auto a = cache.Open(4);
  auto b = cache.Open(4);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK((*a)->fd() == (*b)->fd());
  uint8_t byte = 1;
  REQUIRE(StagingCache::WriteAt((*a)->fd(), 0, {&byte, 1}).ok());
  REQUIRE(cache.Remove(4).ok());
  auto c = cache.Open(4);  // the file anew, empty, not the removed one
  REQUIRE(c.ok());
  CHECK((*c)->fd() != (*a)->fd());
  uint8_t read = 7;
  REQUIRE(StagingCache::ReadAt((*c)->fd(), 0, {&read, 1}).ok());
  CHECK(read == 0);
}

TEST_CASE("StagingCache: a link put in the cache directory is never written through, nor a linked directory") {
  test::TempDir dir;
  std::filesystem::create_directory(dir / "cache");
  std::string outside = dir / "outside";
  {
    std::ofstream f(outside);
    f << "not the cache's";
  }
  // What the archive's owner, who owns the directory, could put there for the daemon (root).
  std::filesystem::create_symlink(outside, dir / "cache/5");
  REQUIRE(::link(outside.c_str(), (dir / "cache/6").c_str()) == 0);
  StagingCache cache(dir / "cache");
  for (uint64_t ino : {5, 6}) {
    CHECK_FALSE(cache.Open(ino).ok());
    CHECK_FALSE(cache.Truncate(ino, 0).ok());
    CHECK_FALSE(cache.PunchHole(ino, 0, 4096).ok());
  }
  CHECK(std::filesystem::file_size(outside) == 15);
  REQUIRE(cache.Remove(5).ok());  // the link goes, not what it points to
  CHECK(std::filesystem::exists(outside));
  CHECK(cache.Open(7).ok());  // its own files as ever
  std::filesystem::create_directory_symlink(dir / "cache", dir / "linked");
  StagingCache linked(dir / "linked");
  CHECK_FALSE(linked.Open(8).ok());
}

TEST_CASE("StagingCache: CutTo cuts a longer file and leaves a shorter one") {
  test::TempDir dir;
  StagingCache cache(dir.path());
  auto file = cache.Open(9);
  REQUIRE(file.ok());
  int fd = (*file)->fd();
  auto data = test::RandomBytes(100, 2);
  REQUIRE(StagingCache::WriteAt(fd, 0, data).ok());
  auto size = [&] {
    struct stat st;
    REQUIRE(::fstat(fd, &st) == 0);
    return static_cast<uint64_t>(st.st_size);
  };
  REQUIRE(StagingCache::CutTo(fd, 1000).ok());
  CHECK(size() == 100);
  REQUIRE(StagingCache::CutTo(fd, 40).ok());
  CHECK(size() == 40);
  REQUIRE(StagingCache::WriteAt(fd, 60, data).ok());
  std::vector<uint8_t> gap(20, 7);
  REQUIRE(StagingCache::ReadAt(fd, 40, gap).ok());
  CHECK(gap == std::vector<uint8_t>(20, 0));
}
