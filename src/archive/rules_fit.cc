#include "archive/rules_fit.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "archive/config.h"
#include "array/grid_geometry.h"
#include "group/disk_group.h"
#include "keys/keystore.h"
#include "policy/write_plan.h"
#include "redundancy/striping.h"

namespace cairn {

std::string DomainOf(const ArchiveOptions& options, size_t disk) {
  auto it = options.disk_domains.find(static_cast<uint32_t>(disk));
  return it != options.disk_domains.end() ? it->second : fmt::format("#disk{}", disk);
}

Status CheckRaidFitsGroup(std::string_view raid, const ArchiveOptions& options, const ArchiveOptions::Group& group) {
  auto redundancy = ParseRedundancy(raid, "none");
  if (!redundancy.ok()) return redundancy.status();
  GroupType type = *GroupTypeNamed(group.type);  // ParseConfig checked it
  CAIRN_RETURN_IF_ERROR(CheckSchemeFitsGroup(*redundancy, type, group.name));
  bool first = group.name == EffectiveGroups(options).front().name;
  std::string whose = options.groups.empty() ? "this archive"
                      : first                ? fmt::format("group {} (where new data goes)", group.name)
                                             : fmt::format("group {}", group.name);
  if (type == GroupType::kLoneStar) {  // copies go to buckets in distinct columns, parity groups and domains
    auto geometry = GridGeometry::Parse(group.geometry);
    if (!geometry.ok()) return geometry.status();
    size_t most = std::min(geometry->columns(), geometry->hpg_count());
    std::set<std::string> domains;  // of its buckets (the group's disks are in grid order)
    for (uint32_t p = 0; p < group.disks.size() && p < geometry->disk_count(); p++) {
      if (geometry->role(p) == DiskRole::kData) domains.insert(DomainOf(options, group.disks[p]));
    }
    if (redundancy->chunk_count() <= std::min(most, domains.size())) return Status::OK();
    if (redundancy->chunk_count() > most) {
      return Status::InvalidArgument(fmt::format("raid={} puts {} copies on buckets in distinct columns and parity "
                                                 "groups; lonestar {} ({}) has room for {}",
                                                 raid, redundancy->chunk_count(), whose, group.geometry, most));
    }
    return Status::InvalidArgument(fmt::format("raid={} puts {} copies on buckets in distinct failure domains; the "
                                               "buckets of lonestar {} are in {} domains",
                                               raid, redundancy->chunk_count(), whose, domains.size()));
  }
  size_t disks = group.disks.size();
  std::set<std::string> domains;
  for (uint32_t d : group.disks) domains.insert(DomainOf(options, d));
  if (redundancy->chunk_count() <= domains.size()) return Status::OK();
  if (domains.size() == disks) {
    return Status::InvalidArgument(fmt::format("raid={} puts {} chunks on distinct disks; {} has {} disks", raid,
                                               redundancy->chunk_count(), whose, disks));
  }
  std::string disks_of = options.groups.empty() ? fmt::format("this archive's {} disks", disks)
                                                : fmt::format("the {} disks of {}", disks, whose);
  return Status::InvalidArgument(fmt::format("raid={} puts {} chunks in distinct failure domains; {} are in {} domains",
                                             raid, redundancy->chunk_count(), disks_of, domains.size()));
}

Status CheckRaidFitsSomeGroup(std::string_view raid, const ArchiveOptions& options) {
  std::vector<ArchiveOptions::Group> groups = EffectiveGroups(options);
  Status first;  // the refusal of the group where new data goes, when none fits
  for (const auto& group : groups) {
    Status st = CheckRaidFitsGroup(raid, options, group);
    if (st.ok()) return st;
    if (first.ok()) first = st;
  }
  if (groups.size() == 1) return first;
  return Status::InvalidArgument(fmt::format("no disk group can keep raid={}: {}", raid, first.message()));
}

Status CheckRaidInPlacement(std::string_view raid, const std::string& placement, const ArchiveOptions& options) {
  std::string name;
  PlacementHints hints;
  CAIRN_RETURN_IF_ERROR(ParsePlacement(placement, name, hints));
  std::vector<ArchiveOptions::Group> groups = EffectiveGroups(options);
  if (name.empty()) return CheckRaidFitsGroup(raid, options, groups.front());
  for (const auto& group : groups) {
    if (group.name == name) return CheckRaidFitsGroup(raid, options, group);
  }
  return CheckPlacementFits(placement, options);  // names a group the archive does not have
}

Status CheckPlacementFits(const std::string& placement, const ArchiveOptions& options) {
  std::string group;
  PlacementHints hints;
  CAIRN_RETURN_IF_ERROR(ParsePlacement(placement, group, hints));
  if (group.empty()) return Status::OK();
  std::string names;
  for (const auto& known : EffectiveGroups(options)) {
    if (known.name == group) return Status::OK();
    names += fmt::format("{}{}", names.empty() ? "" : ", ", known.name);
  }
  return Status::InvalidArgument(
      fmt::format("placement={}: this archive has no disk group {} (groups: {})", placement, group, names));
}

namespace {

// Runs `check` on the settings of every statement of `rules` (each policy, each rule, the
// default), a rule's with those of the policy it names; returns the first refusal, prefixed
// with the file, the line and the statement.
Status CheckEachStatement(const RuleSet& rules, const std::string& file,
                          const std::function<Status(const std::vector<PolicySetting>&)>& check) {
  auto one = [&](const std::vector<PolicySetting>& written, int line, const std::string& what) {
    Status st = check(rules.Expand(written));  // a policy names no other: its own settings
    if (st.ok()) return st;
    std::string where = line > 0 ? fmt::format("{}:{}", file, line) : file;
    return Status::InvalidArgument(fmt::format("{}: {}: {}", where, what, st.message()));
  };
  for (const auto& policy : rules.policies()) {
    CAIRN_RETURN_IF_ERROR(one(policy.settings, policy.line, "policy " + policy.name));
  }
  for (const auto& rule : rules.rules()) {
    CAIRN_RETURN_IF_ERROR(one(rule.settings(), rule.line(), "rule " + rule.name()));
  }
  return one(rules.default_rule().settings(), rules.default_rule().line(), "default");
}

}  // namespace

Status CheckRulesFit(const RuleSet& rules, const ArchiveOptions& options, const std::string& file) {
  // Each statement's own pair (a rule's with its named policy's): a raid= beside a placement=
  // must fit the group it names; one without must fit some group, since what places the files
  // (an attribute, a pin, the default) may come from elsewhere, and setting it checks the pair.
  return CheckEachStatement(rules, file, [&](const std::vector<PolicySetting>& settings) {
    const std::string* raid = FindSetting(settings, PolicyKey::kRaid);
    const std::string* placement = FindSetting(settings, PolicyKey::kPlacement);
    Status st = placement ? CheckPlacementFits(*placement, options) : Status::OK();
    if (st.ok() && raid) {
      st = placement ? CheckRaidInPlacement(*raid, *placement, options) : CheckRaidFitsSomeGroup(*raid, options);
    }
    return st;
  });
}

Status CheckRulesKeys(const RuleSet& rules, const std::function<Status(const std::string&)>& usable,
                      const std::string& file) {
  return CheckEachStatement(rules, file, [&](const std::vector<PolicySetting>& settings) {
    const std::string* encrypt = FindSetting(settings, PolicyKey::kEncrypt);
    if (!encrypt || *encrypt == "off") return Status::OK();
    const std::string* key = FindSetting(settings, PolicyKey::kKey);
    return !key || *key == "none"
               ? Status::InvalidArgument(fmt::format(
                     "encrypt={} needs key=NAME beside it (files it matches could not be persisted)", *encrypt))
               : usable(*key);
  });
}

std::function<Status(const std::string&)> KeyInKeystore(const std::string& keystore_path) {
  auto keystore = std::make_shared<std::optional<Result<Keystore>>>();
  return [keystore, keystore_path](const std::string& key) -> Status {
    if (!*keystore) *keystore = Keystore::Load(keystore_path);
    const Result<Keystore>& store = **keystore;
    if (!store.ok()) return Status::InvalidArgument(fmt::format("key={}: {}", key, store.status().message()));
    if (store->current(key)) return Status::OK();
    return Status::InvalidArgument(
        fmt::format("key={}: the keystore {} has no key of that name (cairn key create)", key, keystore_path));
  };
}

}  // namespace cairn
