#include <catch2/catch.hpp>

#include "store/space_allocator.h"

using namespace cairn;

TEST_CASE("SpaceAllocator: first fit, release coalesces, space is reused") {
  SpaceAllocator a(4096, 4096 * 11);  // 10 blocks
  CHECK(a.free_bytes() == 40960);
  auto x = a.Allocate(8192);
  auto y = a.Allocate(4096);
  auto z = a.Allocate(8192);
  REQUIRE((x && y && z));
  CHECK(*x == 4096);
  CHECK(*y == 12288);
  CHECK(*z == 16384);
  CHECK(a.free_bytes() == 20480);
  REQUIRE(a.Release(*y, 4096).ok());
  CHECK(*a.Allocate(4096) == 12288);  // the hole is reused
  REQUIRE(a.Release(12288, 4096).ok());
  REQUIRE(a.Release(*x, 8192).ok());
  CHECK(a.fragments() == 2);  // [4096, 16384) merged; tail separate
  CHECK(*a.Allocate(12288) == 4096);
  CHECK_FALSE(a.Allocate(1 << 20));
}

TEST_CASE("SpaceAllocator: double free and bad ranges are refused") {
  SpaceAllocator a(4096, 4096 * 5);
  auto x = a.Allocate(4096);
  REQUIRE(a.Release(*x, 4096).ok());
  CHECK(a.Release(*x, 4096).IsCorruption());
  CHECK_FALSE(a.Release(0, 4096).ok());
  CHECK_FALSE(a.Release(4096 * 5, 4096).ok());
  CHECK(a.free_bytes() == 4096 * 4);
}

TEST_CASE("SpaceAllocator: MarkUsed rebuilds state and detects overlap") {
  SpaceAllocator a(4096, 4096 * 9);
  REQUIRE(a.MarkUsed(8192, 8192).ok());
  CHECK(a.MarkUsed(12288, 4096).IsCorruption());  // overlaps the first
  CHECK_FALSE(a.MarkUsed(4096 * 8, 8192).ok());    // past the end
  CHECK(*a.Allocate(4096) == 4096);
  CHECK(*a.Allocate(8192) == 16384);
}

TEST_CASE("SpaceAllocator: a range whose end wraps around is refused, and frees nothing") {
  SpaceAllocator a(4096, 1 << 20);
  REQUIRE(a.MarkUsed(4096, 8192).ok());
  const uint64_t wrapping = UINT64_MAX - 4095;  // + 8192 wraps to 4096
  CHECK(a.MarkUsed(wrapping, 8192).IsCorruption());
  CHECK_FALSE(a.Release(wrapping, 8192).ok());
  CHECK(a.MarkUsed(4096, 8192).IsCorruption());  // still in use
  CHECK(a.free_bytes() == (1 << 20) - 4096 - 8192);
}

TEST_CASE("SpaceAllocator: the free bytes ranges of a length can take are each range's whole multiples") {
  SpaceAllocator a(0, 100 * 4096);
  CHECK(a.FreeBytesIn(30 * 4096) == 90 * 4096);
  auto first = a.Allocate(10 * 4096);  // [0, 10)
  auto middle = a.Allocate(35 * 4096);  // [10, 45)
  REQUIRE((first && middle));
  REQUIRE(a.Release(*first, 10 * 4096).ok());  // free: [0, 10) and [45, 100)
  CHECK(a.free_bytes() == 65 * 4096);
  CHECK(a.fragments() == 2);
  CHECK(a.FreeBytesIn(4096) == 65 * 4096);
  CHECK(a.FreeBytesIn(10 * 4096) == 60 * 4096);  // 1 in the first range, 5 in the second
  CHECK(a.FreeBytesIn(20 * 4096) == 40 * 4096);  // none in the first range
  CHECK(a.FreeBytesIn(56 * 4096) == 0);
  CHECK(a.FreeBytesIn(0) == 65 * 4096);
}
