// Reed–Solomon encode and decode through isa-l, with the decode tables of each erasure pattern
// built once and cached.
#include "redundancy/erasure_code.h"

#include <algorithm>
#include <cassert>
#include <climits>
#include <stdexcept>

#include <fmt/format.h>
#include <isa-l/erasure_code.h>

namespace cairn {

namespace {

// ec_init_tables expands every matrix coefficient into 32 bytes of lookup tables. (isa-l 2.31 wrote
// only 8 when GFNI was present; allocating 32 is right for every version.)
constexpr size_t kTableBytesPerCoefficient = 32;

// The Cauchy rows use chunk indexes as GF(2^8) elements.
static_assert(ErasureCode::kMaxDataChunks + ErasureCode::kMaxParityChunks <= 255, "k + m must stay below 256");

}  // namespace

Result<std::unique_ptr<ErasureCode>> ErasureCode::Create(int k, int m) {
  if (k < 1 || k > kMaxDataChunks) {
    return Status::InvalidArgument(fmt::format("erasure code: k = {} data chunks, must be 1..{}", k, kMaxDataChunks));
  }
  if (m < 1 || m > kMaxParityChunks) {
    return Status::InvalidArgument(
        fmt::format("erasure code: m = {} parity chunks, must be 1..{}", m, kMaxParityChunks));
  }
  return std::unique_ptr<ErasureCode>(new ErasureCode(k, m));
}

ErasureCode::ErasureCode(int k, int m)
    : k_(k), m_(m), matrix_(size_t(k + m) * k), encode_tables_(kTableBytesPerCoefficient * k * m) {
  gf_gen_cauchy1_matrix(matrix_.data(), k + m, k);
  ec_init_tables(k, m, &matrix_[size_t(k) * k], encode_tables_.data());
}

void ErasureCode::Encode(size_t len, const uint8_t* const* data, uint8_t* const* parity) const {
  assert(len <= INT_MAX);
  // isa-l's prototype lacks const; it only reads the tables and the data.
  ec_encode_data(static_cast<int>(len), k_, m_, const_cast<uint8_t*>(encode_tables_.data()),
                 const_cast<uint8_t**>(data), const_cast<uint8_t**>(parity));
}

Status ErasureCode::Reconstruct(size_t len, uint8_t* const* chunks, std::span<const int> erased) const {
  const int n = k_ + m_;
  if (erased.size() > size_t(m_)) {
    return Status::InvalidArgument(fmt::format("RS({},{}): {} chunks erased, at most {} can be rebuilt", k_, m_,
                                               erased.size(), m_));
  }
  if (len > INT_MAX) {
    return Status::InvalidArgument(fmt::format("RS({},{}): chunk length {} is too large", k_, m_, len));
  }
  Pattern pattern{};
  for (int index : erased) {
    if (index < 0 || index >= n) {
      return Status::InvalidArgument(
          fmt::format("RS({},{}): erased chunk index {} is outside 0..{}", k_, m_, index, n - 1));
    }
    uint64_t bit = uint64_t{1} << (index % 64);
    if (pattern[index / 64] & bit) {
      return Status::InvalidArgument(fmt::format("RS({},{}): chunk {} is listed twice as erased", k_, m_, index));
    }
    pattern[index / 64] |= bit;
  }
  if (erased.empty()) return Status::OK();

  std::shared_ptr<const DecodePlan> plan = PlanFor(pattern);
  std::array<uint8_t*, kMaxDataChunks> sources;
  std::array<uint8_t*, kMaxParityChunks> targets;
  for (int i = 0; i < k_; i++) sources[i] = chunks[plan->sources[i]];
  const int rows = static_cast<int>(plan->targets.size());
  for (int i = 0; i < rows; i++) targets[i] = chunks[plan->targets[i]];
  ec_encode_data(static_cast<int>(len), k_, rows, const_cast<uint8_t*>(plan->tables.data()), sources.data(),
                 targets.data());
  return Status::OK();
}

size_t ErasureCode::cached_patterns() const {
  std::lock_guard lock(mutex_);
  return plans_.size();
}

std::shared_ptr<const ErasureCode::DecodePlan> ErasureCode::PlanFor(const Pattern& pattern) const {
  {
    std::lock_guard lock(mutex_);
    auto it = plans_.find(pattern);
    if (it != plans_.end()) return it->second;
  }
  // Built without the lock (inverting a 120 x 120 matrix takes milliseconds). Two threads may build
  // the same plan; both are identical and the first one stored is kept.
  std::shared_ptr<const DecodePlan> plan = BuildPlan(pattern);
  std::lock_guard lock(mutex_);
  auto [it, inserted] = plans_.try_emplace(pattern, std::move(plan));
  if (inserted) {
    plan_order_.push_back(pattern);
    if (plan_order_.size() > kMaxCachedPatterns) {
      plans_.erase(plan_order_.front());
      plan_order_.pop_front();
    }
  }
  return it->second;
}

std::shared_ptr<const ErasureCode::DecodePlan> ErasureCode::BuildPlan(const Pattern& pattern) const {
  auto plan = std::make_shared<DecodePlan>();
  for (int i = 0; i < k_ + m_; i++) {
    if ((pattern[i / 64] >> (i % 64)) & 1) {
      plan->targets.push_back(i);
    } else if (int(plan->sources.size()) < k_) {
      plan->sources.push_back(i);
    }
  }

  // With G the generator and d the data, chunk i holds G[i] · d. Stacking the k source rows of G
  // into B gives sources = B · d, hence d = B^-1 · sources: lost data chunk t is row t of B^-1, and
  // lost parity chunk t is G[t] · d = (G[t] · B^-1) · sources.
  const size_t k = k_;
  std::vector<uint8_t> b(k * k);
  std::vector<uint8_t> inverse(k * k);
  for (size_t r = 0; r < k; r++) std::copy_n(&matrix_[plan->sources[r] * k], k, &b[r * k]);
  if (gf_invert_matrix(b.data(), inverse.data(), k_) != 0) {  // destroys b
    throw std::logic_error(fmt::format("RS({},{}): singular decode matrix from a Cauchy generator", k_, m_));
  }
  const size_t rows = plan->targets.size();
  std::vector<uint8_t> decode(rows * k);
  for (size_t r = 0; r < rows; r++) {
    const size_t t = plan->targets[r];
    uint8_t* row = &decode[r * k];
    if (t < k) {
      std::copy_n(&inverse[t * k], k, row);
      continue;
    }
    for (size_t j = 0; j < k; j++) {
      uint8_t sum = 0;  // addition in GF(2^8) is XOR
      for (size_t x = 0; x < k; x++) sum ^= gf_mul(matrix_[t * k + x], inverse[x * k + j]);
      row[j] = sum;
    }
  }
  plan->tables.resize(kTableBytesPerCoefficient * k * rows);
  ec_init_tables(k_, int(rows), decode.data(), plan->tables.data());
  return plan;
}

}  // namespace cairn
