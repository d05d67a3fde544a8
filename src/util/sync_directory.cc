#include "util/sync_directory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

namespace cairn {

Status SyncDirectory(const std::string& dir) {
  const char* name = dir.empty() ? "." : dir.c_str();
  int fd = ::open(name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(fmt::format("cannot open directory {} to sync it", name), errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  return rc == 0 ? Status::OK() : Status::FromErrno(fmt::format("cannot sync directory {}", name), err);
}

Status SyncDirectoryOf(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return SyncDirectory(slash == std::string::npos ? "" : path.substr(0, slash + 1));
}

}  // namespace cairn
