#include "archive/private_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

namespace cairn {
namespace {

struct PrivateEntry {
  const char* name;
  bool directory;
  bool create;  // made empty when missing, so that it has its owner from the start
};
constexpr PrivateEntry kPrivateEntries[] = {
    {"catalog.db", false, false}, {"catalog.db-wal", false, false}, {"catalog.db-shm", false, false},
    {"cairn.conf", false, false}, {"cairn.log", false, true},       {"lock", false, false},
    {"cache", true, false},       {"disks", true, false},
};

Status MakePrivate(const std::string& path, const PrivateEntry& entry, const struct stat& owner) {
  // An owner other than us could plant a link to make us chmod or chown what they do not own;
  // our own archive may keep its catalog or cache elsewhere through a symlink.
  bool foreign = owner.st_uid != ::geteuid();
  int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | (entry.directory ? O_DIRECTORY : 0) | (foreign ? O_NOFOLLOW : 0);
  int fd = ::open(path.c_str(), flags | (entry.create ? O_CREAT : 0), kPrivateFileMode);
  if (fd < 0 && errno == ENOENT) return Status::OK();
  if (fd < 0 && errno == ELOOP) {
    return Status::Permission(fmt::format("{} is a symbolic link in an archive owned by uid {}; refusing to use it",
                                          path, owner.st_uid));
  }
  if (fd < 0) return Status::FromErrno(fmt::format("cannot make {} private", path), errno);
  struct stat st;
  Status result;
  mode_t mode = entry.directory ? kPrivateDirMode : kPrivateFileMode;
  if (::fstat(fd, &st) != 0) {
    result = Status::FromErrno(fmt::format("cannot make {} private", path), errno);
  } else if (!entry.directory && (!S_ISREG(st.st_mode) || (foreign && st.st_nlink != 1))) {
    result = Status::Permission(fmt::format("{} is not a regular file with one name; refusing to use it", path));
  } else if ((st.st_mode & 07777) != mode && ::fchmod(fd, mode) != 0) {
    result = Status::FromErrno(fmt::format("cannot chmod {}", path), errno);
  } else if (::geteuid() == 0 && (st.st_uid != owner.st_uid || st.st_gid != owner.st_gid) &&
             ::fchown(fd, owner.st_uid, owner.st_gid) != 0) {
    result = Status::FromErrno(fmt::format("cannot chown {}", path), errno);
  }
  ::close(fd);
  return result;
}

}  // namespace

Status MakeArchivePrivate(const std::string& dir) {
  struct stat owner;
  if (::stat(dir.c_str(), &owner) != 0) return Status::FromErrno(fmt::format("archive {}", dir), errno);
  for (const PrivateEntry& entry : kPrivateEntries) {
    CAIRN_RETURN_IF_ERROR(MakePrivate(dir + "/" + entry.name, entry, owner));
  }
  return Status::OK();
}

Status GiveToArchiveOwner(const std::string& dir, int fd, const std::string& path) {
  if (::geteuid() != 0) return Status::OK();
  struct stat owner;
  if (::stat(dir.c_str(), &owner) != 0) return Status::FromErrno(fmt::format("archive {}", dir), errno);
  if (::fchown(fd, owner.st_uid, owner.st_gid) != 0) {
    return Status::FromErrno(fmt::format("cannot chown {}", path), errno);
  }
  return Status::OK();
}

Status CheckArchiveAccess(const std::string& dir) {
  if (::access((dir + "/cairn.conf").c_str(), R_OK) == 0 || errno != EACCES) return Status::OK();
  struct stat st;
  std::string owner = ::stat(dir.c_str(), &st) == 0 ? fmt::format(" (uid {})", st.st_uid) : "";
  return Status::Permission(fmt::format("permission denied: {} is private to root and its owner{}", dir, owner));
}

}  // namespace cairn
