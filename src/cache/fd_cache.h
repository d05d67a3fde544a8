// FdCache keeps staging cache files open between uses, one descriptor per inode shared by
// every handle and the persister, at most `capacity` of them: a user holding thousands of
// files open must not run the daemon out of descriptors. Descriptors of files being
// written can be pinned (a bounded number more), so that fsync asks the descriptor that
// wrote about write-back errors. Thread-safe.
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
  explicit FdCache(size_t capacity, size_t max_pinned = 0) : capacity_(capacity), max_pinned_(max_pinned) {}

  // The cached descriptor of `ino`, or a new one from `open`. Past the capacity, the least
  // recently used unpinned descriptor leaves the cache; it is closed once its last holder
  // is done.
  Result<SharedFile> Get(uint64_t ino, const std::function<Result<int>()>& open);
  // Get, and keeps the descriptor cached until Unpin(ino) or Forget(ino), whatever the
  // capacity. The kernel reports a write-back error once per descriptor (errseq), and
  // forgets it with the inode once no descriptor holds it: a descriptor opened later may
  // never see an error that struck data written through an evicted one. *pinned is false
  // when max_pinned descriptors are pinned already (or the file was removed meanwhile):
  // then the caller must sync what it writes itself.
  Result<SharedFile> GetPinned(uint64_t ino, const std::function<Result<int>()>& open, bool* pinned);
  // Lets the descriptor of `ino` leave the cache again by the LRU rule.
  void Unpin(uint64_t ino);
  // Drops the descriptor of `ino`, pinned or not. Call it after the file was removed: a
  // descriptor opened before then is not cached any more.
  void Forget(uint64_t ino);
  size_t size() const;
  size_t pinned() const;

 private:
  struct Entry {
    SharedFile file;
    uint64_t tick = 0;  // its place in lru_; 0 while pinned (pinned entries are not in lru_)
    bool pinned = false;
  };
  // Get and GetPinned: the cached entry of `ino` or a new one; null with *file set when an
  // open raced with Forget (the file is used once, not cached).
  Result<Entry*> Lookup(uint64_t ino, const std::function<Result<int>()>& open, std::unique_lock<std::mutex>& lock,
                        SharedFile* file);
  void Touch(uint64_t ino, Entry& entry);  // REQUIRES: mutex_, entry not pinned
  void EvictOverCapacity();                // REQUIRES: mutex_

  const size_t capacity_;    // unpinned descriptors
  const size_t max_pinned_;  // pinned descriptors, on top
  mutable std::mutex mutex_;
  // Guarded by mutex_.
  uint64_t clock_ = 0;
  uint64_t forgets_ = 0;  // bumped by Forget: an open racing with a removal is not cached
  size_t pinned_ = 0;
  std::unordered_map<uint64_t, Entry> entries_;
  std::map<uint64_t, uint64_t> lru_;  // tick -> ino, unpinned entries only
};

}  // namespace cairn
