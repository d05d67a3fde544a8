#include "policy/resolver.h"

#include "policy/write_plan.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "util/clock.h"

namespace cairn {
namespace {

constexpr std::string_view kTrustedPrefix = "trusted.cairn.";
constexpr size_t kMaxDepth = 4096;

// The cairn attributes of one inode on the way from the file up to the root.
struct Level {
  uint64_t ino = 0;
  std::string path;
  std::map<std::string, std::string, std::less<>> user;     // "raid" -> "none"
  std::map<std::string, std::string, std::less<>> trusted;  // "lock" -> "all"
};

using Name = std::pair<uint64_t, std::string>;  // (directory, name)

// A chain of parents deeper than kMaxDepth: only a cycle in a damaged catalog makes one.
Status TooDeep(uint64_t ino) {
  return Status::Corruption(fmt::format(
      "inode {}: more than {} directories above it, a directory cycle in the catalog; run cairn fsck", ino,
      kMaxDepth));
}

// The levels from `ino` up to the root, reached through `name` (a file's own name when it
// has several; directories have one). A chain deeper than kMaxDepth is a directory cycle.
Result<std::vector<Level>> LevelsOf(Catalog& catalog, uint64_t ino, const std::optional<Name>& name) {
  std::vector<Level> levels;
  std::vector<std::string> names;  // names[i]: the name of levels[i] in levels[i + 1]
  for (uint64_t at = ino;;) {
    if (levels.size() == kMaxDepth) return TooDeep(ino);
    Level& level = levels.emplace_back();
    level.ino = at;
    auto attrs = catalog.XattrsWithPrefix(at, {kPolicyPrefix, kTrustedPrefix});
    if (!attrs.ok()) return attrs.status();
    for (auto& [name, value] : *attrs) {
      if (name.starts_with(kPolicyPrefix)) {
        level.user[name.substr(kPolicyPrefix.size())] = value;
      } else {
        level.trusted[name.substr(kTrustedPrefix.size())] = value;
      }
    }
    if (at == kRootInode) break;
    auto parent = at == ino && name ? Result<Name>(*name) : catalog.NameOf(at);
    if (!parent.ok() && parent.status().IsNotFound()) break;  // unlinked: only its own attributes apply
    if (!parent.ok()) return parent.status();
    names.push_back(parent->second);
    at = parent->first;
  }
  bool rooted = levels.back().ino == kRootInode;
  std::string path;
  for (size_t i = levels.size(); i-- > 0;) {
    if (i < names.size()) path += "/" + names[i];
    levels[i].path = !rooted ? "" : path.empty() ? "/" : path;
  }
  return levels;
}

// One chain of levels per name of `ino`, sorted by the file's path (bytewise): the first
// is the name whose directories and path count for user settings and rules; locks and
// pins count on every chain (cairn-policy.7, "Hard links").
// Names in one directory share everything above the file, so one chain per directory
// (through its first name) is enough, which keeps a file with many links cheap.
// Only the kMaxPolicyNames oldest names are loaded (the catalog mutex is held); *more_names
// says whether the file has others, whose locks and pins are then not seen.
Result<std::vector<std::vector<Level>>> ChainsOf(Catalog& catalog, uint64_t ino, bool* more_names) {
  auto names = catalog.NamesOf(ino, kMaxPolicyNames + 1);
  if (!names.ok()) return names.status();
  *more_names = names->size() > kMaxPolicyNames;
  if (*more_names) names->pop_back();
  std::vector<std::vector<Level>> chains;
  if (names->size() <= 1) {
    auto levels = LevelsOf(catalog, ino, std::nullopt);
    if (!levels.ok()) return levels.status();
    chains.push_back(std::move(*levels));
    return chains;
  }
  std::sort(names->begin(), names->end());
  for (size_t i = 0; i < names->size(); i++) {
    if (i > 0 && (*names)[i].first == (*names)[i - 1].first) continue;
    auto levels = LevelsOf(catalog, ino, (*names)[i]);
    if (!levels.ok()) return levels.status();
    chains.push_back(std::move(*levels));
  }
  std::sort(chains.begin(), chains.end(), [](const auto& a, const auto& b) { return a[0].path < b[0].path; });
  return chains;
}

bool LockCovers(std::string_view lock, PolicyKey key) {
  std::string text(lock);
  for (char& c : text) c = c == ',' ? ' ' : c;
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    if (word == "all" || word == PolicyKeyName(key)) return true;
  }
  return false;
}

// `key` as given by one set of attributes or rule settings: an explicit value wins over
// the fields of the named policy they select. Sets *value and *via (the policy name).
template <typename Lookup>
bool FieldFrom(Lookup explicit_value, const RuleSet* rules, PolicyKey key, std::string* value, std::string* via) {
  if (const std::string* v = explicit_value(key)) {
    *value = *v;
    via->clear();
    return true;
  }
  const std::string* name = key == PolicyKey::kPolicy ? nullptr : explicit_value(PolicyKey::kPolicy);
  const NamedPolicy* policy = name && rules ? rules->FindPolicy(*name) : nullptr;
  if (!policy) return false;
  if (const std::string* v = FindSetting(policy->settings, key)) {
    *value = *v;
    *via = policy->name;
    return true;
  }
  return false;
}

// The lock covering `key` on any of the chains, as LockCovering() below describes it. A
// file with names beyond the chains (`more_names`) counts as locked: a lock there is unseen.
std::string LockCovering(const std::vector<std::vector<Level>>& chains, bool more_names, PolicyKey key) {
  if (more_names) {
    return fmt::format("every name of this file (it has more than {} hard links; user settings do not count)",
                       kMaxPolicyNames);
  }
  for (const auto& chain : chains) {
    for (const Level& level : chain) {
      auto lock = level.trusted.find("lock");
      if (lock != level.trusted.end() && LockCovers(lock->second, key)) {
        return fmt::format("{} (trusted.cairn.lock={})", level.path.empty() ? "this file" : level.path, lock->second);
      }
    }
  }
  return "";
}

}  // namespace

std::map<std::string, std::string> StampFields(const std::string& stamp) {
  std::map<std::string, std::string> fields;
  std::istringstream words(stamp);
  std::string word;
  while (words >> word) {
    size_t eq = word.find('=');
    if (eq != std::string::npos) fields[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return fields;
}

Result<std::string> PathOf(Catalog& catalog, uint64_t ino) {
  std::string path;
  for (uint64_t at = ino, depth = 0; at != kRootInode; depth++) {
    if (depth == kMaxDepth) return TooDeep(ino);
    auto name = catalog.NameOf(at);
    if (!name.ok() && name.status().IsNotFound()) return std::string();
    if (!name.ok()) return name.status();
    path = "/" + name->second + path;
    at = name->first;
  }
  return path.empty() ? "/" : path;
}

uint64_t ResolvedPolicy::segment_size() const { return std::stoull(Get(PolicyKey::kSegmentSize).value); }

std::string ResolvedPolicy::Effective() const {
  std::string out;
  for (const auto& f : fields) out += fmt::format("{}{}={}", out.empty() ? "" : " ", PolicyKeyName(f.key), f.value);
  return out;
}

std::string ResolvedPolicy::Sources() const {
  std::string out;
  for (const auto& f : fields) out += fmt::format("{}{}={}", out.empty() ? "" : " ", PolicyKeyName(f.key), f.source);
  return out;
}

Result<ResolvedPolicy> ResolvePolicy(Catalog& catalog, uint64_t ino, const PolicyContext& context) {
  auto inode = catalog.GetInode(ino);
  if (!inode.ok()) return inode.status();
  if (inode->nlink == 0 && context.unlinked) {  // a file unlinked while open keeps its last name's
    auto kept = context.unlinked->find(ino);
    if (kept != context.unlinked->end()) return kept->second;
  }
  bool more_names = false;
  auto chains = ChainsOf(catalog, ino, &more_names);
  if (!chains.ok()) return chains.status();
  const std::vector<Level>& levels = chains->front();
  const RuleSet* rules = context.rules.get();

  const Rule* rule = nullptr;
  if (rules) {
    FileFacts facts;
    facts.path = levels[0].path;
    facts.size = inode->size;
    facts.uid = inode->uid;
    facts.gid = inode->gid;
    facts.mtime_ns = inode->mtime_ns;
    facts.atime_ns = inode->atime_ns;
    Status xattr_error;
    facts.xattr = [&catalog, ino, &xattr_error](const std::string& name) -> std::optional<std::string> {
      auto value = catalog.GetXattr(ino, name);
      if (!value.ok()) {
        if (!value.status().IsNotFound()) xattr_error = value.status();
        return std::nullopt;
      }
      return std::string(value->begin(), value->end());
    };
    rule = &rules->Match(facts, NowNs());
    CAIRN_RETURN_IF_ERROR(xattr_error);
  }

  // Where a field can come from, in precedence order; user settings do not count for a
  // key an admin lock covers.
  struct Candidate {
    std::string source;
    bool user;
    std::function<const std::string*(PolicyKey)> lookup;
  };
  auto attributes = [](const std::map<std::string, std::string, std::less<>>& attrs) {
    return [&attrs](PolicyKey k) -> const std::string* {
      auto it = attrs.find(PolicyKeyName(k));
      return it == attrs.end() ? nullptr : &it->second;
    };
  };
  auto settings = [](const Rule* r) { return [r](PolicyKey k) { return FindSetting(r->settings(), k); }; };
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < levels.size(); i++) {
    candidates.push_back({i == 0 ? "file" : "dir:" + levels[i].path, true, attributes(levels[i].user)});
  }
  for (const auto& chain : *chains) {
    for (const Level& level : chain) candidates.push_back({"pin:" + level.path, false, attributes(level.trusted)});
  }
  if (rule) candidates.push_back({"rule:" + rule->name(), false, settings(rule)});
  if (rules && rule != &rules->default_rule()) {
    candidates.push_back({"rule:default", false, settings(&rules->default_rule())});
  }

  ResolvedPolicy policy;
  policy.matched_rule = rule ? rule->name() : "default";
  // A user's policy= under a lock of `policy` names no policy either: its fields would come
  // through in the other keys.
  const bool policy_locked = !LockCovering(*chains, more_names, PolicyKey::kPolicy).empty();
  for (PolicyKey key : kAllPolicyKeys) {
    bool locked = !LockCovering(*chains, more_names, key).empty();
    ResolvedField field{key, DefaultPolicyValue(key, context.default_segment_size), "default"};
    for (const Candidate& candidate : candidates) {
      std::string via;
      if (candidate.user && locked) continue;
      const RuleSet* named = candidate.user && policy_locked ? nullptr : rules;
      if (!FieldFrom(candidate.lookup, named, key, &field.value, &via)) continue;
      field.source = via.empty() ? candidate.source : fmt::format("policy:{}@{}", via, candidate.source);
      break;
    }
    policy.fields.push_back(std::move(field));
  }
  // Each extent is compressed on its own, and a larger one compresses better.
  ResolvedField& segment_size = policy.fields[static_cast<size_t>(PolicyKey::kSegmentSize)];
  const uint64_t compressed = context.compressed_segment_size;
  if (segment_size.source == "default" && policy.Get(PolicyKey::kCompress).value != "off" && compressed != 0 &&
      compressed != context.default_segment_size) {
    segment_size.value = std::to_string(compressed);
    segment_size.source = "default:compress";
  }
  // A lonestar group protects what it holds with its parity grid: raid=2d is its default.
  ResolvedField& raid = policy.fields[static_cast<size_t>(PolicyKey::kRaid)];
  if (raid.source == "default" && !context.lonestar_groups.empty()) {
    std::string group;
    PlacementHints hints;
    Status parsed = ParsePlacement(policy.Get(PolicyKey::kPlacement).value, group, hints);
    if (parsed.ok() && context.lonestar_groups.contains(group.empty() ? context.first_group : group)) {
      raid.value = "2d";
      raid.source = "default:lonestar";
    }
  }
  return policy;
}

bool LayoutMatches(const std::string& stamp, const ResolvedPolicy& policy) {
  auto stamped = StampFields(stamp);
  for (const auto& field : policy.fields) {
    if (field.key == PolicyKey::kPolicy) continue;
    auto it = stamped.find(std::string(PolicyKeyName(field.key)));
    if (it == stamped.end() || it->second != field.value) return false;
  }
  return true;
}

Result<std::string> LockCovering(Catalog& catalog, uint64_t ino, PolicyKey key) {
  bool more_names = false;
  auto chains = ChainsOf(catalog, ino, &more_names);
  if (!chains.ok()) return chains.status();
  return LockCovering(*chains, more_names, key);
}

}  // namespace cairn
