// BufferPool keeps a few large byte buffers that were let go, so that a buffer about to be
// filled whole (by a disk read or a decode) is not zeroed first: value-initialising a fresh
// 4 MiB std::vector costs about as much CPU as reading the extent into it. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace cairn {

class BufferPool {
 public:
  // The pool the daemon's read and persist paths share.
  static BufferPool& Default();

  // Buffers of at least `min_bytes` are kept, up to `max_bytes` of them in all.
  BufferPool(size_t min_bytes, size_t max_bytes) : min_bytes_(min_bytes), max_bytes_(max_bytes) {}

  // A buffer of `size` bytes whose contents are unspecified (bytes of a buffer given back
  // earlier, of any file): the caller overwrites all of them, or shrinks it to what it wrote.
  // A kept buffer is taken only for a size of at least half its capacity.
  std::vector<uint8_t> Take(size_t size);
  // Hands a buffer back for a later Take; one too small, or that would take the pool over its
  // bound, is freed.
  void Give(std::vector<uint8_t> buffer);
  // Frees every kept buffer (data keys were erased: the plaintext they held goes too).
  void Clear();

 private:
  const size_t min_bytes_;
  const size_t max_bytes_;
  std::mutex mutex_;
  std::vector<std::vector<uint8_t>> kept_;  // guarded by mutex_
  size_t kept_bytes_ = 0;                   // their capacities; guarded by mutex_
};

}  // namespace cairn
