// XOR arithmetic for the LoneStar grid's parity disks: building and rebuilding a parity group, and
// the delta rule that keeps hP, vP and vhP current when one data disk changes.
// Pure functions on caller buffers, safe to call concurrently on distinct buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <utility>
#include <vector>

namespace cairn {

// Every function takes buffers of any length and alignment. Buffers whose addresses agree modulo
// kParityAlignment go through isa-l's xor_gen (SIMD) except for a scalar head and tail; buffers that
// do not agree are XORed by scalar code. Allocate with alignas(kParityAlignment) to get the fast path.
constexpr size_t kParityAlignment = 32;

// Storage for parity work: aligned to kParityAlignment, so that XORs of such buffers take the
// fast path, and left uninitialised by resize (each user fills it: a read, or XorAll).
template <typename T>
struct ParityAllocator {
  using value_type = T;
  ParityAllocator() = default;
  template <typename U>
  ParityAllocator(const ParityAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kParityAlignment})); }
  void deallocate(T* p, size_t n) noexcept { ::operator delete(p, n * sizeof(T), std::align_val_t{kParityAlignment}); }
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-initialised: no zeroing
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  friend bool operator==(const ParityAllocator&, const ParityAllocator&) { return true; }
};
using ParityBuffer = std::vector<uint8_t, ParityAllocator<uint8_t>>;

// dst ^= src. REQUIRES: equal sizes.
void XorInto(std::span<uint8_t> dst, std::span<const uint8_t> src);

// dst = sources[0] ^ sources[1] ^ ...: a parity from its data, or a lost member from the rest of its
// group. No sources zeroes dst. REQUIRES: every source as long as dst; dst overlaps no source other
// than sources[0], and that one only exactly (same address).
void XorAll(std::span<uint8_t> dst, std::span<const std::span<const uint8_t>> sources);

// The delta rule. A data disk's range going from old_data to new_data changes each of its parities
// (hP, vP, vhP) by the same delta = old_data ^ new_data, since XOR is linear.
// delta = old_data ^ new_data. REQUIRES: equal sizes; delta overlaps neither input.
void ParityDelta(std::span<const uint8_t> old_data, std::span<const uint8_t> new_data, std::span<uint8_t> delta);
// parity ^= old_data ^ new_data, in one pass: new parity = old parity ^ (old data ^ new data).
// REQUIRES: equal sizes; parity overlaps neither input.
void UpdateParity(std::span<uint8_t> parity, std::span<const uint8_t> old_data, std::span<const uint8_t> new_data);

}  // namespace cairn
