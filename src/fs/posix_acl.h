// The Linux xattr encoding of POSIX ACLs (system.posix_acl_access / _default), and the
// two rules a filesystem must apply itself under FUSE_CAP_POSIX_ACL: inheriting a
// directory's default ACL at create, and keeping the ACL in step with chmod.
#pragma once

#include <cstdint>
#include <vector>

namespace cairn {

inline constexpr const char* kAclAccessXattr = "system.posix_acl_access";
inline constexpr const char* kAclDefaultXattr = "system.posix_acl_default";

// Applies `mode`'s permission bits to `acl` as creating a file with a default ACL does
// (POSIX 1003.1e create rule) and narrows *mode to what the ACL then grants.
// False when `acl` is malformed (then neither is changed).
bool AclApplyCreateMode(std::vector<uint8_t>& acl, uint32_t* mode);
// Rewrites the owner, group-class and other entries of `acl` from `mode` (chmod).
bool AclApplyChmod(std::vector<uint8_t>& acl, uint32_t mode);
// The permission bits (0777 part of a mode) an access ACL stands for; -1 if malformed.
int AclPermissionBits(const std::vector<uint8_t>& acl);
// True when `acl` has only the owner, group and other entries: the mode says it all, so
// (like ext4) it is not stored.
bool AclIsMinimal(const std::vector<uint8_t>& acl);

}  // namespace cairn
