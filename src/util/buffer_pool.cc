#include "util/buffer_pool.h"

#include <algorithm>
#include <utility>

namespace cairn {

BufferPool& BufferPool::Default() {
  // Enough for the extents a sequential read and a persist have in flight at once
  // (4 MiB segments), small beside the read buffer.
  static BufferPool pool(1 << 20, 64 << 20);
  return pool;
}

std::vector<uint8_t> BufferPool::Take(size_t size) {
  std::vector<uint8_t> buffer;
  if (size >= min_bytes_) {
    std::lock_guard lock(mutex_);
    // Best the smallest kept buffer that has `size` initialised bytes already (resizing it
    // down writes nothing); else the one with the most, whose resize zeroes only the rest.
    auto better = [size](const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
      bool a_holds = a.size() >= size, b_holds = b.size() >= size;
      if (a_holds != b_holds) return a_holds;
      return a_holds ? a.size() < b.size() : a.size() > b.size();
    };
    auto best = kept_.end();
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      // Not one more than twice as large: whoever takes it keeps all of it (a read buffer
      // counts extents, not bytes).
      bool fits = it->capacity() >= size && it->capacity() <= 2 * size;
      if (fits && (best == kept_.end() || better(*it, *best))) best = it;
    }
    if (best != kept_.end()) {
      std::iter_swap(best, kept_.end() - 1);
      kept_bytes_ -= kept_.back().capacity();
      buffer = std::move(kept_.back());
      kept_.pop_back();
    }
  }
  buffer.resize(size);
  return buffer;
}

void BufferPool::Give(std::vector<uint8_t> buffer) {
  if (buffer.capacity() < min_bytes_) return;
  std::lock_guard lock(mutex_);
  if (kept_bytes_ + buffer.capacity() > max_bytes_) return;
  kept_bytes_ += buffer.capacity();
  kept_.push_back(std::move(buffer));
}

void BufferPool::Clear() {
  std::vector<std::vector<uint8_t>> dropped;
  {
    std::lock_guard lock(mutex_);
    dropped.swap(kept_);
    kept_bytes_ = 0;
  }
}

}  // namespace cairn
