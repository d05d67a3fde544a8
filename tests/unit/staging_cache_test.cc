#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

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
