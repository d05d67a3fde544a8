// ImageDisk: a Disk backed by a sparse image file or a block device, using
// pread/pwrite/fdatasync. The only place in cairn that does I/O on a disk.
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <vector>

#include <fmt/format.h>

#include "cairn/disk.h"
#include "util/coding.h"

namespace cairn {
namespace {

class ImageDisk final : public Disk {
 public:
  ImageDisk(std::string name, int fd, uint64_t size, bool block_device)
      : name_(std::move(name)), fd_(fd), size_(size), block_device_(block_device) {}
  ~ImageDisk() override { ::close(fd_); }

  Status ReadAt(uint64_t offset, std::span<uint8_t> dst) override {
    size_t done = 0;
    while (done < dst.size()) {
      ssize_t n = ::pread(fd_, dst.data() + done, dst.size() - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno(fmt::format("{}: read of {} bytes at {}", name_, dst.size(), offset), errno);
      }
      if (n == 0) {
        return Status::Corruption(fmt::format("{}: short read: {} of {} bytes at offset {} (device is {} bytes)",
                                              name_, done, dst.size(), offset, size_));
      }
      done += static_cast<size_t>(n);
    }
    return Status::OK();
  }

  Status WriteAt(uint64_t offset, std::span<const uint8_t> src) override {
    if (offset + src.size() > size_) {
      return Status::InvalidArgument(
          fmt::format("{}: write of {} bytes at {} passes the end of the device ({} bytes)", name_, src.size(),
                      offset, size_));
    }
    size_t done = 0;
    while (done < src.size()) {
      ssize_t n = ::pwrite(fd_, src.data() + done, src.size() - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno(fmt::format("{}: write of {} bytes at {}", name_, src.size(), offset), errno);
      }
      done += static_cast<size_t>(n);
    }
    return Status::OK();
  }

  // One pwritev: the pieces go from where they are to the device, never joined in memory.
  Status WriteGatherAt(uint64_t offset, std::span<const std::span<const uint8_t>> pieces) override {
    std::vector<iovec> iov;
    uint64_t total = 0;
    for (std::span<const uint8_t> piece : pieces) {
      if (piece.empty()) continue;
      iov.push_back({const_cast<uint8_t*>(piece.data()), piece.size()});
      total += piece.size();
    }
    if (offset + total > size_) {
      return Status::InvalidArgument(fmt::format("{}: write of {} bytes at {} passes the end of the device ({} bytes)",
                                                 name_, total, offset, size_));
    }
    if (iov.size() > IOV_MAX) return Disk::WriteGatherAt(offset, pieces);
    for (size_t first = 0, done = 0; first < iov.size();) {
      ssize_t n = ::pwritev(fd_, &iov[first], static_cast<int>(iov.size() - first), static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno(fmt::format("{}: write of {} bytes at {}", name_, total, offset), errno);
      }
      done += static_cast<size_t>(n);
      // Past what was written: whole pieces dropped, the rest of a cut one kept.
      for (auto left = static_cast<size_t>(n); left > 0 && first < iov.size();) {
        size_t take = std::min(left, iov[first].iov_len);
        iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + take;
        iov[first].iov_len -= take;
        left -= take;
        if (iov[first].iov_len == 0) first++;
      }
    }
    return Status::OK();
  }

  // Linux reports a failed write-back once, to one fdatasync; the next may succeed with the
  // pages lost. So once one has failed, every later sync fails too (as the catalog's WalSync).
  Status Sync() override {
    int failed = sync_errno_.load();
    if (failed == 0 && ::fdatasync(fd_) != 0) {
      failed = errno;
      sync_errno_.store(failed);
      return Status::FromErrno(fmt::format("{}: fdatasync", name_), failed);
    }
    if (failed != 0) {
      return Status::FromErrno(
          fmt::format("{}: an earlier fdatasync failed, so what was written since may not be on it", name_), failed);
    }
    return Status::OK();
  }

  uint64_t DataEnd(uint64_t from, uint64_t to) override {
    if (block_device_) return to;
    uint64_t end = from;
    for (uint64_t at = from; at < to;) {  // data, hole, data, ...: where the last data before `to` ends
      off_t data = ::lseek(fd_, static_cast<off_t>(at), SEEK_DATA);
      if (data < 0) return errno == ENXIO ? end : to;  // ENXIO: no data past `at`
      if (static_cast<uint64_t>(data) >= to) break;
      off_t hole = ::lseek(fd_, data, SEEK_HOLE);
      if (hole < 0) return to;
      end = std::min<uint64_t>(static_cast<uint64_t>(hole), to);
      at = static_cast<uint64_t>(hole);
    }
    return end;
  }

  void DropCached(uint64_t offset, uint64_t length) override {
    // Dirty pages are only queued for writeback by it, never dropped.
    ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(length), POSIX_FADV_DONTNEED);
  }

  Status Discard(uint64_t offset, uint64_t length) override {
    int rc = ClearRange(BLKDISCARD, offset, length);
    // Discard is advisory: a device that cannot discard still holds correct data.
    if (rc != 0 && errno != EOPNOTSUPP && errno != ENOTTY) {
      return Status::FromErrno(fmt::format("{}: discard of {} bytes at {}", name_, length, offset), errno);
    }
    return Status::OK();
  }

  // Makes [offset, offset+length) read as zeros (not durable before Sync).
  Status ZeroRange(uint64_t offset, uint64_t length) {
    int rc = ClearRange(BLKZEROOUT, offset, length);
    if (rc != 0 && !block_device_ && errno == EOPNOTSUPP) {  // a file system without holes: written zeros
      static const std::vector<uint8_t> zeros(1 << 20);
      for (uint64_t at = offset; at < offset + length; at += zeros.size()) {
        uint64_t n = std::min<uint64_t>(zeros.size(), offset + length - at);
        CAIRN_RETURN_IF_ERROR(WriteAt(at, std::span(zeros).first(n)));
      }
      return Status::OK();
    }
    if (rc != 0) return Status::FromErrno(fmt::format("{}: zeroing {} bytes at {}", name_, length, offset), errno);
    return Status::OK();
  }

  uint64_t Size() const override { return size_; }
  uint32_t SectorSize() const override { return 4096; }
  const std::string& Name() const override { return name_; }

 private:
  // ioctl `device_request` (BLKDISCARD, BLKZEROOUT) of the range on a block device; in a file,
  // a punched hole (which reads as zeros). 0, or -1 with errno.
  int ClearRange(unsigned long device_request, uint64_t offset, uint64_t length) {
    if (block_device_) {
      uint64_t range[2] = {offset, length};
      return ::ioctl(fd_, device_request, range);
    }
    return ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                       static_cast<off_t>(length));
  }

  const std::string name_;
  const int fd_;
  const uint64_t size_;
  const bool block_device_;
  std::atomic<int> sync_errno_{0};  // of the first failed fdatasync; 0 while none has failed
};

}  // namespace

Result<std::unique_ptr<Disk>> OpenImageDisk(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(fmt::format("cannot open disk {}", path), errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::FromErrno(fmt::format("cannot stat disk {}", path), err);
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  bool block_device = S_ISBLK(st.st_mode);
  if (block_device && ::ioctl(fd, BLKGETSIZE64, &size) != 0) {
    int err = errno;
    ::close(fd);
    return Status::FromErrno(fmt::format("cannot read the size of block device {}", path), err);
  }
  if (!block_device && !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(fmt::format("disk {} is neither a regular file nor a block device", path));
  }
  return std::unique_ptr<Disk>(new ImageDisk(path, fd, size, block_device));
}

Status ZeroDisk(const std::string& path, uint64_t length, const std::function<void(uint64_t)>& progress) {
  auto opened = OpenImageDisk(path);
  if (!opened.ok()) return opened.status();
  auto& disk = static_cast<ImageDisk&>(**opened);
  if (length > disk.Size()) {
    return Status::InvalidArgument(fmt::format("{}: cannot zero {} bytes of {}", path, length, disk.Size()));
  }
  constexpr uint64_t kStep = 1ull << 30;
  for (uint64_t done = 0; done < length;) {
    uint64_t n = std::min(kStep, length - done);
    CAIRN_RETURN_IF_ERROR(disk.ZeroRange(done, n));
    done += n;
    if (progress) progress(done);
  }
  return disk.Sync();
}

Result<std::unique_ptr<Disk>> CreateImageDisk(const std::string& path, uint64_t size) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(fmt::format("cannot create disk image {}", path), errno);
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return Status::FromErrno(fmt::format("cannot size disk image {} to {} bytes", path, size), err);
  }
  return std::unique_ptr<Disk>(new ImageDisk(path, fd, size, false));
}

Status Disk::WriteGatherAt(uint64_t offset, std::span<const std::span<const uint8_t>> pieces) {
  return WriteAt(offset, Joined(pieces));
}

Status Disk::ReadRebuilt(uint64_t, std::span<uint8_t>, unsigned) {
  return Status::NotSupported(fmt::format("{}: no redundancy below this disk to rebuild a range from", Name()));
}

namespace {

class Missing : public Disk {
 public:
  Missing(std::string name, std::string why) : name_(std::move(name)), why_(std::move(why)) {}
  Status ReadAt(uint64_t, std::span<uint8_t>) override { return Fail(); }
  Status WriteAt(uint64_t, std::span<const uint8_t>) override { return Fail(); }
  Status Sync() override { return Fail(); }
  Status Discard(uint64_t, uint64_t) override { return Status::OK(); }
  uint64_t Size() const override { return 0; }
  uint32_t SectorSize() const override { return 4096; }
  const std::string& Name() const override { return name_; }

 private:
  Status Fail() const { return Status::IOError(fmt::format("{} is missing: {}", name_, why_)); }
  std::string name_;
  std::string why_;
};

}  // namespace

std::unique_ptr<Disk> MissingDisk(const std::string& name, const std::string& why) {
  return std::make_unique<Missing>(name, why);
}

}  // namespace cairn
