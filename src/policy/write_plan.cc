#include "policy/write_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "codec/transform_registry.h"
#include "redundancy/striping.h"

namespace cairn {
namespace {

// The terms of a value separated by commas (or spaces); none for `none_value`.
std::vector<std::string> Terms(const std::string& value, std::string_view none_value) {
  std::vector<std::string> terms;
  if (value == none_value) return terms;
  for (size_t start = 0; start <= value.size();) {
    size_t end = std::min(value.find_first_of(", ", start), value.size());
    if (end > start) terms.push_back(value.substr(start, end - start));
    start = end + 1;
  }
  return terms;
}

}  // namespace

Status ParsePlacement(const std::string& value, std::string& group, PlacementHints& hints) {
  for (const std::string& term : Terms(value, "balanced")) {
    size_t eq = term.find('=');
    std::string key = term.substr(0, eq);
    std::string name = eq == std::string::npos ? "" : term.substr(eq + 1);
    std::string* field = key == "group" ? &group
                         : key == "tier" ? &hints.tier
                         : key == "pack" ? &hints.pack_tag
                                         : nullptr;
    if (!field || name.empty()) {
      return Status::InvalidArgument(fmt::format("placement={}: '{}' is not group=, tier= or pack=", value, term));
    }
    *field = name;
  }
  return Status::OK();
}

namespace {

Result<std::shared_ptr<WritePlan>> MakePlan(const ResolvedPolicy& policy) {
  auto plan = std::make_shared<WritePlan>();
  plan->segment_size = policy.segment_size();
  auto redundancy = ParseRedundancy(policy.Get(PolicyKey::kRaid).value, policy.Get(PolicyKey::kIdr).value,
                                    policy.Get(PolicyKey::kChecksum).value);
  if (!redundancy.ok()) return redundancy.status();
  plan->redundancy = *redundancy;
  // The stage order is fixed (cairn-plugins(7)): compress, encrypt, then the custom plugins.
  std::vector<TransformChain::Stage> stages;
  if (const std::string& value = policy.Get(PolicyKey::kCompress).value; value != "off") {
    auto stage = CompressionStage(value);
    if (!stage.ok()) return stage.status();
    stages.push_back(*stage);
  }
  if (const std::string& value = policy.Get(PolicyKey::kEncrypt).value; value != "off") {
    plan->key_name = policy.Get(PolicyKey::kKey).value;
    if (plan->key_name == "none") {
      return Status::InvalidArgument(fmt::format("encrypt={} needs key=NAME, a master key of the keystore", value));
    }
    stages.push_back({value, ""});
  }
  for (std::string& name : Terms(policy.Get(PolicyKey::kPlugins).value, "none")) {
    auto stage = StageOfTransform(name);
    if (!stage.ok()) return stage.status();
    if (*stage != TransformStage::kCustom) {
      return Status::InvalidArgument(
          fmt::format("plugins={}: '{}' is a compress or encrypt plugin, chosen by those keys", name, name));
    }
    stages.push_back({std::move(name), ""});
  }
  auto chain = TransformChain::ForWriting(stages);
  if (!chain.ok()) return chain.status();
  plan->chain = std::move(*chain);
  if (policy.Get(PolicyKey::kCompress).value == "auto") {
    auto rest = TransformChain::ForWriting({stages.begin() + 1, stages.end()});
    if (!rest.ok()) return rest.status();
    plan->chain_if_incompressible = std::move(*rest);
  }
  if (!plan->key_name.empty() && !plan->chain.needs_key()) {  // never store in clear what was to be encrypted
    return Status::InvalidArgument(fmt::format("encrypt={}: the plugin of that name does not ask for a key",
                                               policy.Get(PolicyKey::kEncrypt).value));
  }
  CAIRN_RETURN_IF_ERROR(ParsePlacement(policy.Get(PolicyKey::kPlacement).value, plan->group, plan->placement));
  plan->policy_stamp = policy.Effective();
  return plan;
}

}  // namespace

Result<std::shared_ptr<const WritePlan>> PlanWrite(const ResolvedPolicy& policy) {
  auto plan = MakePlan(policy);
  if (!plan.ok()) return plan.status();
  return std::shared_ptr<const WritePlan>(std::move(*plan));
}

Result<std::shared_ptr<const WritePlan>> PlanOfLayout(const std::string& stamp, uint64_t segment_size) {
  auto stamped = StampFields(stamp);
  ResolvedPolicy policy;
  for (PolicyKey key : kAllPolicyKeys) {
    auto it = stamped.find(std::string(PolicyKeyName(key)));
    policy.fields.push_back({key, it != stamped.end() ? it->second : DefaultPolicyValue(key, segment_size), "layout"});
  }
  policy.fields[static_cast<size_t>(PolicyKey::kSegmentSize)].value = std::to_string(segment_size);
  auto plan = MakePlan(policy);
  if (!plan.ok()) return plan.status();
  (*plan)->policy_stamp = stamp;
  return std::shared_ptr<const WritePlan>(std::move(*plan));
}

}  // namespace cairn
