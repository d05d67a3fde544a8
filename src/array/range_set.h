// RangeSet is a set of byte ranges [offset, offset+length) kept merged: a lonestar group's
// defect ranges per disk (contents not trusted until rebuilt). Not thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <utility>

namespace cairn {

struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t end() const { return offset + length; }
  bool operator==(const ByteRange&) const = default;
};

class RangeSet {
 public:
  void Add(ByteRange r) {
    if (r.length == 0) return;
    uint64_t begin = r.offset;
    uint64_t end = r.end();
    auto it = ranges_.upper_bound(begin);
    if (it != ranges_.begin() && std::prev(it)->second >= begin) --it;  // touches the one before
    while (it != ranges_.end() && it->first <= end) {
      begin = std::min(begin, it->first);
      end = std::max(end, it->second);
      it = ranges_.erase(it);
    }
    ranges_[begin] = end;
  }

  void Remove(ByteRange r) {
    if (r.length == 0) return;
    uint64_t begin = r.offset;
    uint64_t end = r.end();
    auto it = ranges_.upper_bound(begin);
    if (it != ranges_.begin()) --it;
    while (it != ranges_.end() && it->first < end) {
      auto [from, to] = *it;
      if (to <= begin) {
        ++it;
        continue;
      }
      it = ranges_.erase(it);
      if (from < begin) ranges_[from] = begin;
      if (to > end) {
        ranges_[end] = to;
        break;
      }
    }
  }

  // Whether any byte of `r` is in the set.
  bool Overlaps(ByteRange r) const {
    auto it = ranges_.lower_bound(r.end());
    return it != ranges_.begin() && std::prev(it)->second > r.offset && r.length > 0;
  }
  bool empty() const { return ranges_.empty(); }
  // The first range, cut to at most `max_length` bytes.
  std::optional<ByteRange> First(uint64_t max_length) const {
    if (ranges_.empty()) return std::nullopt;
    auto [from, to] = *ranges_.begin();
    return ByteRange{from, std::min(to - from, max_length)};
  }
  uint64_t bytes() const {
    uint64_t total = 0;
    for (const auto& [from, to] : ranges_) total += to - from;
    return total;
  }
  // Visits every range in order.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (const auto& [from, to] : ranges_) fn(ByteRange{from, to - from});
  }

 private:
  std::map<uint64_t, uint64_t> ranges_;  // offset -> end, disjoint and not touching
};

}  // namespace cairn
