// DataLocks: one reader/writer lock per file, serializing the movement of that file's data
// (exclusive: write, fetch, persist snapshot, truncate, evict; shared: open, read). A lock
// exists while someone holds it, so a read that waits for a disk to spin up holds up the
// writers of its own file only, never those of other files. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

namespace cairn {

class DataLocks {
 public:
  // A file's data lock held, shared or exclusive, until destroyed or unlocked.
  class Held {
   public:
    Held() = default;
    void unlock() {
      if (exclusive_.owns_lock()) exclusive_.unlock();
      if (shared_.owns_lock()) shared_.unlock();
    }

   private:
    friend class DataLocks;
    std::shared_ptr<std::shared_mutex> mutex_;  // first: it outlives the locks below
    std::unique_lock<std::shared_mutex> exclusive_;
    std::shared_lock<std::shared_mutex> shared_;
  };

  Held Shared(uint64_t ino);
  Held Exclusive(uint64_t ino);
  // The data locks of all `inos`, exclusive. It never waits while it holds one (a read may
  // hold a lock across a disk's spin-up, and the files it already has would wait with it):
  // it waits for one lock holding none, then tries the others, and when one of those is
  // held lets go of all and waits for that one (std::lock's way), so it cannot deadlock.
  std::vector<Held> Exclusive(std::vector<uint64_t> inos);
  // The same without waiting: takes those of `*inos` that no one holds (a read may hold one
  // across a disk's spin-up) and drops the others from `*inos`.
  std::vector<Held> TryExclusive(std::vector<uint64_t>* inos);

 private:
  std::shared_ptr<std::shared_mutex> MutexOf(uint64_t ino);
  // `ino`'s lock, exclusive, if no one holds it; else a Held that holds nothing.
  Held TryExclusive(uint64_t ino);

  std::mutex mutex_;
  std::unordered_map<uint64_t, std::weak_ptr<std::shared_mutex>> locks_;  // guarded by mutex_
  uint64_t lookups_ = 0;  // guarded by mutex_: every so many, the locks nobody holds go
};

}  // namespace cairn
