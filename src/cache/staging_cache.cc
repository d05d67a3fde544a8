#include "cache/staging_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <functional>

#include <fmt/format.h>

namespace cairn {

StagingCache::StagingCache(std::string dir)
    : dir_(std::move(dir)), open_files_(std::make_unique<FdCache>(kMaxOpenFiles, kMaxPinnedFiles)) {
  int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  dir_errno_ = fd < 0 ? errno : 0;
  dir_fd_ = std::shared_ptr<const int>(new int(fd), [](const int* p) {
    if (*p >= 0) ::close(*p);
    delete p;
  });
}

Status StagingCache::DirOpen() const {
  if (*dir_fd_ >= 0) return Status::OK();
  return Status::FromErrno(fmt::format("staging cache: cannot open directory {}", dir_), dir_errno_);
}

std::string StagingCache::PathOf(uint64_t ino) const { return fmt::format("{}/{}", dir_, ino); }

Result<int> StagingCache::OpenFd(uint64_t ino, int flags) const {
  CAIRN_RETURN_IF_ERROR(DirOpen());
  const std::string name = NameOf(ino);
  flags |= O_RDWR | O_CLOEXEC | O_NOFOLLOW;
  int fd = -1;
  if (flags & O_CREAT) {  // a new name is durable only once the directory is synced
    fd = ::openat(*dir_fd_, name.c_str(), flags | O_EXCL, 0600);
    if (fd >= 0) *names_unsynced_ = true;
  }
  if (fd < 0) fd = ::openat(*dir_fd_, name.c_str(), flags, 0600);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(fmt::format("staging cache: no {}", PathOf(ino)));
    return Status::FromErrno(fmt::format("staging cache: cannot open {}", PathOf(ino)), errno);
  }
  // Only a file of its own: not a link to one elsewhere, which the daemon would write through.
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    ::close(fd);
    return Status::Posix(EIO, fmt::format("staging cache: {} is not a regular file with one name; refused",
                                          PathOf(ino)));
  }
  return fd;
}

Result<SharedFile> StagingCache::Open(uint64_t ino) const {
  return open_files_->Get(ino, [&] { return OpenFd(ino, O_CREAT); });
}

Result<SharedFile> StagingCache::OpenForWriting(uint64_t ino, bool* pinned) const {
  return open_files_->GetPinned(ino, [&] { return OpenFd(ino, O_CREAT); }, pinned);
}

void StagingCache::Unpin(uint64_t ino) const { open_files_->Unpin(ino); }

Status StagingCache::SyncNames() const {
  // A caller that finds the mark cleared by a sync still in flight, whose name that sync
  // may be the one to cover, waits for it to finish.
  std::lock_guard lock(*names_sync_);
  if (!names_unsynced_->exchange(false)) return Status::OK();
  Status synced = *dir_fd_ < 0 ? DirOpen() : (::fsync(*dir_fd_) == 0 ? Status::OK()
                                                : Status::FromErrno("staging cache: cannot sync directory " + dir_, errno));
  if (!synced.ok()) *names_unsynced_ = true;  // the next one tries again
  return synced;
}

Result<SharedFile> StagingCache::OpenExisting(uint64_t ino) const {
  return open_files_->Get(ino, [&] { return OpenFd(ino, 0); });
}

uint64_t StagingCache::Usage(uint64_t ino) const {
  struct stat st;
  if (*dir_fd_ < 0 || ::fstatat(*dir_fd_, NameOf(ino).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return 0;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

Status StagingCache::Remove(uint64_t ino) const {
  CAIRN_RETURN_IF_ERROR(DirOpen());
  if (::unlinkat(*dir_fd_, NameOf(ino).c_str(), 0) != 0 && errno != ENOENT) {
    return Status::FromErrno(fmt::format("staging cache: cannot remove {}", PathOf(ino)), errno);
  }
  open_files_->Forget(ino);  // after the unlink: a later Open creates the file anew
  return Status::OK();
}

Status StagingCache::Truncate(uint64_t ino, uint64_t size) const {
  auto fd = OpenFd(ino, 0);
  if (!fd.ok()) return fd.status().IsNotFound() ? Status::OK() : fd.status();
  int rc = ::ftruncate(*fd, static_cast<off_t>(size));
  int err = errno;
  ::close(*fd);
  if (rc != 0) return Status::FromErrno(fmt::format("staging cache: cannot truncate {}", PathOf(ino)), err);
  return Status::OK();
}

Status StagingCache::PunchHole(uint64_t ino, uint64_t offset, uint64_t length) const {
  auto fd = OpenFd(ino, 0);
  if (!fd.ok()) return fd.status().IsNotFound() ? Status::OK() : fd.status();
  int rc = ::fallocate(*fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                       static_cast<off_t>(length));
  int err = errno;
  ::close(*fd);
  if (rc != 0) return Status::FromErrno(fmt::format("staging cache: punch hole in {}", PathOf(ino)), err);
  return Status::OK();
}

Status StagingCache::ForEach(const std::function<void(const FileInfo&)>& fn) const {
  if (*dir_fd_ < 0) return dir_errno_ == ENOENT ? Status::OK() : DirOpen();
  const std::string cannot_list = fmt::format("staging cache: cannot list directory {}", dir_);
  int fd = ::openat(*dir_fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = fd < 0 ? nullptr : ::fdopendir(fd);
  if (!dir) {
    int err = errno;
    if (fd >= 0) ::close(fd);
    return Status::FromErrno(cannot_list, err);
  }
  Status st;
  for (;;) {
    errno = 0;
    struct dirent* entry = ::readdir(dir);
    if (!entry) {
      if (errno != 0) st = Status::FromErrno(cannot_list, errno);
      break;
    }
    uint64_t ino = 0;
    const char* name = entry->d_name;
    auto [ptr, ec] = std::from_chars(name, name + std::strlen(name), ino);
    if (ec != std::errc() || *ptr != '\0') continue;
    struct stat info;
    if (::fstatat(::dirfd(dir), name, &info, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // removed meanwhile
      st = Status::FromErrno(fmt::format("staging cache: cannot look at {}", PathOf(ino)), errno);
      break;
    }
    if (!S_ISREG(info.st_mode)) continue;  // not a cache file: OpenFd refuses it too
    fn({ino, static_cast<uint64_t>(info.st_blocks) * 512, static_cast<uint64_t>(info.st_size), info.st_mtim.tv_sec});
  }
  ::closedir(dir);
  return st;
}

Status StagingCache::ReadAt(int fd, uint64_t offset, std::span<uint8_t> dst) {
  size_t done = 0;
  while (done < dst.size()) {
    ssize_t n = ::pread(fd, dst.data() + done, dst.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("staging cache: read", errno);
    }
    if (n == 0) {
      std::memset(dst.data() + done, 0, dst.size() - done);
      break;
    }
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

Status StagingCache::WriteAt(int fd, uint64_t offset, std::span<const uint8_t> src) {
  size_t done = 0;
  while (done < src.size()) {
    ssize_t n = ::pwrite(fd, src.data() + done, src.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("staging cache: write", errno);
    }
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

namespace {

// Sets the length of a cache file to `size` when `longer_or_shorter(length, size)` holds for its length.
template <typename Compare>
Status ResizeIf(int fd, uint64_t size, Compare longer_or_shorter) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::FromErrno("staging cache: fstat", errno);
  if (!longer_or_shorter(static_cast<uint64_t>(st.st_size), size)) return Status::OK();
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return Status::FromErrno("staging cache: truncate", errno);
  return Status::OK();
}

}  // namespace

Status StagingCache::CutTo(int fd, uint64_t size) { return ResizeIf(fd, size, std::greater<uint64_t>()); }

Status StagingCache::ExtendTo(int fd, uint64_t size) { return ResizeIf(fd, size, std::less<uint64_t>()); }

Result<bool> StagingCache::HasData(int fd, uint64_t offset, uint64_t length) {
  off_t data = ::lseek(fd, static_cast<off_t>(offset), SEEK_DATA);
  if (data < 0) {
    if (errno == ENXIO) return false;  // no data at or after offset
    if (errno == EINVAL) return true;  // the filesystem cannot tell: read it
    return Status::FromErrno("staging cache: lseek(SEEK_DATA)", errno);
  }
  return static_cast<uint64_t>(data) < offset + length;
}

}  // namespace cairn
