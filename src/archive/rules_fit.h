// Whether policies fit an archive's disks: raid=mirror-N and raid=rs-K-M put every chunk
// of an extent on its own disk, in its own failure domain; placement=group=NAME names a group. Used when the daemon (re)loads
// ARCHIVE/rules and by `cairn rules check FILE --archive ARCHIVE`.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "cairn/options.h"
#include "cairn/status.h"
#include "policy/rules.h"

namespace cairn {

// The failure domain of `disk`: its domain.N name, or a domain of its own.
std::string DomainOf(const ArchiveOptions& options, size_t disk);

// InvalidArgument when raid=`raid` needs more distinct disks (or failure domains) than
// `group` (of `options`) has, saying how many it needs and how many there are, or is a
// scheme that group cannot keep (CheckSchemeFitsGroup).
Status CheckRaidFitsGroup(std::string_view raid, const ArchiveOptions& options, const ArchiveOptions::Group& group);
// The same for the group placement=`placement` sends files to (the first group, where new
// data goes, when it names none); InvalidArgument too when it names no group of `options`.
Status CheckRaidInPlacement(std::string_view raid, const std::string& placement, const ArchiveOptions& options);
// InvalidArgument when no group of `options` can keep raid=`raid` (the refusal of the first).
Status CheckRaidFitsSomeGroup(std::string_view raid, const ArchiveOptions& options);

// InvalidArgument when placement=`placement` names a disk group `options` does not define,
// listing the groups there are.
Status CheckPlacementFits(const std::string& placement, const ArchiveOptions& options);

// The placement= and raid= of each named policy, rule (with its named policy) and the default
// of `rules`, checked against `options`: a raid= beside a placement= must fit the group it
// names (CheckRaidInPlacement), one without must fit some group. The message names `file`,
// the line and the rule or policy. (idr= is per disk and fits any archive.)
Status CheckRulesFit(const RuleSet& rules, const ArchiveOptions& options, const std::string& file);

// InvalidArgument when a named policy, a rule or the default of `rules` sets encrypt= (not
// off) without key=NAME, or with a key `usable` refuses (KeyInKeystore: one the keystore
// does not hold): the files it matches could never be persisted. The message names `file`,
// the line, the policy or rule and `usable`'s reason.
Status CheckRulesKeys(const RuleSet& rules, const std::function<Status(const std::string&)>& usable,
                      const std::string& file);
// A `usable` for CheckRulesKeys: OK when the keystore at `keystore_path` holds the key (read
// once, at the first call).
std::function<Status(const std::string&)> KeyInKeystore(const std::string& keystore_path);

}  // namespace cairn
