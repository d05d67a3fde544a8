#include "archive/archive_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "archive/private_files.h"

namespace cairn {

namespace {
constexpr int kProbeRetries = 20;  // 10 ms apart
}  // namespace

Result<ArchiveLock> ArchiveLock::Acquire(const std::string& dir) {
  std::string path = dir + "/lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) return Status::FromErrno(fmt::format("cannot open {}", path), errno);
  // Only a file of its own: the pid is written through it, by root too.
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    ::close(fd);
    return Status::Permission(fmt::format("{} is not a regular file with one name; refused", path));
  }
  // Holder() probes with a shared lock for an instant (cairn status, umount, mount --wait):
  // a moment's wait tells that from a holder.
  int locked = -1;
  for (int tries = 0;; tries++) {
    locked = ::flock(fd, LOCK_EX | LOCK_NB);
    if (locked == 0 || errno != EWOULDBLOCK || tries == kProbeRetries) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (locked != 0) {
    int err = errno;
    ::close(fd);  // not ours: the holder's pid stays
    if (err != EWOULDBLOCK) return Status::FromErrno(fmt::format("cannot lock {}", path), err);
    int holder = Holder(dir);
    if (holder == 0) return Status::Busy(fmt::format("archive {} was in use by another cairn process; try again", dir));
    return Status::Busy(fmt::format("archive {} is in use by another cairn process ({}); unmount it first", dir,
                                    HolderName(holder)));
  }
  ArchiveLock lock(fd);
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    return Status::FromErrno(fmt::format("cannot write {}", path), errno);
  }
  return lock;
}

int ArchiveLock::Holder(const std::string& dir) {
  std::string path = dir + "/lock";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  int holder = 0;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    char buf[32] = {};
    if (::pread(fd, buf, sizeof buf - 1, 0) > 0) holder = std::atoi(buf);
    if (holder == 0) holder = -1;  // locked, pid not yet written
  }
  ::close(fd);
  return holder;
}

std::string ArchiveLock::HolderName(int holder) {
  return holder > 0 ? fmt::format("pid {}", holder) : "a process that has not yet written its pid";
}

ArchiveLock& ArchiveLock::operator=(ArchiveLock&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void ArchiveLock::Release() {
  if (fd_ < 0) return;
  if (::ftruncate(fd_, 0) != 0) {
    // A stale pid is harmless: the flock, not the file's content, is the lock.
  }
  ::close(fd_);
  fd_ = -1;
}

}  // namespace cairn
