#include "archive/rules_fit.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "archive/config.h"
#include "array/grid_geometry.h"
#include "group/disk_group.h"
#include "policy/write_plan.h"
#include "redundancy/striping.h"

namespace cairn {

std::string DomainOf(const ArchiveOptions& options, size_t disk) {
  auto it = options.disk_domains.find(static_cast<uint32_t>(disk));
  return it != options.disk_domains.end() ? it->second : fmt::format("#disk{}", disk);
}

Status CheckRaidFits(std::string_view raid, const ArchiveOptions& options) {
  auto redundancy = ParseRedundancy(raid, "none");
  if (!redundancy.ok()) return redundancy.status();
  std::vector<ArchiveOptions::Group> groups = EffectiveGroups(options);
  auto is_lonestar = [](const ArchiveOptions::Group& g) { return *GroupTypeNamed(g.type) == GroupType::kLoneStar; };
  if (redundancy->scheme == Redundancy::Scheme::kTwoDimensional) {
    if (std::any_of(groups.begin(), groups.end(), is_lonestar)) return Status::OK();
    return Status::InvalidArgument("raid=2d keeps each extent on one bucket of a lonestar disk group; this archive has "
                                   "none (cairn group add)");
  }
  // New data goes to the first group, which is named when cairn.conf names groups.
  const ArchiveOptions::Group& group = groups.front();
  if (is_lonestar(group)) {
    if (redundancy->scheme == Redundancy::Scheme::kReedSolomon) {
      return Status::InvalidArgument(fmt::format("raid={} stripes extents across disks; group {} (where new data goes) "
                                                 "is a lonestar group, which keeps each whole on one bucket under its "
                                                 "parity grid (use raid=2d, or mirror-N)",
                                                 raid, group.name));
    }
    auto geometry = GridGeometry::Parse(group.geometry);
    if (!geometry.ok()) return geometry.status();
    size_t most = std::min(geometry->columns(), geometry->hpg_count());
    if (redundancy->chunk_count() > most) {
      return Status::InvalidArgument(fmt::format("raid={} puts {} copies on buckets in distinct columns and parity "
                                                 "groups; lonestar group {} ({}) has room for {}",
                                                 raid, redundancy->chunk_count(), group.name, group.geometry, most));
    }
    return Status::OK();
  }
  std::string whose =
      options.groups.empty() ? "this archive" : fmt::format("group {} (where new data goes)", group.name);
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

Status CheckRulesFit(const RuleSet& rules, const ArchiveOptions& options, const std::string& file) {
  auto fits = [&](const std::vector<PolicySetting>& settings, const std::string& what) {
    const std::string* raid = FindSetting(settings, PolicyKey::kRaid);
    const std::string* placement = FindSetting(settings, PolicyKey::kPlacement);
    Status st = raid ? CheckRaidFits(*raid, options) : Status::OK();
    if (st.ok() && placement) st = CheckPlacementFits(*placement, options);
    return st.ok() ? st : Status::InvalidArgument(fmt::format("{}: {}: {}", file, what, st.message()));
  };
  for (const auto& policy : rules.policies()) CAIRN_RETURN_IF_ERROR(fits(policy.settings, "policy " + policy.name));
  for (const auto& rule : rules.rules()) CAIRN_RETURN_IF_ERROR(fits(rule.settings(), "rule " + rule.name()));
  return fits(rules.default_rule().settings(), "default");
}

}  // namespace cairn
