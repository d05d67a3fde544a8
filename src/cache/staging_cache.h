// StagingCache is the directory on fast storage where file data lands before it is
// persisted: one sparse file per inode, named by inode number. Thread-safe (it holds
// no state besides the directory).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "cairn/status.h"

namespace cairn {

class StagingCache {
 public:
  explicit StagingCache(std::string dir) : dir_(std::move(dir)) {}

  // Opens (creating if needed) the cache file of `ino` for reading and writing.
  Result<int> Open(uint64_t ino) const;
  // Bytes the cache file of `ino` occupies (allocated blocks), 0 if absent.
  uint64_t Usage(uint64_t ino) const;
  Status Remove(uint64_t ino) const;
  Status Truncate(uint64_t ino, uint64_t size) const;
  // Frees [offset, offset + length) of the cache file of `ino`, keeping its size.
  Status PunchHole(uint64_t ino, uint64_t offset, uint64_t length) const;
  // Calls fn(ino, allocated_bytes, mtime_seconds) for every cache file.
  void ForEach(const std::function<void(uint64_t, uint64_t, int64_t)>& fn) const;

  // Whole-buffer positioned I/O on a cache file descriptor. A read past the end of the
  // file fills the rest of `dst` with zeros (cache files are sparse).
  static Status ReadAt(int fd, uint64_t offset, std::span<uint8_t> dst);
  static Status WriteAt(int fd, uint64_t offset, std::span<const uint8_t> src);

  const std::string& dir() const { return dir_; }

 private:
  std::string PathOf(uint64_t ino) const;
  std::string dir_;
};

}  // namespace cairn
