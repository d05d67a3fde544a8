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

Result<SharedFile> FdCache::Get(uint64_t ino, const std::function<Result<int>()>& open) {
  uint64_t forgets_before;
  {
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(ino); it != entries_.end()) {
      Touch(ino, it->second);
      return it->second.file;
    }
    forgets_before = forgets_;
  }
  // Opened without the lock: opening may wait for the disk.
  auto fd = open();
  if (!fd.ok()) return fd.status();
  auto file = std::make_shared<const OpenFile>(*fd);
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(ino); it != entries_.end()) {
    Touch(ino, it->second);  // another thread was faster; ours closes when we return
    return it->second.file;
  }
  if (forgets_ != forgets_before) return file;  // maybe the removed file: use it once, do not keep it
  Entry& entry = entries_[ino];
  entry.file = file;
  entry.tick = 0;
  Touch(ino, entry);
  while (entries_.size() > capacity_) {
    auto oldest = lru_.begin();
    entries_.erase(oldest->second);
    lru_.erase(oldest);
  }
  return file;
}

void FdCache::Forget(uint64_t ino) {
  std::lock_guard lock(mutex_);
  forgets_++;
  auto it = entries_.find(ino);
  if (it == entries_.end()) return;
  lru_.erase(it->second.tick);
  entries_.erase(it);
}

size_t FdCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace cairn
