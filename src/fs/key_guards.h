// The master keys that guard an inode's data, for the checks behind "a user can neither
// encrypt with nor read through a master key they were not granted" (cairn(8), KEYS): open
// and create (Filesystem), changes of the attributes that decide encryption (Xattrs) and
// changes of names that can give a file another policy: rename, link, unlink (Namespace).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "archive/archive.h"
#include "fs/fs_types.h"
#include "keys/keystore.h"
#include "pipeline/file_state.h"

namespace cairn {

// The master keys guarding `ino`, each once: the one its data key is wrapped by (a file
// persisted encrypted) and the one its effective policy encrypts under now (a directory's:
// the key what inherits from it is encrypted under). Not among them: the keys of files
// below a directory that are encrypted under a key of their own. REQUIRES: catalog mutex held.
Result<std::vector<std::string>> KeysGuarding(Archive& archive, uint64_t ino);
// The same, given what PolicyKeyOf(archive, ino) is. REQUIRES: catalog mutex held.
Result<std::vector<std::string>> KeysGuarding(Archive& archive, uint64_t ino, const std::string& policy_key);
// The key the effective policy of `ino` encrypts under now, "" when it does not encrypt: what
// a change of names can change (the key a persisted file's data key is wrapped by stays until
// it is rewritten). REQUIRES: catalog mutex held.
Result<std::string> PolicyKeyOf(Archive& archive, uint64_t ino);

// How many of those cairn key delete names in its warning.
inline constexpr size_t kNamedKeyAttributesShown = 4;
// Up to `limit` files and directories whose user.cairn.key or trusted.cairn.key names master
// key `key`, as "PATH (ATTRIBUTE)". REQUIRES: catalog mutex held.
Result<std::vector<std::string>> AttributesNamingKey(Archive& archive, const std::string& key, size_t limit);

// The caller of a change that can alter which keys guard an inode, and the keystore as it
// was when they asked: made before the catalog lock (it may read the keystore). The caller's
// groups are read (from /proc, which waits for no disk) only when a key is to be authorized.
class KeyCheck {
 public:
  // The check `caller` needs: none for root, who may use every key.
  static std::optional<KeyCheck> For(FileKeys& keys, const Caller& caller);

  // OK when the caller may use every key of `before` (those guarding `ino` before the
  // change) and every key guarding it now; else EACCES naming the key and the caller, logged
  // with `operation`. REQUIRES: catalog mutex held.
  Status Check(Archive& archive, uint64_t ino, std::vector<std::string> before, const std::string& operation);
  // EACCES unless the caller may use every key of `keys`, which guard `ino` (logged with
  // `operation`).
  Status Authorize(uint64_t ino, const std::vector<std::string>& keys, const std::string& operation);
  // Whether the keystore may hold a master key: false only when it does not exist or is
  // empty (without a key no data can be sealed or unsealed), true when it cannot be read.
  bool MayHoldKeys() const {
    return keystore_.ok() ? !(*keystore_)->names().empty() : !keystore_.status().IsNotFound();
  }

 private:
  KeyCheck(FileKeys& keys, const Caller& caller) : keys_(keys), caller_(caller), keystore_(keys.CurrentKeystore()) {}

  FileKeys& keys_;
  const Caller caller_;
  std::optional<std::vector<gid_t>> gids_;  // the caller's, once read
  Result<std::shared_ptr<const Keystore>> keystore_;
};

// The inodes a change may give another policy, each with the keys guarding it before the
// change: a name moved, added or taken away, or a policy attribute of a directory changed.
// Where the change alters the key an inode's policy encrypts under, the caller must be granted
// the keys guarding it before and after (KeyCheck::Check). With `check` null (root) nothing is
// noted or checked.
class GuardedInodes {
 public:
  GuardedInodes(Archive& archive, const FileState& state, KeyCheck* check);

  // Notes the keys of `ino` before the change, and of everything below it when it is a
  // directory: a change to a directory can change the policy of what is below it without
  // changing its own (a path rule matching files below it only, a key its files inherit while
  // the directory itself does not encrypt). Below it only when the keystore may hold a key
  // (KeyCheck::MayHoldKeys): the walk resolves the policy of every inode. Call it after the
  // checks that may refuse the change. REQUIRES: catalog mutex, open transaction.
  Status Before(uint64_t ino);
  // After the change: EACCES (the transaction takes the change back) where it is refused. An
  // inode left without a name is checked only while open (only then may more of its data be
  // persisted); it keeps the policy of its last name (Archive::KeepPolicyOfUnlinked), so its
  // key does not change. REQUIRES: as Before.
  Status After(const std::string& operation);

 private:
  Status Note(uint64_t ino);

  struct Noted {
    uint64_t ino;
    std::vector<std::string> guarding;  // KeysGuarding
    std::string policy_key;             // PolicyKeyOf
  };
  Archive& archive_;
  const FileState& state_;
  KeyCheck* const check_;
  std::vector<Noted> before_;
};

// The check a setattr by `caller` needs: a change of what a rule tests (owner, group, size,
// times) can take a file out of a rule that encrypts it, or into one. None for root, nor
// when no rule tests what `request` changes. Made before the catalog lock (see KeyCheck).
std::optional<KeyCheck> KeyCheckForSetAttr(Archive& archive, const SetAttrRequest& request, const Caller& caller);

}  // namespace cairn
