#include "store/space_allocator.h"

#include <fmt/format.h>

namespace cairn {

SpaceAllocator::SpaceAllocator(uint64_t start, uint64_t end) : start_(start), end_(end), free_bytes_(0) {
  if (end > start) {
    free_[start] = end - start;
    free_bytes_ = end - start;
  }
}

uint64_t SpaceAllocator::FreeBytesIn(uint64_t length) const {
  if (length == 0) return free_bytes_;
  uint64_t total = 0;
  for (const auto& [offset, free] : free_) total += free / length * length;
  return total;
}

std::optional<uint64_t> SpaceAllocator::Allocate(uint64_t length) {
  if (length == 0) return std::nullopt;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < length) continue;
    uint64_t offset = it->first;
    uint64_t remaining = it->second - length;
    free_.erase(it);
    if (remaining > 0) free_[offset + length] = remaining;
    free_bytes_ -= length;
    return offset;
  }
  return std::nullopt;
}

Status SpaceAllocator::MarkUsed(uint64_t offset, uint64_t length) {
  // Checked without overflow: a damaged record's offset + length may wrap around.
  if (length == 0 || offset < start_ || offset > end_ || length > end_ - offset) {
    return Status::Corruption(fmt::format("range [{}, +{}) is outside the disk's [{}, {})", offset, length, start_, end_));
  }
  auto it = free_.upper_bound(offset);
  if (it == free_.begin()) {
    return Status::Corruption(fmt::format("range [{}, +{}) is already in use or outside the disk", offset, length));
  }
  --it;
  uint64_t free_start = it->first;
  uint64_t free_end = free_start + it->second;
  if (offset < free_start || offset + length > free_end) {
    return Status::Corruption(fmt::format("range [{}, +{}) is already in use or outside the disk", offset, length));
  }
  free_.erase(it);
  if (offset > free_start) free_[free_start] = offset - free_start;
  if (offset + length < free_end) free_[offset + length] = free_end - (offset + length);
  free_bytes_ -= length;
  return Status::OK();
}

Status SpaceAllocator::CheckUsed(uint64_t offset, uint64_t length) const {
  if (length == 0 || offset < start_ || offset > end_ || length > end_ - offset) {
    return Status::InvalidArgument(fmt::format("release of [{}, +{}) outside the disk", offset, length));
  }
  auto next = free_.lower_bound(offset);
  bool overlaps_next = next != free_.end() && next->first < offset + length;
  bool overlaps_prev = next != free_.begin() && std::prev(next)->first + std::prev(next)->second > offset;
  if (overlaps_next || overlaps_prev) return Status::Corruption(fmt::format("double free of [{}, +{})", offset, length));
  return Status::OK();
}

Status SpaceAllocator::Release(uint64_t offset, uint64_t length) {
  CAIRN_RETURN_IF_ERROR(CheckUsed(offset, length));
  auto next = free_.lower_bound(offset);
  uint64_t new_start = offset;
  uint64_t new_length = length;
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      new_start = prev->first;
      new_length += prev->second;
      free_.erase(prev);
    }
  }
  if (next != free_.end() && next->first == offset + length) {
    new_length += next->second;
    free_.erase(next);
  }
  free_[new_start] = new_length;
  free_bytes_ += length;
  return Status::OK();
}

}  // namespace cairn
