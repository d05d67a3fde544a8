#include "fs/key_guards.h"

#include "fs/catalog_lookups.h"
#include "policy/resolver.h"

namespace cairn {

Result<std::vector<std::string>> KeysGuarding(Archive& archive, uint64_t ino) {
  Catalog& catalog = archive.catalog();
  std::vector<std::string> keys;
  auto row = IfFound(catalog.GetFileKey(ino));
  if (!row.ok()) return row.status();
  if (*row) keys.push_back((*row)->key_name);
  // Data not persisted yet has no data key: its policy's key guards it all the same.
  auto policy = ResolvePolicy(catalog, ino, archive.policy_context());
  if (!policy.ok()) return policy.status();
  const std::string& key = policy->Get(PolicyKey::kKey).value;
  if (policy->Get(PolicyKey::kEncrypt).value != "off" && key != "none" && (keys.empty() || keys[0] != key)) {
    keys.push_back(key);
  }
  return keys;
}

}  // namespace cairn
