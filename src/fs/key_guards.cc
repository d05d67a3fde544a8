#include "fs/key_guards.h"

#include <utility>

#include "fs/catalog_lookups.h"
#include "policy/resolver.h"
#include "util/log.h"

namespace cairn {

Result<std::vector<std::string>> KeysGuarding(Archive& archive, uint64_t ino) {
  Catalog& catalog = archive.catalog();
  std::vector<std::string> keys;
  auto row = IfFound(catalog.GetFileKey(ino));
  if (!row.ok()) return row.status();
  if (*row) keys.push_back((*row)->key_name);
  // Data not persisted yet has no data key: its policy's key guards it all the same.
  auto key = PolicyKeyOf(archive, ino);
  if (!key.ok()) return key.status();
  if (!key->empty() && (keys.empty() || keys[0] != *key)) keys.push_back(*key);
  return keys;
}

Result<std::string> PolicyKeyOf(Archive& archive, uint64_t ino) {
  auto policy = ResolvePolicy(archive.catalog(), ino, archive.policy_context());
  if (!policy.ok()) return policy.status();
  const std::string& key = policy->Get(PolicyKey::kKey).value;
  if (policy->Get(PolicyKey::kEncrypt).value == "off" || key == "none") return std::string();
  return key;
}

std::optional<KeyCheck> KeyCheck::For(FileKeys& keys, const Caller& caller) {
  if (caller.uid == 0) return std::nullopt;
  return KeyCheck(keys, caller);
}

Status KeyCheck::Check(Archive& archive, uint64_t ino, std::vector<std::string> before, const std::string& operation) {
  auto after = KeysGuarding(archive, ino);
  if (!after.ok()) return after.status();
  before.insert(before.end(), after->begin(), after->end());
  return Authorize(ino, before, operation);
}

Status KeyCheck::Authorize(uint64_t ino, const std::vector<std::string>& keys, const std::string& operation) {
  if (keys.empty()) return Status::OK();  // a keystore that cannot be read matters no more
  if (!keystore_.ok() && !keystore_.status().IsNotFound()) return keystore_.status();
  if (!gids_) gids_ = caller_.groups();
  for (const std::string& key : keys) {
    Status allowed = keys_.Authorize(keystore_.ok() ? keystore_->get() : nullptr, key, caller_.uid, *gids_);
    if (!allowed.ok()) {
      LogWarning("{} on inode {} refused: {}", operation, ino, allowed.message());
      return allowed;
    }
  }
  return Status::OK();
}

std::optional<KeyCheck> KeyCheckForSetAttr(Archive& archive, const SetAttrRequest& request, const Caller& caller) {
  using Kind = Condition::Kind;
  std::shared_ptr<const RuleSet> rules = archive.policy_context().rules;
  bool tested = rules && ((request.uid && rules->Tests(Kind::kOwner)) || (request.gid && rules->Tests(Kind::kGroup)) ||
                          (request.size && rules->Tests(Kind::kSize)) ||
                          (request.mtime_ns && rules->Tests(Kind::kMtime)) ||
                          (request.atime_ns && rules->Tests(Kind::kAtime)));
  return tested ? KeyCheck::For(archive.file_keys(), caller) : std::nullopt;
}

}  // namespace cairn
