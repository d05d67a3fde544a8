#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "catalog/catalog.h"
#include "policy/resolver.h"
#include "policy/vocabulary.h"
#include "test_util.h"

using namespace cairn;

namespace {

Status::Code CodeOf(PolicyKey key, const char* value) { return CanonicalPolicyValue(key, value).status().code(); }

}  // namespace

TEST_CASE("Vocabulary: keys") {
  CHECK(*ParsePolicyKey("raid") == PolicyKey::kRaid);
  CHECK(*ParsePolicyKey("segment_size") == PolicyKey::kSegmentSize);
  auto unknown = ParsePolicyKey("colour");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().message().find("user.cairn.colour is not a cairn policy key") != std::string::npos);
  CHECK(IsComputedPolicyKey("effective"));
  CHECK(IsComputedPolicyKey("effective.source"));
  CHECK(IsComputedPolicyKey("state"));
  CHECK_FALSE(IsComputedPolicyKey("raid"));
  for (PolicyKey key : kAllPolicyKeys) CHECK(*ParsePolicyKey(PolicyKeyName(key)) == key);
}

TEST_CASE("Vocabulary: values available in this build are canonicalized") {
  CHECK(*CanonicalPolicyValue(PolicyKey::kRaid, "none") == "none");
  CHECK(*CanonicalPolicyValue(PolicyKey::kSegmentSize, "64K") == "65536");
  CHECK(*CanonicalPolicyValue(PolicyKey::kSegmentSize, "4M") == "4194304");
  CHECK(*CanonicalPolicyValue(PolicyKey::kSegmentSize, "1G") == "1073741824");
  CHECK(*CanonicalPolicyValue(PolicyKey::kChecksum, "crc32c") == "crc32c");
  CHECK(*CanonicalPolicyValue(PolicyKey::kCompress, "off") == "off");
}

TEST_CASE("Vocabulary: valid values of features not built are NotSupported, saying so") {
  using Code = Status::Code;
  for (const char* v : {"lz4", "zstd", "zstd-9", "auto"}) CHECK(CodeOf(PolicyKey::kCompress, v) == Code::kNotSupported);
  CHECK(CodeOf(PolicyKey::kEncrypt, "aes-256-gcm") == Code::kNotSupported);
  CHECK(CodeOf(PolicyKey::kPlacement, "group=ssd,pack=climate") == Code::kNotSupported);
  CHECK(*CanonicalPolicyValue(PolicyKey::kPolicy, "cold") == "cold");
  auto zstd = CanonicalPolicyValue(PolicyKey::kCompress, "zstd");
  CHECK(zstd.status().message().find("valid but not available in this build") != std::string::npos);
  CHECK(*CanonicalPolicyValue(PolicyKey::kRaid, "2d") == "2d");  // built: the lonestar array
}

TEST_CASE("Vocabulary: redundancy values are canonicalized") {
  CHECK(*CanonicalPolicyValue(PolicyKey::kRaid, "mirror-2") == "mirror-2");
  CHECK(*CanonicalPolicyValue(PolicyKey::kRaid, "rs-010-04") == "rs-10-4");
  CHECK(*CanonicalPolicyValue(PolicyKey::kRaid, "rs-120-24") == "rs-120-24");
  CHECK(*CanonicalPolicyValue(PolicyKey::kIdr, "spc-16-1") == "spc-16-1");
  CHECK(*CanonicalPolicyValue(PolicyKey::kIdr, "spc-16-1-s08") == "spc-16-1-s8");
  CHECK(*CanonicalPolicyValue(PolicyKey::kIdr, "spc-16-1-s1") == "spc-16-1");
}

TEST_CASE("Vocabulary: malformed values are InvalidArgument naming key, value and what is allowed") {
  using Code = Status::Code;
  for (const char* v : {"rs-0-4", "rs-129-4", "rs-10-33", "mirror-1", "mirror-9", "raid5", "", "rs-10"}) {
    INFO(v);
    CHECK(CodeOf(PolicyKey::kRaid, v) == Code::kInvalidArgument);
  }
  for (const char* v : {"zstd-0", "zstd-23", "gzip"}) CHECK(CodeOf(PolicyKey::kCompress, v) == Code::kInvalidArgument);
  for (const char* v : {"1K", "2G", "65537", "lots", "-4M"}) {
    INFO(v);
    CHECK(CodeOf(PolicyKey::kSegmentSize, v) == Code::kInvalidArgument);
  }
  CHECK(CodeOf(PolicyKey::kPlacement, "rack=3") == Code::kInvalidArgument);
  CHECK(CodeOf(PolicyKey::kPolicy, "has space") == Code::kInvalidArgument);
  auto bad = CanonicalPolicyValue(PolicyKey::kRaid, "raid5");
  CHECK(bad.status().message() ==
        "user.cairn.raid: 'raid5' is not a valid value (allowed: none, mirror-N (2..8), rs-K-M (K 1..128, M 1..32), 2d)");
}

TEST_CASE("Vocabulary: a value as long as setxattr allows is refused, not matched by a regex that overflows the stack") {
  const std::string digits(65000, '1'), name(65000, 'a');  // XATTR_SIZE_MAX is 64 KiB
  for (PolicyKey key : kAllPolicyKeys) {
    for (const std::string& value : {"rs-" + digits + "-1", "mirror-" + digits, "spc-16-1-s" + digits, name,
                                     "group=" + name, "zstd-" + digits, digits}) {
      auto r = CanonicalPolicyValue(key, value);
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().message() == fmt::format("user.cairn.{}: a value of {} bytes is too long (at most 256)",
                                                PolicyKeyName(key), value.size()));
    }
  }
  CHECK(CanonicalPolicyValue(PolicyKey::kPolicy, std::string(64, 'a')).ok());
}

TEST_CASE("Vocabulary: trusted.cairn.lock values") {
  CHECK(*CanonicalLockValue("all") == "all");
  CHECK(*CanonicalLockValue("policy, raid") == "raid,policy");
  CHECK(*CanonicalLockValue("segment_size,all") == "all");
  CHECK(CanonicalLockValue("").status().code() == Status::Code::kInvalidArgument);
  CHECK(CanonicalLockValue("raid,colour").status().message().find("'colour' is not a policy key") !=
        std::string::npos);
}
