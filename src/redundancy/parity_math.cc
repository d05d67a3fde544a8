// Parity XOR through isa-l's xor_gen where the buffers allow it, scalar code elsewhere.
#include "redundancy/parity_math.h"

#include <isa-l/raid.h>

#include <algorithm>
#include <cassert>
#include <cstring>

namespace cairn {

namespace {

constexpr size_t kMaxVectors = 64;              // pointers per xor_gen call: sources, then dst
constexpr size_t kMaxChunk = size_t{1} << 30;   // xor_gen takes an int length

using Sources = std::span<const std::span<const uint8_t>>;

// dst[i] = first[i] ^ rest[0][i] ^ rest[1][i] ^ ... for i in [begin, end). first may be dst.
void ScalarXor(uint8_t* dst, const uint8_t* first, Sources rest, size_t begin, size_t end) {
  if (begin >= end) return;
  if (first != dst) std::memcpy(dst + begin, first + begin, end - begin);
  for (std::span<const uint8_t> source : rest) {
    const uint8_t* s = source.data();
    size_t i = begin;
    for (; i + 32 <= end; i += 32) {  // four words at a time, any alignment
      uint64_t d[4], x[4];
      std::memcpy(d, dst + i, 32);
      std::memcpy(x, s + i, 32);
      for (int w = 0; w < 4; w++) d[w] ^= x[w];
      std::memcpy(dst + i, d, 32);
    }
    for (; i < end; i++) dst[i] ^= s[i];
  }
}

// The same with xor_gen. REQUIRES: rest not empty; every buffer + begin aligned to
// kParityAlignment; (end - begin) a multiple of it.
void IsalXor(uint8_t* dst, const uint8_t* first, Sources rest, size_t begin, size_t end) {
  void* vectors[kMaxVectors];
  for (size_t at = begin; at < end; at += kMaxChunk) {
    size_t len = std::min(kMaxChunk, end - at);
    const uint8_t* so_far = first;  // XOR of what is done: `first`, then dst after the first batch
    for (size_t next = 0; next < rest.size();) {
      size_t batch_begin = next;
      int n = 0;
      // isa-l's prototype lacks const; it only writes the last vector.
      vectors[n++] = const_cast<uint8_t*>(so_far + at);
      while (next < rest.size() && size_t(n) < kMaxVectors - 1) {
        vectors[n++] = const_cast<uint8_t*>(rest[next++].data() + at);
      }
      vectors[n++] = dst + at;  // xor_gen's destination is the last vector; it may be the first
      if (xor_gen(n, static_cast<int>(len), vectors) != 0) {
        assert(false && "xor_gen refused its arguments");
        ScalarXor(dst, so_far, rest.subspan(batch_begin, next - batch_begin), at, at + len);
      }
      so_far = dst;
    }
  }
}

// dst = first ^ rest..., all of `len` bytes: a scalar head up to the common alignment, xor_gen for
// the aligned middle, a scalar tail.
void Xor(uint8_t* dst, const uint8_t* first, Sources rest, size_t len) {
  auto phase = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % kParityAlignment; };
  bool same_phase = phase(first) == phase(dst) &&
                    std::all_of(rest.begin(), rest.end(), [&](auto s) { return phase(s.data()) == phase(dst); });
  size_t head = len;  // all of it scalar unless the buffers line up
  size_t bulk = 0;
  if (same_phase && !rest.empty()) {
    head = std::min(len, (kParityAlignment - phase(dst)) % kParityAlignment);
    bulk = (len - head) / kParityAlignment * kParityAlignment;
  }
  ScalarXor(dst, first, rest, 0, head);
  if (bulk > 0) IsalXor(dst, first, rest, head, head + bulk);
  ScalarXor(dst, first, rest, head + bulk, len);
}

}  // namespace

void XorInto(std::span<uint8_t> dst, std::span<const uint8_t> src) {
  assert(dst.size() == src.size());
  Xor(dst.data(), dst.data(), Sources(&src, 1), dst.size());
}

void XorAll(std::span<uint8_t> dst, Sources sources) {
  assert(std::all_of(sources.begin(), sources.end(), [&](auto s) { return s.size() == dst.size(); }));
  if (sources.empty()) {
    std::fill(dst.begin(), dst.end(), uint8_t{0});
    return;
  }
  Xor(dst.data(), sources[0].data(), sources.subspan(1), dst.size());
}

void ParityDelta(std::span<const uint8_t> old_data, std::span<const uint8_t> new_data, std::span<uint8_t> delta) {
  assert(old_data.size() == delta.size() && new_data.size() == delta.size());
  Xor(delta.data(), old_data.data(), Sources(&new_data, 1), delta.size());
}

void UpdateParity(std::span<uint8_t> parity, std::span<const uint8_t> old_data, std::span<const uint8_t> new_data) {
  assert(old_data.size() == parity.size() && new_data.size() == parity.size());
  const std::span<const uint8_t> data[2] = {old_data, new_data};
  Xor(parity.data(), parity.data(), data, parity.size());
}

}  // namespace cairn
