// Write plans: what the write path is given for a resolved policy, and for a file that keeps
// the layout it was persisted with.
#include <catch2/catch.hpp>

#include "policy/write_plan.h"

using namespace cairn;

namespace {

ResolvedPolicy Defaults() {
  ResolvedPolicy policy;
  for (PolicyKey key : kAllPolicyKeys) policy.fields.push_back({key, DefaultPolicyValue(key, 4 << 20), "default"});
  return policy;
}

void Set(ResolvedPolicy& policy, PolicyKey key, const char* value) {
  policy.fields[static_cast<size_t>(key)].value = value;
}

}  // namespace

TEST_CASE("WritePlan: typed fields of a resolved policy, its stamp as Effective() spells it") {
  ResolvedPolicy policy = Defaults();
  Set(policy, PolicyKey::kRaid, "rs-4-2");
  Set(policy, PolicyKey::kIdr, "spc-16-1-s8");
  Set(policy, PolicyKey::kChecksum, "xxh3");
  Set(policy, PolicyKey::kSegmentSize, "65536");
  Set(policy, PolicyKey::kPlacement, "group=cold,pack=proj-7");
  auto plan = PlanWrite(policy);
  REQUIRE(plan.ok());
  CHECK((*plan)->segment_size == 65536);
  CHECK((*plan)->redundancy == Redundancy{Redundancy::Scheme::kReedSolomon, 4, 2, 8, ChecksumType::kXxh3});
  CHECK((*plan)->chain.empty());
  CHECK((*plan)->group == "cold");
  CHECK((*plan)->placement == PlacementHints{"", "proj-7"});
  CHECK((*plan)->policy_stamp == policy.Effective());

  Set(policy, PolicyKey::kPlugins, "no-such-transform");
  CHECK(PlanWrite(policy).status().message() == "transform 'no-such-transform' is not installed");
  Set(policy, PolicyKey::kPlugins, "none");
  Set(policy, PolicyKey::kCompress, "zstd");
  CHECK(PlanWrite(policy).status().code() == Status::Code::kNotSupported);
  Set(policy, PolicyKey::kCompress, "off");
  Set(policy, PolicyKey::kEncrypt, "aes-256-gcm");  // a file encrypted with no master key named
  CHECK(PlanWrite(policy).status().message() == "encrypt=aes-256-gcm needs key=NAME, a master key of the keystore");
}

TEST_CASE("WritePlan: a persisted file's layout keeps its stamp; keys an old stamp lacks take defaults") {
  // Stamped before checksum= existed.
  const std::string stamp = "raid=mirror-2 idr=none compress=off encrypt=off key=none placement=balanced "
                            "segment_size=1048576 plugins=none policy=cold";
  auto plan = PlanOfLayout(stamp, 1 << 20);
  REQUIRE(plan.ok());
  CHECK((*plan)->policy_stamp == stamp);
  CHECK((*plan)->segment_size == (1u << 20));
  CHECK((*plan)->redundancy == Redundancy{Redundancy::Scheme::kMirror, 1, 1, 0, ChecksumType::kCrc32c});
  CHECK((*plan)->group.empty());
}
