// Bounded fuzzer of the user.cairn.* vocabulary: mutated valid values, random bytes and
// values as long as setxattr allows (64 KiB) for every key, and for trusted.cairn.lock. A value is refused with InvalidArgument or
// NotSupported naming its key, or accepted with a canonical spelling that is itself
// accepted unchanged, holds no space or control character (policy stamps are
// space-separated key=value words) and means what the key's own parser expects.
#include <catch2/catch.hpp>

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend/extent_format.h"
#include "fuzz.h"
#include "policy/vocabulary.h"
#include "redundancy/checksum.h"
#include "redundancy/intra_disk.h"
#include "redundancy/striping.h"

using namespace cairn;

namespace {

constexpr int kInputs = 20000;

const std::vector<std::string>& ValidValues(PolicyKey key) {
  static const std::vector<std::vector<std::string>> values = {
      {"none", "mirror-2", "mirror-8", "rs-4-2", "rs-128-32", "rs-1-1", "2d"},                // raid
      {"none", "spc-16-1", "spc-16-1-s8", "spc-16-1-s64"},                                   // idr
      {"off", "lz4", "zstd", "zstd-19", "auto"},                                             // compress
      {"off", "aes-256-gcm"},                                                                // encrypt
      {"mykey", "k.2_x-y"},                                                                  // key
      {"crc32c", "xxh3", "sha256", "blake3"},                                                // checksum
      {"group=a", "tier=fast,pack=t1", "group=x tier=y"},                                    // placement
      {"4M", "64K", "1G", "65536", "1.5M", "256KiB"},                                        // segment_size
      {"none", ""},                                                                          // plugins
      {"cold", "a.b-c_d"},                                                                   // policy
  };
  return values[static_cast<size_t>(key)];
}

// Words of the vocabulary's grammar and awkward numbers, for the mutator's dictionary.
const std::vector<std::string> kWords = {"-", "=", ",", " ", "none", "mirror-", "rs-", "spc-16-1", "-s", "zstd-",
                                         "group=", "tier=", "pack=", "K", "M", "G", "T", "KiB", ".5", "0", "1",
                                         "4095", "4096", "65536", "4294967297", "18446744073709551616", "\x1b"};

std::string RandomValue(test::Fuzz& fuzz) {
  std::string value(fuzz.Uniform(40), '\0');
  for (char& c : value) c = static_cast<char>(fuzz.Uniform(256));
  return value;
}

bool Printable(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// What the key's canonical value must mean to the code that uses it.
void ExpectUsable(PolicyKey key, const std::string& canonical) {
  INFO(fmt::format("{}={}", PolicyKeyName(key), canonical));
  switch (key) {
    case PolicyKey::kRaid: {
      auto r = ParseRedundancy(canonical, "none");
      REQUIRE(r.ok());
      CHECK(CheckRedundancy(*r).ok());
      break;
    }
    case PolicyKey::kIdr: {
      auto idr = ParseIdr(canonical);
      REQUIRE(idr.ok());
      auto r = ParseRedundancy("none", canonical);
      REQUIRE(r.ok());
      CHECK(CheckRedundancy(*r).ok());
      break;
    }
    case PolicyKey::kChecksum: CHECK(ParseChecksum(canonical).ok()); break;
    case PolicyKey::kSegmentSize: {
      uint64_t size = 0;
      auto [ptr, ec] = std::from_chars(canonical.data(), canonical.data() + canonical.size(), size);
      REQUIRE((ec == std::errc() && ptr == canonical.data() + canonical.size()));
      CHECK(size >= 65536);
      CHECK(size <= kMaxSegmentSize);
      CHECK(size % 4096 == 0);
      break;
    }
    default: break;
  }
}

}  // namespace

TEST_CASE("Fuzz: user.cairn.* values are refused naming the key or accepted canonically", "[fuzz]") {
  test::Fuzz fuzz("xattr value", kInputs);
  uint64_t accepted = 0;
  while (fuzz.Next()) {
    PolicyKey key = kAllPolicyKeys[fuzz.Uniform(std::size(kAllPolicyKeys))];
    const auto& valid = ValidValues(key);
    std::string value = valid[fuzz.Uniform(valid.size())];
    if (fuzz.Uniform(8) == 0) value = RandomValue(fuzz);
    else fuzz.Mutate(value, kWords);
    if (fuzz.Uniform(16) == 0) {  // as long as setxattr allows: a run of digits (or letters) inside a valid shape
      size_t at = value.find_first_of("0123456789");
      if (at == std::string::npos) at = value.find_first_of("abcdefghijklmnopqrstuvwxyz");
      value.insert(at == std::string::npos ? value.size() : at, 60000, at < value.size() ? value[at] : '7');
    }
    auto canonical = CanonicalPolicyValue(key, value);
    if (!canonical.ok()) {
      const Status& st = canonical.status();
      INFO(st.ToString());
      CHECK((st.code() == Status::Code::kInvalidArgument || st.code() == Status::Code::kNotSupported));
      CHECK(st.message().starts_with(fmt::format("user.cairn.{}", PolicyKeyName(key))));
      continue;
    }
    accepted++;
    INFO(fmt::format("{}={:?} -> {:?}", PolicyKeyName(key), value, *canonical));
    if (key != PolicyKey::kPlugins) CHECK(Printable(*canonical));  // plugins: "" means none
    auto again = CanonicalPolicyValue(key, *canonical);
    REQUIRE(again.ok());
    CHECK(*again == *canonical);
    ExpectUsable(key, *canonical);
  }
  CHECK(accepted > fuzz.iterations() / 50);
}

TEST_CASE("Fuzz: trusted.cairn.lock values are refused clearly or accepted canonically", "[fuzz]") {
  test::Fuzz fuzz("lock value", kInputs / 4);
  const std::vector<std::string> valid = {"all", "raid", "raid,policy", "segment_size, idr", "checksum,all"};
  const std::vector<std::string> keys = {",", " ", "all", "raid", "idr", "policy", "segment_size", "effective"};
  uint64_t accepted = 0;
  while (fuzz.Next()) {
    std::string value = valid[fuzz.Uniform(valid.size())];
    if (fuzz.Uniform(8) == 0) value = RandomValue(fuzz);
    else fuzz.Mutate(value, keys);
    auto canonical = CanonicalLockValue(value);
    if (!canonical.ok()) {
      INFO(canonical.status().ToString());
      CHECK(canonical.status().code() == Status::Code::kInvalidArgument);
      CHECK(canonical.status().message().starts_with("trusted.cairn.lock: "));
      continue;
    }
    accepted++;
    INFO(fmt::format("{:?} -> {:?}", value, *canonical));
    CHECK(Printable(*canonical));
    auto again = CanonicalLockValue(*canonical);
    REQUIRE(again.ok());
    CHECK(*again == *canonical);
  }
  CHECK(accepted > fuzz.iterations() / 200);
}
