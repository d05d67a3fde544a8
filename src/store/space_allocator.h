// SpaceAllocator tracks the free block ranges of one disk in memory. It is rebuilt at
// mount from the catalog's extents, so space that no committed extent owns is free after
// a crash: nothing leaks. Not thread-safe; its BlockChunkStore serializes access.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "cairn/status.h"

namespace cairn {

class SpaceAllocator {
 public:
  // Manages [start, end); both are multiples of the block size.
  SpaceAllocator(uint64_t start, uint64_t end);

  // Takes `length` bytes (a block multiple), first fit from low offsets.
  std::optional<uint64_t> Allocate(uint64_t length);
  // Marks a committed extent's range as used (mount-time rebuild). Fails if any part of
  // it is already used or outside the disk: the catalog is then inconsistent.
  Status MarkUsed(uint64_t offset, uint64_t length);
  // Returns a range to the free pool, merging it with free neighbours.
  Status Release(uint64_t offset, uint64_t length);
  // OK when Release would take the range: inside the disk, no part of it free already.
  Status CheckUsed(uint64_t offset, uint64_t length) const;

  uint64_t free_bytes() const { return free_bytes_; }
  // Of the free bytes, those that ranges of `length` bytes can take: each free range's whole
  // multiples of it.
  uint64_t FreeBytesIn(uint64_t length) const;
  uint64_t capacity() const { return end_ - start_; }
  size_t fragments() const { return free_.size(); }

 private:
  uint64_t start_;
  uint64_t end_;
  uint64_t free_bytes_;
  std::map<uint64_t, uint64_t> free_;  // offset -> length, non-overlapping, non-adjacent
};

}  // namespace cairn
