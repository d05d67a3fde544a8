#include "fs/xattrs.h"

#include <linux/limits.h>
#include <sys/xattr.h>

#include <cerrno>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "fs/catalog_lookups.h"
#include "fs/key_guards.h"
#include "fs/posix_acl.h"
#include "fs/xattr_namespace.h"
#include "policy/resolver.h"
#include "policy/vocabulary.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/printable.h"

namespace cairn {
namespace {

// The check a change of `name` by `caller` needs: none for root (who may use every key) nor
// for an attribute that cannot change encryption. Cairn's encrypt, key and policy settings
// can (DecidesEncryption), and so can an attribute a rule tests ("where xattr user.project":
// taking it away may take the rule's encryption with it).
std::optional<KeyCheck> KeyCheckFor(Archive& archive, const std::string& name, const Caller& caller) {
  std::shared_ptr<const RuleSet> rules = archive.policy_context().rules;
  if (!DecidesEncryption(name) && !(rules && rules->TestsXattr(name))) return std::nullopt;
  return KeyCheck::For(archive.file_keys(), caller);
}

// ENOSPC when one more name would make the file's name list longer than listxattr(2) can
// return (XATTR_LIST_MAX, 64 KiB): past it, no program could list or copy its attributes.
Status CheckListRoom(Catalog& catalog, uint64_t ino, const std::string& name) {
  auto names = catalog.ListXattrs(ino);
  if (!names.ok()) return names.status();
  size_t length = name.size() + 1;
  for (const std::string& listed : *names) length += listed.size() + 1;
  if (length <= XATTR_LIST_MAX) return Status::OK();
  return Status::Posix(ENOSPC, fmt::format("{}: the names of a file's extended attributes take at most {} bytes",
                                           Abbreviated(name, 80), XATTR_LIST_MAX));
}

}  // namespace

Result<std::vector<uint8_t>> Xattrs::Get(uint64_t ino, const std::string& name) {
  CAIRN_RETURN_IF_ERROR(CheckXattrNamespace(name));
  std::lock_guard lock(archive_.catalog_mutex());
  if (name.starts_with(kPolicyPrefix) && IsComputedPolicyKey(std::string_view(name).substr(kPolicyPrefix.size()))) {
    auto text = policy_.Computed(ino, name.substr(kPolicyPrefix.size()));
    if (!text.ok()) return text.status();
    return std::vector<uint8_t>(text->begin(), text->end());
  }
  auto value = archive_.catalog().GetXattr(ino, name);
  if (!value.ok() && value.status().IsNotFound()) return Status::Posix(ENODATA, name);
  return value;
}

Status Xattrs::Set(uint64_t ino, const std::string& name, std::span<const uint8_t> value, int flags,
                   const Caller& caller) {
  CAIRN_RETURN_IF_ERROR(CheckXattrNamespace(name));
  bool policy_key = IsPolicyXattr(name);
  if (name == std::string(kPolicyPrefix) + "key" || name == std::string(kTrustedPolicyPrefix) + "key") {
    // Before the catalog lock: it reads the keystore.
    std::string key_name(value.begin(), value.end());
    if (key_name != "none" && CheckKeyName(key_name).ok()) {
      Status usable = archive_.file_keys().CheckSelectable(key_name, caller.uid, caller.groups());
      if (!usable.ok()) {
        LogWarning("setxattr {} refused: {}", name, usable.message());
        return usable;
      }
    }
  }
  std::optional<KeyCheck> key_check = KeyCheckFor(archive_, name, caller);
  // An access ACL set by someone outside the file's group clears setgid, as chmod would
  // (the kernel leaves that to the filesystem once it handles ACLs). Read before the lock.
  std::vector<uint32_t> groups = name == kAclAccessXattr && caller.uid != 0 ? caller.groups() : std::vector<uint32_t>();
  std::vector<uint8_t> canonical;
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  return InTransaction(catalog, [&]() -> Status {
    auto inode = GetInodeOrENOENT(catalog, ino);
    if (!inode.ok()) return inode.status();
    auto guarding = key_check ? KeysGuarding(archive_, ino) : std::vector<std::string>();
    if (!guarding.ok()) return guarding.status();
    if (policy_key) {
      auto checked = policy_.Check(ino, name, value);
      if (!checked.ok()) return checked.status();
      canonical.assign(checked->begin(), checked->end());
      value = canonical;
    }
    // A new setting, or an attribute a rule may look at: the file may be out of policy now.
    if (policy_key || (name.starts_with("user.") && inode->layout_id != 0)) {
      CAIRN_RETURN_IF_ERROR(catalog.QueuePolicyCheck(ino));
    }
    auto existing = IfFound(catalog.GetXattr(ino, name));
    if (!existing.ok()) return existing.status();
    bool exists = existing->has_value();
    if ((flags & XATTR_CREATE) && exists) return Status::Posix(EEXIST, name);
    if ((flags & XATTR_REPLACE) && !exists) return Status::Posix(ENODATA, name);
    if (!exists) CAIRN_RETURN_IF_ERROR(CheckListRoom(catalog, ino, name));
    std::vector<uint8_t> bytes(value.begin(), value.end());
    if (name == kAclAccessXattr) {
      int perms = AclPermissionBits(bytes);
      if (perms < 0) return Status::Posix(EINVAL, "malformed POSIX ACL");
      inode->mode = (inode->mode & ~0777u) | static_cast<uint32_t>(perms);
      if (caller.uid != 0 && std::find(groups.begin(), groups.end(), inode->gid) == groups.end()) {
        inode->mode &= ~static_cast<uint32_t>(S_ISGID);
      }
      inode->ctime_ns = NowNs();
      if (AclIsMinimal(bytes)) {  // the mode now says everything the ACL said
        Status removed = catalog.RemoveXattr(ino, name);
        if (!removed.ok() && !removed.IsNotFound()) return removed;
        return catalog.UpdateInode(*inode);
      }
    } else if (name == kAclDefaultXattr) {
      if (!IsDir(*inode)) return Status::Posix(EACCES, "only directories have default ACLs");
      if (AclPermissionBits(bytes) < 0) return Status::Posix(EINVAL, "malformed POSIX ACL");
    }
    GuardedInodes below(archive_, state_, key_check && IsDir(*inode) && policy_key ? &*key_check : nullptr);
    CAIRN_RETURN_IF_ERROR(below.Before(ino));
    CAIRN_RETURN_IF_ERROR(catalog.SetXattr(ino, name, bytes));
    // Refused, the transaction takes the change back.
    if (key_check) CAIRN_RETURN_IF_ERROR(key_check->Check(archive_, ino, std::move(*guarding), "setxattr " + name));
    CAIRN_RETURN_IF_ERROR(below.After("setxattr " + name));
    inode->ctime_ns = NowNs();
    return catalog.UpdateInode(*inode);
  });
}

Result<std::vector<std::string>> Xattrs::List(uint64_t ino, const Caller& caller) {
  std::lock_guard lock(archive_.catalog_mutex());
  auto inode = GetInodeOrENOENT(archive_.catalog(), ino);
  if (!inode.ok()) return inode.status();
  auto listed = archive_.catalog().ListXattrs(ino);
  if (!listed.ok()) return listed.status();
  std::vector<std::string> names = std::move(*listed);
  std::erase_if(names, [&](const std::string& name) { return !XattrListed(name, caller.uid == 0); });
  return names;
}

Status Xattrs::Remove(uint64_t ino, const std::string& name, const Caller& caller) {
  CAIRN_RETURN_IF_ERROR(CheckXattrNamespace(name));
  if (name.starts_with(kPolicyPrefix) && IsComputedPolicyKey(std::string_view(name).substr(kPolicyPrefix.size()))) {
    return Status::Posix(EPERM, fmt::format("{} is computed by cairn and cannot be removed", name));
  }
  bool policy_key = IsPolicyXattr(name);
  std::optional<KeyCheck> key_check = KeyCheckFor(archive_, name, caller);
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  return InTransaction(catalog, [&]() -> Status {
    auto inode = GetInodeOrENOENT(catalog, ino);
    if (!inode.ok()) return inode.status();
    auto existing = IfFound(catalog.GetXattr(ino, name));
    if (!existing.ok()) return existing.status();
    if (!existing->has_value()) return Status::Posix(ENODATA, name);  // before any walk below a directory
    if (name.starts_with(kPolicyPrefix)) {  // a user's setting under a lock stays, as it cannot be set
      auto key = ParsePolicyKey(std::string_view(name).substr(kPolicyPrefix.size()));
      auto lock = key.ok() ? LockCovering(catalog, ino, *key) : Result<std::string>(std::string());
      if (!lock.ok()) return lock.status();
      if (!lock->empty()) {
        LogWarning("removexattr {} refused: it is locked by the admin at {}", name, *lock);
        return Status::Posix(EPERM, fmt::format("{} is locked by the admin at {}", name, *lock));
      }
    }
    auto guarding = key_check ? KeysGuarding(archive_, ino) : std::vector<std::string>();
    if (!guarding.ok()) return guarding.status();
    GuardedInodes below(archive_, state_, key_check && IsDir(*inode) && policy_key ? &*key_check : nullptr);
    CAIRN_RETURN_IF_ERROR(below.Before(ino));
    CAIRN_RETURN_IF_ERROR(catalog.RemoveXattr(ino, name));
    if (key_check) CAIRN_RETURN_IF_ERROR(key_check->Check(archive_, ino, std::move(*guarding), "removexattr " + name));
    CAIRN_RETURN_IF_ERROR(below.After("removexattr " + name));
    if (policy_key || (name.starts_with("user.") && inode->layout_id != 0)) {
      CAIRN_RETURN_IF_ERROR(catalog.QueuePolicyCheck(ino));
    }
    inode->ctime_ns = NowNs();
    return catalog.UpdateInode(*inode);
  });
}

}  // namespace cairn
