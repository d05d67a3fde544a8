// Xattrs stores extended attributes in the catalog: the namespaces cairn keeps
// (xattr_namespace.h), POSIX ACLs kept in step with the mode, and cairn's policy keys,
// checked and computed by PolicyXattrs. A change a rule may look at queues the file for a
// policy check. Thread-safe: each call takes the catalog mutex.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "archive/archive.h"
#include "fs/fs_types.h"
#include "fs/policy_xattrs.h"
#include "pipeline/file_state.h"

namespace cairn {

class Xattrs {
 public:
  Xattrs(Archive& archive, const FileState& state) : archive_(archive), state_(state), policy_(archive, state) {}

  // Names outside the namespaces cairn stores are EOPNOTSUPP (see xattr_namespace.h).
  Result<std::vector<uint8_t>> Get(uint64_t ino, const std::string& name);
  // flags: 0, XATTR_CREATE or XATTR_REPLACE. A key= policy must name a master key of the
  // keystore that `caller` may use (EINVAL, EACCES). A change of an attribute that decides
  // encryption (DecidesEncryption, or one a rule tests) needs `caller` to be allowed every
  // master key guarding the inode before and after it (fs/key_guards.h; EACCES), and on a
  // directory, of every inode below it whose key the change alters.
  Status Set(uint64_t ino, const std::string& name, std::span<const uint8_t> value, int flags, const Caller& caller);
  // trusted.* names are listed to root only, as ext4 lists them to CAP_SYS_ADMIN only.
  Result<std::vector<std::string>> List(uint64_t ino, const Caller& caller);
  // Needs the keys as Set does.
  Status Remove(uint64_t ino, const std::string& name, const Caller& caller);

 private:
  Archive& archive_;
  const FileState& state_;
  PolicyXattrs policy_;
};

}  // namespace cairn
