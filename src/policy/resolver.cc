#include "policy/resolver.h"

#include <fmt/format.h>

namespace cairn {
namespace {

// "/a/b" for a directory inode, from the names in the catalog.
std::string PathOf(Catalog& catalog, uint64_t ino) {
  std::string path;
  for (int depth = 0; ino != kRootInode && depth < 4096; depth++) {
    auto name = catalog.NameOf(ino);
    if (!name.ok()) return "?" + path;
    path = "/" + name->second + path;
    ino = name->first;
  }
  return path.empty() ? "/" : path;
}

}  // namespace

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

Result<ResolvedPolicy> ResolvePolicy(Catalog& catalog, uint64_t ino, uint64_t default_segment_size) {
  ResolvedPolicy policy;
  size_t unresolved = 0;
  for (PolicyKey key : kAllPolicyKeys) {
    policy.fields.push_back({key, DefaultPolicyValue(key, default_segment_size), ""});
    unresolved++;
  }
  uint64_t at = ino;
  for (int depth = 0; unresolved > 0 && depth < 4096; depth++) {
    for (auto& field : policy.fields) {
      if (!field.source.empty()) continue;
      auto value = catalog.GetXattr(at, fmt::format("{}{}", kPolicyPrefix, PolicyKeyName(field.key)));
      if (!value.ok()) continue;
      field.value.assign(value->begin(), value->end());
      field.source = at == ino ? "file" : "dir:" + PathOf(catalog, at);
      unresolved--;
    }
    if (at == kRootInode) break;
    auto parent = catalog.NameOf(at);
    if (!parent.ok()) break;  // unlinked: only its own attributes apply
    at = parent->first;
  }
  for (auto& field : policy.fields) {
    if (field.source.empty()) field.source = "default";
  }
  return policy;
}

}  // namespace cairn
