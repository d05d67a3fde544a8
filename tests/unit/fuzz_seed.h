// Seeds for the bounded fuzzers ("[fuzz]" test cases): CAIRN_FUZZ_SEED replays a run,
// otherwise a fresh seed; either way it is printed, so a failure can be replayed.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string_view>

#include <fmt/format.h>

namespace cairn::test {

inline uint64_t FuzzSeed(std::string_view fuzzer) {
  const char* fixed = std::getenv("CAIRN_FUZZ_SEED");
  uint64_t seed = fixed ? std::strtoull(fixed, nullptr, 0) : (uint64_t{std::random_device()()} << 32) ^ std::random_device()();
  fmt::print(stderr, "{}: seed {} (replay with CAIRN_FUZZ_SEED={})\n", fuzzer, seed, seed);
  return seed;
}

}  // namespace cairn::test
