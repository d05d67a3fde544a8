#include "codec/incompressible.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace cairn {

namespace {

constexpr size_t kSample = 4096;
constexpr size_t kSamples = 16;
constexpr size_t kMinimum = 4 * kSample;
// zstd saves less than about 1 % on data whose bytes are this evenly spread (unless it
// repeats farther apart than the samples show: a trade the cheap guess makes).
constexpr double kIncompressibleBits = 7.95;

}  // namespace

bool LooksIncompressible(std::span<const uint8_t> data) {
  if (data.size() < kMinimum) return false;
  std::array<uint32_t, 256> counts{};
  const size_t samples = std::min(kSamples, data.size() / kSample);
  const size_t stride = (data.size() - kSample) / (samples > 1 ? samples - 1 : 1);
  for (size_t i = 0; i < samples; i++) {
    for (uint8_t byte : data.subspan(i * stride, kSample)) counts[byte]++;
  }
  const double total = static_cast<double>(samples * kSample);
  double bits = 0;
  for (uint32_t count : counts) {
    if (count) bits -= count / total * std::log2(count / total);
  }
  return bits >= kIncompressibleBits;
}

}  // namespace cairn
