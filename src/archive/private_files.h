// The archive's private files: the catalog and its WAL, cairn.conf, cairn.log and the lock
// are 0600 and cache/ and disks/ 0700, owned by the archive's owner (the owner of the
// archive directory), whatever the umask. Others are told the archive is private.
#pragma once

#include <sys/types.h>

#include <string>

#include "cairn/status.h"

namespace cairn {

constexpr mode_t kPrivateFileMode = 0600;
constexpr mode_t kPrivateDirMode = 0700;

// Gives what exists of the private files in `dir` (cairn.log is created) their modes and,
// when run as root, the owner of `dir`. When that owner is not us, a symlink or a file with
// other hard links is refused. For archives made by an older cairn, or files copied in.
Status MakeArchivePrivate(const std::string& dir);

// When run as root, gives the file open as `fd` (`path`, being written into the archive
// `dir`) to the owner of `dir`, as MakeArchivePrivate would.
Status GiveToArchiveOwner(const std::string& dir, int fd, const std::string& path);

// Permission "permission denied: DIR is private to root and its owner (uid N)" when the
// caller may not read DIR/cairn.conf; OK otherwise (a missing file is the caller's to report).
Status CheckArchiveAccess(const std::string& dir);

}  // namespace cairn
