#include "cache/fd_cache.h"

#include <unistd.h>

namespace cairn {

OpenFile::~OpenFile() {
  if (fd_ >= 0) ::close(fd_);
}

void FdCache::Touch(uint64_t ino, Entry& entry) {
  lru_.erase(entry.tick);
  entry.tick = ++clock_;
  lru_[entry.tick] = ino;
}

void FdCache::EvictOverCapacity() {
  while (entries_.size() - pinned_ > capacity_) {
    auto oldest = lru_.begin();
    entries_.erase(oldest->second);
    lru_.erase(oldest);
  }
}

Result<FdCache::Entry*> FdCache::Lookup(uint64_t ino, const std::function<Result<int>()>& open,
                                        std::unique_lock<std::mutex>& lock, SharedFile* file) {
  if (auto it = entries_.find(ino); it != entries_.end()) return &it->second;
  uint64_t forgets_before = forgets_;
  // Opened without the lock: opening may wait for the disk.
  lock.unlock();
  auto fd = open();
  if (!fd.ok()) return fd.status();
  auto opened = std::make_shared<const OpenFile>(*fd);
  lock.lock();
  // Another thread was faster: its entry wins and ours closes when we return.
  if (auto it = entries_.find(ino); it != entries_.end()) return &it->second;
  if (forgets_ != forgets_before) {  // maybe the removed file: use it once, do not keep it
    *file = std::move(opened);
    return nullptr;
  }
  Entry& entry = entries_[ino];
  entry.file = std::move(opened);
  return &entry;
}

Result<SharedFile> FdCache::Get(uint64_t ino, const std::function<Result<int>()>& open) {
  std::unique_lock lock(mutex_);
  SharedFile once;
  auto entry = Lookup(ino, open, lock, &once);
  if (!entry.ok()) return entry.status();
  if (!*entry) return once;
  SharedFile file = (*entry)->file;
  if (!(*entry)->pinned) {
    Touch(ino, **entry);
    EvictOverCapacity();
  }
  return file;
}

Result<SharedFile> FdCache::GetPinned(uint64_t ino, const std::function<Result<int>()>& open, bool* pinned) {
  std::unique_lock lock(mutex_);
  SharedFile once;
  auto found = Lookup(ino, open, lock, &once);
  if (!found.ok()) return found.status();
  *pinned = false;
  if (!*found) return once;
  Entry& entry = **found;
  if (!entry.pinned && pinned_ < max_pinned_) {
    lru_.erase(entry.tick);
    entry.tick = 0;
    entry.pinned = true;
    pinned_++;
  }
  *pinned = entry.pinned;
  SharedFile file = entry.file;
  if (!entry.pinned) {
    Touch(ino, entry);
    EvictOverCapacity();
  }
  return file;
}

void FdCache::Unpin(uint64_t ino) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(ino);
  if (it == entries_.end() || !it->second.pinned) return;
  it->second.pinned = false;
  pinned_--;
  Touch(ino, it->second);
  EvictOverCapacity();
}

void FdCache::Forget(uint64_t ino) {
  std::lock_guard lock(mutex_);
  forgets_++;
  auto it = entries_.find(ino);
  if (it == entries_.end()) return;
  if (it->second.pinned) {
    pinned_--;
  } else {
    lru_.erase(it->second.tick);
  }
  entries_.erase(it);
}

size_t FdCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

size_t FdCache::pinned() const {
  std::lock_guard lock(mutex_);
  return pinned_;
}

}  // namespace cairn
