// UnitLocks serializes work on ranges of a lonestar group: one lock on a range of units covers
// that range on every disk of the group, since a bucket's range and its parity sit at the same
// offsets. Held across the disk I/O of one promise step or one rebuild slice (a rebuild holds
// two: one being read, one being written), never across a catalog call. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>

namespace cairn {

class UnitLocks {
 public:
  class Held {
   public:
    Held(UnitLocks* locks, uint64_t first) : locks_(locks), first_(first) {}
    Held(Held&& other) noexcept : locks_(other.locks_), first_(other.first_) { other.locks_ = nullptr; }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    Held& operator=(Held&&) = delete;
    ~Held() {
      if (locks_) locks_->Unlock(first_);
    }

   private:
    UnitLocks* locks_;
    uint64_t first_;
  };

  // Waits until no held range overlaps units [first, first + count), then holds it.
  Held Lock(uint64_t first, uint64_t count) {
    std::unique_lock lock(mutex_);
    free_.wait(lock, [&] { return !Overlaps(first, first + count); });
    held_[first] = first + count;
    return Held(this, first);
  }

 private:
  bool Overlaps(uint64_t begin, uint64_t end) const {
    auto it = held_.lower_bound(end);
    return it != held_.begin() && std::prev(it)->second > begin;
  }
  void Unlock(uint64_t first) {
    {
      std::lock_guard lock(mutex_);
      held_.erase(first);
    }
    free_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable free_;
  std::map<uint64_t, uint64_t> held_;  // first unit -> end unit, disjoint
};

}  // namespace cairn
