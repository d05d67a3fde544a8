#include "pipeline/data_locks.h"

#include <algorithm>

namespace cairn {

std::shared_ptr<std::shared_mutex> DataLocks::MutexOf(uint64_t ino) {
  constexpr uint64_t kSweepEvery = 4096;  // lookups: the table stays about as large as what is held
  std::lock_guard lock(mutex_);
  if (++lookups_ % kSweepEvery == 0) std::erase_if(locks_, [](const auto& entry) { return entry.second.expired(); });
  std::weak_ptr<std::shared_mutex>& slot = locks_[ino];
  std::shared_ptr<std::shared_mutex> mutex = slot.lock();
  if (!mutex) {
    mutex = std::make_shared<std::shared_mutex>();
    slot = mutex;
  }
  return mutex;
}

DataLocks::Held DataLocks::Shared(uint64_t ino) {
  Held held;
  held.mutex_ = MutexOf(ino);
  held.shared_ = std::shared_lock(*held.mutex_);
  return held;
}

DataLocks::Held DataLocks::Exclusive(uint64_t ino) {
  Held held;
  held.mutex_ = MutexOf(ino);
  held.exclusive_ = std::unique_lock(*held.mutex_);
  return held;
}

DataLocks::Held DataLocks::TryExclusive(uint64_t ino) {
  Held held;
  held.mutex_ = MutexOf(ino);
  held.exclusive_ = std::unique_lock(*held.mutex_, std::try_to_lock);
  return held;
}

std::vector<DataLocks::Held> DataLocks::Exclusive(std::vector<uint64_t> inos) {
  std::sort(inos.begin(), inos.end());
  inos.erase(std::unique(inos.begin(), inos.end()), inos.end());
  std::vector<Held> held;
  for (size_t wait_for = 0; wait_for < inos.size() && held.empty();) {
    held.push_back(Exclusive(inos[wait_for]));
    for (size_t k = 0; k < inos.size(); k++) {
      if (k == wait_for) continue;
      Held h = TryExclusive(inos[k]);
      if (!h.exclusive_.owns_lock()) {  // someone else has it: wait for it holding none
        held.clear();
        wait_for = k;
        break;
      }
      held.push_back(std::move(h));
    }
  }
  return held;
}

std::vector<DataLocks::Held> DataLocks::TryExclusive(std::vector<uint64_t>* inos) {
  std::sort(inos->begin(), inos->end());
  inos->erase(std::unique(inos->begin(), inos->end()), inos->end());
  std::vector<Held> held;
  std::erase_if(*inos, [&](uint64_t ino) {
    Held h = TryExclusive(ino);
    if (!h.exclusive_.owns_lock()) return true;
    held.push_back(std::move(h));
    return false;
  });
  return held;
}

}  // namespace cairn
