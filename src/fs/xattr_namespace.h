// Which extended-attribute names cairn stores: the namespaces ext4 accepts (user.*,
// trusted.*, security.* and the two POSIX ACLs); any other name is EOPNOTSUPP, as on ext4.
//
// Who may use each namespace is checked by the kernel before a request reaches cairn
// (the mount always has default_permissions): fs/xattr.c xattr_permission() gives
// trusted.* to CAP_SYS_ADMIN only and user.* to regular files and directories, with write
// permission and the sticky-directory owner rule; the capability LSM asks CAP_SYS_ADMIN
// to write security.*; vfs_set_acl() asks the owner or CAP_FOWNER to change an ACL. The
// one thing the kernel leaves to a FUSE filesystem is other system.* names and unknown
// prefixes, which reach cairn unchecked; and listxattr, which the kernel does not filter.
#pragma once

#include <string_view>

#include "cairn/status.h"

namespace cairn {

// OK for a name cairn stores; otherwise EOPNOTSUPP naming it. Applies to get, set and remove.
Status CheckXattrNamespace(std::string_view name);

// Whether listxattr shows `name`: trusted.* only to a privileged caller (uid 0; FUSE does
// not pass capabilities), and never a name outside the accepted namespaces (stored by
// cairn versions before this check).
bool XattrListed(std::string_view name, bool privileged);

}  // namespace cairn
