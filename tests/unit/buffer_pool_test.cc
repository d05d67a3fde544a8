#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "util/buffer_pool.h"

using namespace cairn;

namespace {
constexpr size_t kMiB = 1 << 20;

std::vector<uint8_t> Filled(size_t size, uint8_t byte) { return std::vector<uint8_t>(size, byte); }
bool AllAre(const std::vector<uint8_t>& bytes, uint8_t byte) {
  return std::all_of(bytes.begin(), bytes.end(), [byte](uint8_t b) { return b == byte; });
}
}  // namespace

TEST_CASE("BufferPool: a buffer given back is taken again as it was, not zeroed") {
  BufferPool pool(kMiB, 16 * kMiB);
  auto given = Filled(4 * kMiB, 0xab);
  const uint8_t* storage = given.data();
  pool.Give(std::move(given));

  auto taken = pool.Take(4 * kMiB - 100);  // smaller: cut down, nothing written
  CHECK(taken.data() == storage);
  CHECK(taken.size() == 4 * kMiB - 100);
  CHECK(AllAre(taken, 0xab));

  pool.Give(std::move(taken));
  auto grown = pool.Take(4 * kMiB);  // back up to its capacity: only the added bytes are zeroed
  CHECK(grown.data() == storage);
  CHECK(std::all_of(grown.begin(), grown.end() - 100, [](uint8_t b) { return b == 0xab; }));
  CHECK(std::all_of(grown.end() - 100, grown.end(), [](uint8_t b) { return b == 0; }));

  auto fresh = pool.Take(4 * kMiB);  // the pool is empty again
  CHECK(fresh.data() != storage);
  CHECK(AllAre(fresh, 0));
}

TEST_CASE("BufferPool: Take prefers the smallest buffer that holds the size whole") {
  BufferPool pool(kMiB, 64 * kMiB);
  auto big = Filled(8 * kMiB, 1), fits = Filled(4 * kMiB, 2), short_one = Filled(3 * kMiB, 3);
  short_one.reserve(8 * kMiB);  // room enough, but its last MiB would have to be zeroed
  const uint8_t* fits_storage = fits.data();
  const uint8_t* big_storage = big.data();
  const uint8_t* short_storage = short_one.data();
  pool.Give(std::move(big));
  pool.Give(std::move(fits));
  pool.Give(std::move(short_one));

  auto first = pool.Take(4 * kMiB);
  CHECK(first.data() == fits_storage);
  CHECK(AllAre(first, 2));
  auto second = pool.Take(4 * kMiB);
  CHECK(second.data() == big_storage);
  CHECK(AllAre(second, 1));
  auto third = pool.Take(4 * kMiB);  // only the short one is left: its added MiB is zeroed
  CHECK(third.data() == short_storage);
  CHECK(std::count(third.begin(), third.end(), 3) == static_cast<std::ptrdiff_t>(3 * kMiB));
  CHECK(std::count(third.begin(), third.end(), 0) == static_cast<std::ptrdiff_t>(kMiB));
  pool.Give(std::move(first));
  auto larger = pool.Take(9 * kMiB);  // the one kept lacks the room: a fresh buffer, not it grown
  CHECK(larger.size() == 9 * kMiB);
  CHECK(AllAre(larger, 0));
}

TEST_CASE("BufferPool: a buffer more than twice the size asked for is not taken, and Clear frees all") {
  BufferPool pool(kMiB, 64 * kMiB);
  auto large = Filled(9 * kMiB, 5);
  const uint8_t* large_storage = large.data();
  pool.Give(std::move(large));
  auto small = pool.Take(4 * kMiB);  // the taker would keep all 9 MiB
  CHECK(small.data() != large_storage);
  CHECK(AllAre(small, 0));
  pool.Clear();
  CHECK(AllAre(pool.Take(8 * kMiB), 0));  // 9 MiB would do, but it is gone
}

TEST_CASE("BufferPool: small buffers and those past its bound are not kept") {
  BufferPool pool(kMiB, 6 * kMiB);
  auto small = Filled(kMiB / 2, 7);
  pool.Give(std::move(small));
  CHECK(AllAre(pool.Take(kMiB / 2), 0));  // small requests never come from the pool either

  auto first = Filled(4 * kMiB, 8), second = Filled(4 * kMiB, 9);
  const uint8_t* first_storage = first.data();
  pool.Give(std::move(first));
  pool.Give(std::move(second));  // 8 MiB would pass the 6 MiB bound: freed
  auto taken = pool.Take(4 * kMiB);
  CHECK(taken.data() == first_storage);
  CHECK(AllAre(pool.Take(4 * kMiB), 0));
}
