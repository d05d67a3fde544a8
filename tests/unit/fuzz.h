// Shared pieces of the "[fuzz]" Catch2 cases: a seeded RNG, an iteration budget and a byte mutator.
//
//   TEST_CASE("Thing: fuzzed input never crashes", "[thing][fuzz]") {
//     test::Fuzz fuzz("thing", 20000);            // name, iterations when CAIRN_FUZZ_ITERATIONS is unset
//     while (fuzz.Next()) {
//       std::string input = valid_input;
//       fuzz.Mutate(input);                       // or fuzz.Mutate(input, {"token", ...}) with a dictionary
//       ... parse it, CHECK what must hold ...
//     }
//     CHECK(rejected > fuzz.iterations() / 2);    // counts that scale with the iterations actually run
//   }
//
// Environment (tests/run --asan sets all three for a longer run):
//   CAIRN_FUZZ_SEED=N        seed of every fuzz case (default: a fixed seed derived from the case's name)
//   CAIRN_FUZZ_ITERATIONS=N  iterations of every fuzz case (default: the case's own)
//   CAIRN_FUZZ_SECONDS=S     stop each case after S seconds even if iterations remain (default: no limit)
// The seed is reported with any failed CHECK/REQUIRE of the case; the same CAIRN_FUZZ_SEED and at
// least as many iterations replay the same inputs (for a crash, tests/run --asan prints the seed).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::test {

class Fuzz {
 public:
  Fuzz(std::string_view name, uint64_t default_iterations)
      : seed_(EnvNumber("CAIRN_FUZZ_SEED", NameSeed(name))),
        limit_(EnvNumber("CAIRN_FUZZ_ITERATIONS", default_iterations)),
        seconds_(EnvNumber("CAIRN_FUZZ_SECONDS", 0)),
        rng_(seed_),
        start_(std::chrono::steady_clock::now()),
        seed_message_(Catch::MessageBuilder("fuzz", CATCH_INTERNAL_LINEINFO, Catch::ResultWas::Info)
                      << "fuzz " << name << ": CAIRN_FUZZ_SEED=" << seed_ << ", " << limit_ << " iterations") {}

  // True while another iteration should run: fewer than the budget so far and within the time bound.
  bool Next() {
    if (done_ >= limit_) return false;
    if (seconds_ > 0 && std::chrono::steady_clock::now() - start_ >= std::chrono::seconds(seconds_)) return false;
    done_++;
    return true;
  }

  // Iterations started so far (after the loop: how many ran).
  uint64_t iterations() const { return done_; }
  uint64_t seed() const { return seed_; }

  // A uniform number in [0, n); 0 when n is 0.
  uint64_t Uniform(uint64_t n) { return n == 0 ? 0 : std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }
  std::mt19937_64& rng() { return rng_; }

  // Applies 1-4 random mutations to `data` (std::string or std::vector<uint8_t>): flip a bit, insert or
  // delete bytes, splice a copy of one range over another, write an interesting value (0, 1, -1,
  // INT8/16/32/64 extremes, little-endian as on disk), insert a long run of one byte, or insert a word
  // of `dictionary`.
  template <typename Bytes>
  void Mutate(Bytes& data, const std::vector<std::string>& dictionary = {}) {
    for (uint64_t n = 1 + Uniform(4); n > 0; n--) MutateOnce(data, dictionary);
  }

 private:
  using Byte = unsigned char;

  template <typename Bytes>
  void MutateOnce(Bytes& data, const std::vector<std::string>& dictionary) {
    using Element = typename Bytes::value_type;
    static_assert(sizeof(Element) == 1, "Fuzz::Mutate works on byte strings");
    const size_t at = Uniform(data.size() + 1);  // a position, size() included (append)
    switch (Uniform(dictionary.empty() ? 6 : 7)) {
      case 0:  // flip a bit
        if (!data.empty()) data[at % data.size()] ^= static_cast<Element>(1u << Uniform(8));
        break;
      case 1:  // insert a random byte
        data.insert(data.begin() + at, static_cast<Element>(Uniform(256)));
        break;
      case 2:  // delete up to 8 bytes
        data.erase(data.begin() + at, data.begin() + std::min(data.size(), at + 1 + Uniform(8)));
        break;
      case 3: {  // splice: copy a range of the input over (or into) another place
        if (data.empty()) break;
        const size_t from = Uniform(data.size());
        const size_t length = 1 + Uniform(data.size() - from);
        const Bytes piece(data.begin() + from, data.begin() + from + length);
        if (Uniform(2) == 0) {
          data.insert(data.begin() + at, piece.begin(), piece.end());
        } else {
          for (size_t i = 0; i < length && at + i < data.size(); i++) data[at + i] = piece[i];
        }
        break;
      }
      case 4: {  // an interesting value, overwriting bytes at `at` (extending the input at its end)
        static constexpr uint64_t kValues[] = {0,
                                               1,
                                               ~uint64_t{0},
                                               0x7F,
                                               0x80,
                                               0xFF,
                                               0x7FFF,
                                               0x8000,
                                               0xFFFF,
                                               0x7FFFFFFF,
                                               0x80000000,
                                               0xFFFFFFFF,
                                               uint64_t{std::numeric_limits<int64_t>::max()},
                                               uint64_t{1} << 63};
        const uint64_t value = kValues[Uniform(std::size(kValues))];
        const size_t width = size_t{1} << Uniform(4);  // 1, 2, 4 or 8 bytes
        if (data.size() < at + width) data.resize(at + width);
        for (size_t i = 0; i < width; i++) data[at + i] = static_cast<Element>(static_cast<Byte>(value >> (8 * i)));
        break;
      }
      case 5: {  // a long run of one byte (0, 0xFF or random), 16 B to 16 KiB
        const Element byte = static_cast<Element>(Uniform(3) == 0 ? Uniform(256) : (Uniform(2) ? 0xFF : 0));
        data.insert(data.begin() + at, size_t{16} << Uniform(11), byte);
        break;
      }
      default: {  // a word of the input's grammar
        const std::string& word = dictionary[Uniform(dictionary.size())];
        data.insert(data.begin() + at, word.begin(), word.end());
        break;
      }
    }
  }

  static uint64_t EnvNumber(const char* name, uint64_t fallback) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') return fallback;
    char* end = nullptr;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (*end != '\0') FAIL(name << " must be a decimal number, not \"" << text << "\"");
    return value;
  }

  static uint64_t NameSeed(std::string_view name) {  // FNV-1a: stable across runs and machines
    uint64_t hash = 0xcbf29ce484222325;
    for (char c : name) hash = (hash ^ static_cast<Byte>(c)) * 0x100000001b3;
    return hash;
  }

  const uint64_t seed_;
  const uint64_t limit_;
  const uint64_t seconds_;
  std::mt19937_64 rng_;
  const std::chrono::steady_clock::time_point start_;
  uint64_t done_ = 0;
  Catch::ScopedMessage seed_message_;  // reported with every failure of the case
};

}  // namespace cairn::test
