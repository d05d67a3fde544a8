// StagingCache is the directory on fast storage where file data lands before it is
// persisted: one sparse file per inode, named by inode number. Thread-safe; open
// descriptors are shared and bounded by an FdCache. The directory is opened once and its
// entries only through it, never following a symlink: the archive's owner, who may not be
// the daemon's user, can change what is in it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "cache/fd_cache.h"
#include "cairn/status.h"

namespace cairn {

class StagingCache {
 public:
  // At most this many cache files are kept open, whatever users hold open through the mount,
  // and at most kMaxPinnedFiles more while they are being written (see OpenForWriting).
  static constexpr size_t kMaxOpenFiles = 512;
  static constexpr size_t kMaxPinnedFiles = 256;

  // Opens `dir`; when it cannot be opened (or is a symlink), every call names the problem.
  explicit StagingCache(std::string dir);

  // The cache file of `ino` (created if needed), open for reading and writing; shared, so
  // callers use it with positioned I/O only.
  Result<SharedFile> Open(uint64_t ino) const;
  // Open, for writes through a file handle: the descriptor stays open until Unpin(ino) (the
  // last writable handle is released), so the descriptor that wrote is the one Fsync asks
  // for write-back errors. *pinned false: too many are pinned already, the caller syncs
  // its write itself.
  Result<SharedFile> OpenForWriting(uint64_t ino, bool* pinned) const;
  void Unpin(uint64_t ino) const;
  // Makes the names of the cache files created so far durable (fsync of the directory), if
  // any was created since the last sync; waits for a sync another caller has in flight.
  // Before an fsync of a file is acknowledged, and before the catalog says a segment is in
  // the cache.
  Status SyncNames() const;
  // Whether a cache file was created since the last SyncNames: a power loss could take its
  // name (what a crash test asks).
  bool NamesUnsynced() const { return *names_unsynced_; }
  // The cache file of `ino` if it exists (NotFound if not): reads and fsync of a file
  // with nothing staged create nothing.
  Result<SharedFile> OpenExisting(uint64_t ino) const;
  // Bytes the cache file of `ino` occupies (allocated blocks), 0 if absent.
  uint64_t Usage(uint64_t ino) const;
  Status Remove(uint64_t ino) const;
  Status Truncate(uint64_t ino, uint64_t size) const;
  // Frees [offset, offset + length) of the cache file of `ino`, keeping its size.
  Status PunchHole(uint64_t ino, uint64_t offset, uint64_t length) const;
  struct FileInfo {
    uint64_t ino;
    uint64_t allocated_bytes;
    uint64_t length;  // st_size
    int64_t mtime_seconds;
  };
  // Calls fn for every cache file. An error when the directory cannot be listed (unless it
  // does not exist) or a file in it cannot be looked at: a caller taking a file it was not
  // shown for one that is gone must not go on.
  Status ForEach(const std::function<void(const FileInfo&)>& fn) const;

  // Whole-buffer positioned I/O on a cache file descriptor. A read past the end of the
  // file fills the rest of `dst` with zeros (cache files are sparse).
  static Status ReadAt(int fd, uint64_t offset, std::span<uint8_t> dst);
  static Status WriteAt(int fd, uint64_t offset, std::span<const uint8_t> src);
  // Cuts a cache file that is longer than `size` to `size` (one that is not stays as it is).
  static Status CutTo(int fd, uint64_t size);
  // Lengthens a cache file that is shorter than `size` to `size`, with a hole: a segment
  // whose tail was never written (a file grown by truncate) is held whole.
  static Status ExtendTo(int fd, uint64_t size);
  // Whether [offset, offset + length) of a cache file holds data, found without reading:
  // false when it lies entirely in a hole or past the end (it reads as zeros).
  static Result<bool> HasData(int fd, uint64_t offset, uint64_t length);

  const std::string& dir() const { return dir_; }

 private:
  std::string PathOf(uint64_t ino) const;
  // Opens the cache file of `ino` read-write with `flags` added.
  Result<int> OpenFd(uint64_t ino, int flags) const;
  // The entry of `ino` relative to dir_fd_.
  static std::string NameOf(uint64_t ino) { return std::to_string(ino); }
  // OK when the directory is open, else why not.
  Status DirOpen() const;

  std::string dir_;
  std::shared_ptr<const int> dir_fd_;  // -1 when it could not be opened (dir_errno_ says why)
  int dir_errno_ = 0;
  std::unique_ptr<FdCache> open_files_;
  // A file was created since the last SyncNames (behind pointers: the cache is movable).
  std::unique_ptr<std::atomic<bool>> names_unsynced_ = std::make_unique<std::atomic<bool>>(false);
  // Held by SyncNames across the mark's exchange and the directory sync; nothing else is
  // locked under it.
  std::unique_ptr<std::mutex> names_sync_ = std::make_unique<std::mutex>();
};

}  // namespace cairn
