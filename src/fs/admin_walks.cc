#include "fs/admin_walks.h"

#include <sys/stat.h>

#include <vector>

#include <fmt/format.h>

#include "catalog/tree_walk.h"
#include "policy/resolver.h"
#include "policy/vocabulary.h"

namespace cairn {
namespace {

constexpr size_t kWalkStep = 256;  // inodes a walk looks at per hold of the catalog mutex

}  // namespace

Status AdminWalks::ApplyPolicy(const std::string& path, const Reconciler::ProgressFn& report) {
  auto ino = names_.LookupPath(path);
  if (!ino.ok()) return ino.status();
  return reconciler_.Apply(*ino, report);
}

Status AdminWalks::DryRunRules(std::shared_ptr<const RuleSet> candidate, const std::string& path,
                               const std::function<bool(const std::string&)>& report) {
  auto root = names_.LookupPath(path);
  if (!root.ok()) return root.status();
  PolicyContext now = archive_.policy_context();
  PolicyContext then = now;
  then.rules = std::move(candidate);
  Catalog& catalog = archive_.catalog();
  Status st;
  std::vector<std::string> lines;
  auto compare = [&](const InodeRecord& inode) {
    if (!S_ISREG(inode.mode)) return true;
    auto before = ResolvePolicy(catalog, inode.ino, now);
    auto after = ResolvePolicy(catalog, inode.ino, then);
    if (!before.ok() || !after.ok()) {
      st = before.ok() ? after.status() : before.status();
      return false;
    }
    std::string changes;
    for (size_t i = 0; i < after->fields.size(); i++) {
      const ResolvedField& a = after->fields[i];
      const ResolvedField& b = before->fields[i];
      if (a.value == b.value && a.source == b.source) continue;
      changes += fmt::format(" {}={}->{}", PolicyKeyName(a.key), b.value, a.value);
      if (a.source != b.source) changes += fmt::format(" ({})", a.source);
    }
    if (changes.empty()) return true;
    auto stamp = inode.layout_id != 0 ? catalog.LayoutStamp(inode.layout_id) : Result<std::string>(std::string());
    auto path = stamp.ok() ? PathOf(catalog, inode.ino) : Result<std::string>(stamp.status());
    if (!path.ok()) {
      st = path.status();
      return false;
    }
    bool reencode = inode.layout_id != 0 && !LayoutMatches(*stamp, *after);
    lines.push_back(fmt::format("{}:{}{}", *path, changes, reencode ? " [persisted: would be re-encoded]" : ""));
    return true;
  };
  // A step at a time under the catalog mutex; the lines go out without it (a client that
  // reads slowly must not hold up the mount).
  TreeWalk walk(*root);
  for (bool more = true; more;) {
    {
      std::lock_guard lock(archive_.catalog_mutex());
      auto stepped = walk.Step(catalog, kWalkStep, compare);
      if (!stepped.ok()) return stepped.status();
      CAIRN_RETURN_IF_ERROR(st);
      more = *stepped;
    }
    for (const std::string& line : lines) {
      if (!report(line)) return Status::OK();
    }
    lines.clear();
  }
  return Status::OK();
}

}  // namespace cairn
