// Resolves the effective policy of an inode, field by field, and says where each field
// came from. Precedence, documented in cairn-policy.7 and cairn.rules.5:
//   user.cairn.KEY on the file, else on the nearest ancestor directory (unless a
//   trusted.cairn.lock at or above the file covers KEY) → trusted.cairn.KEY pins, nearest
//   first → the first matching admin rule → the rules' default → the built-in default.
// At each level an explicit KEY beats the fields of that level's named policy.
// A file with several names (hard links): locks above any name apply; pins of the name
// whose path sorts first (bytewise) win, then those of the next; directory settings and
// rules look at the first path only. Only the kMaxPolicyNames oldest names are looked at
// (each costs a walk to the root under the catalog mutex); a file with more counts as
// locked for every key, since a lock above a later name would go unseen.
// A regular file unlinked while open has the policy of its last name (PolicyContext::unlinked).
// A chain of more than 4096 directories up to the root is a cycle: Corruption.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "policy/rules.h"
#include "policy/vocabulary.h"

namespace cairn {

constexpr size_t kMaxPolicyNames = 64;

struct ResolvedField {
  PolicyKey key;
  std::string value;
  // "file", "dir:/a/b", "pin:/a" (trusted.cairn.*), "rule:NAME", "rule:default", "default",
  // "default:compress" (compressed_segment_size) or "default:lonestar" (raid=2d);
  // "policy:NAME@" in front when the field came from a named policy.
  std::string source;
};

struct ResolvedPolicy {
  std::vector<ResolvedField> fields;  // one per PolicyKey, in kAllPolicyKeys order
  std::string matched_rule;           // the rule the file matched ("default" when none did)
  const ResolvedField& Get(PolicyKey key) const { return fields[static_cast<size_t>(key)]; }
  uint64_t segment_size() const;
  std::string Effective() const;  // "raid=none idr=none ... segment_size=4194304 ... policy=none"
  std::string Sources() const;    // "raid=default ... segment_size=dir:/logs ..."
};

// By inode, the policies files unlinked while open keep (Archive::KeepPolicyOfUnlinked).
using UnlinkedPolicies = std::map<uint64_t, ResolvedPolicy>;

// Everything besides the catalog that resolution depends on.
struct PolicyContext {
  std::shared_ptr<const RuleSet> rules;
  uint64_t default_segment_size = 4 << 20;
  // The default of a file whose policy compresses it (cairn.conf compressed_segment_size);
  // 0: default_segment_size.
  uint64_t compressed_segment_size = 0;
  // The disk group new data goes to without placement=group=, and the lonestar groups:
  // raid=2d is the default of a file that goes to one of those.
  std::string first_group;
  std::set<std::string> lonestar_groups;
  // What files unlinked while open had under their last name (Archive::KeepPolicyOfUnlinked);
  // read under the catalog mutex. Without it, such a file has its own attributes alone.
  const UnlinkedPolicies* unlinked = nullptr;
};

// REQUIRES: the caller serializes catalog access.
Result<ResolvedPolicy> ResolvePolicy(Catalog& catalog, uint64_t ino, const PolicyContext& context);

// Whether data stamped with `stamp` (an Effective() string) is laid out as `policy` asks;
// only the name of the policy may differ.
bool LayoutMatches(const std::string& stamp, const ResolvedPolicy& policy);

// The KEY=value fields of a policy stamp (an Effective() string), by key.
std::map<std::string, std::string> StampFields(const std::string& stamp);

// The admin lock covering `key` for `ino`, above any of its names: "/path
// (trusted.cairn.lock=all)", or empty when users may set it. REQUIRES: the caller
// serializes catalog access.
Result<std::string> LockCovering(Catalog& catalog, uint64_t ino, PolicyKey key);

// "/a/b/c" for an inode, from its names in the catalog ("" when it has none); Corruption
// for a cycle of directories.
Result<std::string> PathOf(Catalog& catalog, uint64_t ino);

}  // namespace cairn
