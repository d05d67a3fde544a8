#include "fs/key_guards.h"

#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "catalog/tree_walk.h"
#include "fs/catalog_lookups.h"
#include "policy/resolver.h"
#include "policy/vocabulary.h"
#include "util/log.h"

namespace cairn {

Result<std::vector<std::string>> KeysGuarding(Archive& archive, uint64_t ino) {
  auto key = PolicyKeyOf(archive, ino);
  if (!key.ok()) return key.status();
  return KeysGuarding(archive, ino, *key);
}

Result<std::vector<std::string>> KeysGuarding(Archive& archive, uint64_t ino, const std::string& policy_key) {
  std::vector<std::string> keys;
  auto row = IfFound(archive.catalog().GetFileKey(ino));
  if (!row.ok()) return row.status();
  if (*row) keys.push_back((*row)->key_name);
  // Data not persisted yet has no data key: its policy's key guards it all the same.
  if (!policy_key.empty() && (keys.empty() || keys[0] != policy_key)) keys.push_back(policy_key);
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

GuardedInodes::GuardedInodes(Archive& archive, const FileState& state, KeyCheck* check)
    : archive_(archive), state_(state), check_(check) {}

Status GuardedInodes::Before(uint64_t ino) {
  if (!check_) return Status::OK();
  if (!check_->MayHoldKeys()) return Note(ino);
  TreeWalk walk(ino);
  Status noted = Status::OK();
  auto note = [&](const InodeRecord& inode) {
    noted = Note(inode.ino);
    return noted.ok();
  };
  for (;;) {
    auto more = walk.Step(archive_.catalog(), SIZE_MAX, note);
    if (!more.ok()) return more.status();
    if (!noted.ok()) return noted;
    if (!*more) return Status::OK();
  }
}

Status GuardedInodes::Note(uint64_t ino) {
  auto policy_key = PolicyKeyOf(archive_, ino);
  if (!policy_key.ok()) return policy_key.status();
  auto guarding = KeysGuarding(archive_, ino, *policy_key);
  if (!guarding.ok()) return guarding.status();
  before_.push_back({ino, std::move(*guarding), std::move(*policy_key)});
  return Status::OK();
}

Status GuardedInodes::After(const std::string& operation) {
  for (Noted& noted : before_) {
    auto inode = archive_.catalog().GetInode(noted.ino);
    if (!inode.ok()) return inode.status();
    auto live = state_.live.find(noted.ino);
    bool open = live != state_.live.end() && live->second.nopen > 0;
    if (inode->nlink == 0 && !open) continue;
    auto policy_key = PolicyKeyOf(archive_, noted.ino);
    if (!policy_key.ok()) return policy_key.status();
    if (*policy_key == noted.policy_key) continue;
    CAIRN_RETURN_IF_ERROR(check_->Check(archive_, noted.ino, std::move(noted.guarding), operation));
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

Result<std::vector<std::string>> AttributesNamingKey(Archive& archive, const std::string& key, size_t limit) {
  std::vector<std::string> found;
  for (std::string_view prefix : {kPolicyPrefix, kTrustedPolicyPrefix}) {
    std::string attribute = std::string(prefix) + "key";
    auto inodes = archive.catalog().InodesWithXattr(attribute, key, limit - found.size());
    if (!inodes.ok()) return inodes.status();
    for (uint64_t ino : *inodes) {
      auto path = PathOf(archive.catalog(), ino);
      if (!path.ok()) return path.status();
      found.push_back(fmt::format("{} ({})", *path, attribute));
    }
    if (found.size() == limit) break;
  }
  return found;
}

}  // namespace cairn
