// FdCache keeps staging cache files open between uses, one descriptor per inode shared by
// every handle and the persister, at most `capacity` of them: a user holding thousands of
// files open must not run the daemon out of descriptors. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "cairn/status.h"

namespace cairn {

// An open file descriptor, closed when the last holder lets go of it.
class OpenFile {
 public:
  explicit OpenFile(int fd) : fd_(fd) {}
  ~OpenFile();
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

using SharedFile = std::shared_ptr<const OpenFile>;

class FdCache {
 public:
  explicit FdCache(size_t capacity) : capacity_(capacity) {}

  // The cached descriptor of `ino`, or a new one from `open`. Past the capacity, the least
  // recently used descriptor leaves the cache; it is closed once its last holder is done.
  Result<SharedFile> Get(uint64_t ino, const std::function<Result<int>()>& open);
  // Drops the descriptor of `ino`. Call it after the file was removed: a descriptor
  // opened before then is not cached any more.
  void Forget(uint64_t ino);
  size_t size() const;

 private:
  struct Entry {
    SharedFile file;
    uint64_t tick;
  };
  void Touch(uint64_t ino, Entry& entry);  // REQUIRES: mutex_

  const size_t capacity_;
  mutable std::mutex mutex_;
  uint64_t clock_ = 0;
  uint64_t forgets_ = 0;  // bumped by Forget: an open racing with a removal is not cached
  std::unordered_map<uint64_t, Entry> entries_;
  std::map<uint64_t, uint64_t> lru_;  // tick -> ino
};

}  // namespace cairn
