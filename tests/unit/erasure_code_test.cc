// Tests for ErasureCode: every erasure pattern of the common codes, random patterns of RS(120,24),
// parity bytes against an independent GF(2^8) computation, argument checks and the decode-plan cache.
#include <catch2/catch.hpp>

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "redundancy/erasure_code.h"
#include "test_util.h"

using namespace cairn;

namespace {

std::unique_ptr<ErasureCode> MakeCode(int k, int m) {
  auto code = ErasureCode::Create(k, m);
  REQUIRE(code.ok());
  return std::move(code).value();
}

// Pointers to the k + m chunks of a stripe stored as one buffer, data chunks first.
std::vector<uint8_t*> ChunksOf(std::vector<uint8_t>& stripe, size_t len) {
  std::vector<uint8_t*> chunks;
  for (size_t offset = 0; offset < stripe.size(); offset += len) chunks.push_back(&stripe[offset]);
  return chunks;
}

// A stripe of random data chunks followed by their parity.
std::vector<uint8_t> EncodedStripe(const ErasureCode& code, size_t len, uint32_t seed) {
  std::vector<uint8_t> stripe = test::RandomBytes(size_t(code.k() + code.m()) * len, seed);
  std::vector<uint8_t*> chunks = ChunksOf(stripe, len);
  code.Encode(len, chunks.data(), chunks.data() + code.k());
  return stripe;
}

// Overwrites the erased chunks of `work` with `garbage`, reconstructs them and tells whether the
// whole stripe equals `original` again.
bool WipeAndRebuild(const ErasureCode& code, size_t len, const std::vector<uint8_t>& original,
                    std::vector<uint8_t>& work, std::span<const int> erased, uint8_t garbage) {
  std::vector<uint8_t*> chunks = ChunksOf(work, len);
  for (int index : erased) std::memset(chunks[index], garbage, len);
  Status s = code.Reconstruct(len, chunks.data(), erased);
  return s.ok() && work == original;
}

// Calls fn(span of r ascending indexes) for every r-subset of 0..n-1.
template <typename Fn>
void ForEachCombination(int n, int r, Fn fn) {
  std::vector<int> c(r);
  std::iota(c.begin(), c.end(), 0);
  while (true) {
    fn(std::span<const int>(c));
    int i = r - 1;
    while (i >= 0 && c[i] == n - r + i) i--;
    if (i < 0) return;
    c[i]++;
    for (int j = i + 1; j < r; j++) c[j] = c[j - 1] + 1;
  }
}

uint64_t Binomial(int n, int r) {
  uint64_t result = 1;
  for (int i = 1; i <= r; i++) result = result * (n - r + i) / i;
  return result;
}

// GF(2^8) over x^8 + x^4 + x^3 + x^2 + 1 (0x11d), the field isa-l uses, written out independently.
uint8_t GfMul(uint8_t a, uint8_t b) {
  uint8_t product = 0;
  for (; b != 0; b >>= 1) {
    if (b & 1) product ^= a;
    a = (a & 0x80) ? uint8_t((a << 1) ^ 0x1d) : uint8_t(a << 1);
  }
  return product;
}

uint8_t GfInv(uint8_t a) {
  for (int x = 1; x < 256; x++) {
    if (GfMul(a, uint8_t(x)) == 1) return uint8_t(x);
  }
  return 0;
}

std::string Describe(std::span<const int> erased) { return fmt::format("{}", fmt::join(erased, ",")); }

}  // namespace

TEST_CASE("ErasureCode: every erasure pattern is rebuilt", "[ec]") {
  auto [k, m, len] = GENERATE(table<int, int, size_t>({
      {4, 2, 4096}, {6, 3, 4096}, {10, 4, 4096}, {20, 4, 4096}, {4, 2, 64}, {10, 4, 1001}, {6, 3, 40}}));
  CAPTURE(k, m, len);
  auto code = MakeCode(k, m);
  const std::vector<uint8_t> original = EncodedStripe(*code, len, 1234);
  std::vector<uint8_t> work = original;

  uint64_t patterns = 0;
  uint64_t expected = 0;
  int failures = 0;
  for (int r = 1; r <= m; r++) {
    expected += Binomial(k + m, r);
    ForEachCombination(k + m, r, [&](std::span<const int> erased) {
      if (!WipeAndRebuild(*code, len, original, work, erased, uint8_t(0xa5 ^ patterns))) {
        if (failures++ < 5) FAIL_CHECK("pattern " << Describe(erased) << " not rebuilt");
        work = original;
      }
      patterns++;
    });
  }
  CHECK(failures == 0);
  CHECK(patterns == expected);
  CHECK(code->cached_patterns() == std::min<uint64_t>(expected, ErasureCode::kMaxCachedPatterns));
}

TEST_CASE("ErasureCode: wide RS(120,24) rebuilds random patterns", "[ec]") {
  auto code = MakeCode(120, 24);
  constexpr size_t kLen = 1024;
  const std::vector<uint8_t> original = EncodedStripe(*code, kLen, 99);
  std::vector<uint8_t> work = original;
  std::mt19937 rng(7);
  std::vector<int> indexes(144);
  std::iota(indexes.begin(), indexes.end(), 0);
  int failures = 0;
  for (int trial = 0; trial < 200; trial++) {
    std::shuffle(indexes.begin(), indexes.end(), rng);
    int count = std::uniform_int_distribution<int>(1, 24)(rng);
    std::span<const int> erased(indexes.data(), count);
    if (!WipeAndRebuild(*code, kLen, original, work, erased, uint8_t(trial))) {
      if (failures++ < 5) FAIL_CHECK("pattern " << Describe(erased) << " not rebuilt");
      work = original;
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("ErasureCode: parity bytes follow the Cauchy generator", "[ec]") {
  SECTION("RS(2,1) of unit vectors gives the coefficients 1/2 and 1/3") {
    auto code = MakeCode(2, 1);
    uint8_t d0[2] = {1, 0};
    uint8_t d1[2] = {0, 1};
    uint8_t parity[2] = {};
    const uint8_t* data[] = {d0, d1};
    uint8_t* out[] = {parity};
    code->Encode(2, data, out);
    CHECK(parity[0] == 0x8e);  // 2 * 0x8e = 0x11c, which is 1 modulo 0x11d
    CHECK(parity[1] == 0xf4);  // 3 * 0xf4 = 2 * 0xf4 ^ 0xf4 = (0x1e8 ^ 0x11d) ^ 0xf4 = 0xf5 ^ 0xf4 = 1
  }
  SECTION("RS(3,2) of a fixed input") {
    // Coefficients: row 3 is 1/3, 1/2, 1/1 = f4 8e 01; row 4 is 1/4, 1/5, 1/6 = 47 a7 7a.
    auto code = MakeCode(3, 2);
    uint8_t d0[4] = {0x01, 0x02, 0x03, 0x04};
    uint8_t d1[4] = {0x10, 0x20, 0x30, 0x40};
    uint8_t d2[4] = {0xff, 0x00, 0x55, 0xaa};
    uint8_t p0[4] = {};
    uint8_t p1[4] = {};
    const uint8_t* data[] = {d0, d1, d2};
    uint8_t* out[] = {p0, p1};
    code->Encode(4, data, out);
    CHECK(std::vector<uint8_t>(p0, p0 + 4) == std::vector<uint8_t>{0x03, 0xe5, 0x4c, 0x7d});
    CHECK(std::vector<uint8_t>(p1, p1 + 4) == std::vector<uint8_t>{0x41, 0xd7, 0xa5, 0x80});
  }
  SECTION("random data, scalar and SIMD lengths, against a reference encoder") {
    auto [k, m, len] = GENERATE(table<int, int, size_t>({{3, 2, 5}, {3, 2, 200}, {10, 4, 5}, {20, 4, 4096}}));
    CAPTURE(k, m, len);
    auto code = MakeCode(k, m);
    const std::vector<uint8_t> stripe = EncodedStripe(*code, len, 42);
    std::vector<uint8_t> expected(stripe.begin(), stripe.begin() + size_t(k) * len);
    for (int i = k; i < k + m; i++) {
      std::vector<uint8_t> parity(len, 0);
      for (int j = 0; j < k; j++) {
        uint8_t coefficient = GfInv(uint8_t(i ^ j));
        for (size_t t = 0; t < len; t++) parity[t] ^= GfMul(coefficient, stripe[j * len + t]);
      }
      expected.insert(expected.end(), parity.begin(), parity.end());
    }
    CHECK(stripe == expected);
  }
}

TEST_CASE("ErasureCode: bad arguments are InvalidArgument", "[ec]") {
  for (auto [k, m] : {std::pair{0, 2}, {4, 0}, {129, 4}, {4, 33}, {-1, 2}}) {
    auto code = ErasureCode::Create(k, m);
    CAPTURE(k, m);
    REQUIRE_FALSE(code.ok());
    CHECK(code.status().code() == Status::Code::kInvalidArgument);
  }
  CHECK(ErasureCode::Create(1, 1).ok());
  CHECK(ErasureCode::Create(128, 32).ok());

  auto code = MakeCode(4, 2);
  const std::vector<uint8_t> original = EncodedStripe(*code, 64, 5);
  std::vector<uint8_t> work = original;
  std::vector<uint8_t*> chunks = ChunksOf(work, 64);
  auto reconstruct = [&](std::vector<int> erased) { return code->Reconstruct(64, chunks.data(), erased); };

  Status s = reconstruct({0, 1, 4});
  CHECK(s.code() == Status::Code::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("3 chunks erased, at most 2"));
  s = reconstruct({1, 1});
  CHECK(s.code() == Status::Code::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("chunk 1 is listed twice"));
  s = reconstruct({6});
  CHECK(s.code() == Status::Code::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("index 6 is outside 0..5"));
  s = reconstruct({-1});
  CHECK(s.code() == Status::Code::kInvalidArgument);
  s = code->Reconstruct(size_t(INT_MAX) + 1, chunks.data(), std::vector<int>{0});
  CHECK(s.code() == Status::Code::kInvalidArgument);
  CHECK(reconstruct({}).ok());
  CHECK(work == original);
  CHECK(code->cached_patterns() == 0);
}

TEST_CASE("ErasureCode: decode plans are cached per pattern", "[ec]") {
  auto code = MakeCode(10, 4);
  const std::vector<uint8_t> original = EncodedStripe(*code, 4096, 8);
  std::vector<uint8_t> work = original;
  CHECK(code->cached_patterns() == 0);

  CHECK(WipeAndRebuild(*code, 4096, original, work, std::vector<int>{2}, 0x11));
  CHECK(code->cached_patterns() == 1);
  CHECK(WipeAndRebuild(*code, 4096, original, work, std::vector<int>{2}, 0x22));
  CHECK(code->cached_patterns() == 1);
  CHECK(WipeAndRebuild(*code, 4096, original, work, std::vector<int>{12, 0, 5}, 0x33));
  CHECK(code->cached_patterns() == 2);
  CHECK(WipeAndRebuild(*code, 4096, original, work, std::vector<int>{5, 12, 0}, 0x44));  // same set
  CHECK(code->cached_patterns() == 2);

  // Past the bound the oldest plans are evicted; an evicted pattern is simply planned again.
  int failures = 0;
  ForEachCombination(14, 3, [&](std::span<const int> erased) {
    if (!WipeAndRebuild(*code, 4096, original, work, erased, 0x55)) failures++;
  });
  CHECK(failures == 0);
  CHECK(code->cached_patterns() == ErasureCode::kMaxCachedPatterns);
  CHECK(WipeAndRebuild(*code, 4096, original, work, std::vector<int>{2}, 0x66));
  CHECK(code->cached_patterns() == ErasureCode::kMaxCachedPatterns);
}

TEST_CASE("ErasureCode: concurrent reconstructs share one code", "[ec]") {
  auto code = MakeCode(10, 4);
  constexpr size_t kLen = 4096;
  const std::vector<uint8_t> original = EncodedStripe(*code, kLen, 3);
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> work = original;
      std::mt19937 rng(100 + t);
      std::vector<int> indexes(14);
      std::iota(indexes.begin(), indexes.end(), 0);
      for (int trial = 0; trial < 300; trial++) {
        std::shuffle(indexes.begin(), indexes.end(), rng);
        std::span<const int> erased(indexes.data(), 1 + trial % 4);
        if (!WipeAndRebuild(*code, kLen, original, work, erased, uint8_t(trial))) {
          failures[t]++;
          work = original;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(failures == std::vector<int>(4, 0));
  CHECK(code->cached_patterns() <= ErasureCode::kMaxCachedPatterns);
}
