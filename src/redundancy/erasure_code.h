// ErasureCode: Reed–Solomon RS(k, m) over GF(2^8) with isa-l. k data chunks get m parity chunks,
// and any k of the k + m chunks rebuild the others.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "cairn/status.h"

namespace cairn {

// The generator is isa-l's gf_gen_cauchy1_matrix over the polynomial 0x11d: the identity on top,
// then parity row i (k <= i < k + m) has coefficient 1 / (i ^ j) for data chunk j. Parity byte t of
// chunk i is therefore XOR over j of (coefficient * data_j[t]); stored parity depends on this, so
// the generator must never change. Every square submatrix of a Cauchy matrix is invertible, so the
// code is MDS for every supported (k, m), including wide ones like RS(120, 24).
//
// Thread-safe: Encode and Reconstruct may run concurrently on one object.
class ErasureCode {
 public:
  static constexpr int kMaxDataChunks = 128;
  static constexpr int kMaxParityChunks = 32;
  // Decode tables are kept for this many distinct erasure patterns (oldest evicted first).
  static constexpr size_t kMaxCachedPatterns = 256;

  // InvalidArgument unless 1 <= k <= kMaxDataChunks and 1 <= m <= kMaxParityChunks.
  static Result<std::unique_ptr<ErasureCode>> Create(int k, int m);

  ErasureCode(const ErasureCode&) = delete;
  ErasureCode& operator=(const ErasureCode&) = delete;

  int k() const { return k_; }
  int m() const { return m_; }

  // Computes parity[0..m) from data[0..k), each chunk `len` bytes. Chunks need no alignment; below
  // 64 bytes isa-l runs its scalar code, so prefer multiples of 64, ideally 4 KiB or more.
  // REQUIRES: len <= INT_MAX; parity chunks do not overlap the data chunks or each other.
  void Encode(size_t len, const uint8_t* const* data, uint8_t* const* parity) const;

  // chunks[0..k+m) are the data chunks then the parity chunks, `len` bytes each. The chunks listed
  // in `erased` (any order) have lost their content; on success they hold the rebuilt bytes and the
  // others are unchanged. InvalidArgument if more than m are erased, an index repeats or is out of
  // range, or len > INT_MAX; then no chunk is touched.
  Status Reconstruct(size_t len, uint8_t* const* chunks, std::span<const int> erased) const;

  // Number of erasure patterns whose decode tables are cached (for tests).
  size_t cached_patterns() const;

 private:
  // The erased chunks, one bit per chunk index.
  using Pattern = std::array<uint64_t, (kMaxDataChunks + kMaxParityChunks + 63) / 64>;
  // How to rebuild one erasure pattern: ec_encode_data(tables) maps `sources` to `targets`.
  struct DecodePlan {
    std::vector<int> sources;  // the first k surviving chunk indexes
    std::vector<int> targets;  // the erased chunk indexes, ascending
    std::vector<uint8_t> tables;
  };

  ErasureCode(int k, int m);
  std::shared_ptr<const DecodePlan> PlanFor(const Pattern& pattern) const;
  std::shared_ptr<const DecodePlan> BuildPlan(const Pattern& pattern) const;

  const int k_;
  const int m_;
  std::vector<uint8_t> matrix_;         // (k + m) x k generator, row-major
  std::vector<uint8_t> encode_tables_;  // ec_init_tables of the m parity rows

  mutable std::mutex mutex_;
  mutable std::map<Pattern, std::shared_ptr<const DecodePlan>> plans_;  // guarded by mutex_
  mutable std::deque<Pattern> plan_order_;                              // insertion order, guarded by mutex_
};

}  // namespace cairn
