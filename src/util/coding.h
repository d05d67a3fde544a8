// Little-endian fixed-width encoding and the masked CRC32C used by every on-disk
// structure (see man/cairn-format.5).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace cairn {

inline void PutFixed16(uint8_t* dst, uint16_t v) { for (int i = 0; i < 2; i++) dst[i] = uint8_t(v >> (8 * i)); }
inline void PutFixed32(uint8_t* dst, uint32_t v) { for (int i = 0; i < 4; i++) dst[i] = uint8_t(v >> (8 * i)); }
inline void PutFixed64(uint8_t* dst, uint64_t v) { for (int i = 0; i < 8; i++) dst[i] = uint8_t(v >> (8 * i)); }

inline uint16_t GetFixed16(const uint8_t* src) { return uint16_t(src[0] | (src[1] << 8)); }
inline uint32_t GetFixed32(const uint8_t* src) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = (v << 8) | src[i];
  return v;
}
inline uint64_t GetFixed64(const uint8_t* src) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | src[i];
  return v;
}

// CRC32C (Castagnoli) of `data`, continuing from `crc` (0 to start).
// True for an empty span or one holding only zero bytes (a hole, stored as no extent).
inline bool IsAllZero(std::span<const uint8_t> data) {
  return data.empty() || (data[0] == 0 && std::memcmp(data.data(), data.data() + 1, data.size() - 1) == 0);
}

uint32_t Crc32c(std::span<const uint8_t> data, uint32_t crc = 0);

// Bytes in several places taken as one run, in order (a gathered write, a journaled delta).
using BytePieces = std::span<const std::span<const uint8_t>>;
inline uint64_t TotalSize(BytePieces pieces) {
  uint64_t n = 0;
  for (std::span<const uint8_t> piece : pieces) n += piece.size();
  return n;
}
// The pieces copied into one buffer, in order.
inline std::vector<uint8_t> Joined(BytePieces pieces) {
  std::vector<uint8_t> joined;
  joined.reserve(TotalSize(pieces));
  for (std::span<const uint8_t> piece : pieces) joined.insert(joined.end(), piece.begin(), piece.end());
  return joined;
}

// Stored CRCs are masked so that a CRC computed over data that itself embeds CRCs
// does not degenerate (same rationale as LevelDB's crc32c::Mask).
constexpr uint32_t kCrcMaskDelta = 0xa282ead8u;
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kCrcMaskDelta; }
inline uint32_t UnmaskCrc(uint32_t masked) {
  uint32_t rot = masked - kCrcMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace cairn
