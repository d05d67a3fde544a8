// Chunk checksums chosen by the checksum= policy key: CRC32C (isa-l, always kept as well),
// XXH3-64 (libxxhash), SHA-256 (OpenSSL) or BLAKE3, stored with every chunk and verified on reads.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "cairn/status.h"

namespace cairn {

// Persisted values: never renumber.
enum class ChecksumType : uint8_t { kCrc32c = 0, kXxh3 = 1, kSha256 = 2, kBlake3 = 3 };
constexpr ChecksumType kLastChecksumType = ChecksumType::kBlake3;

using Digest = std::array<uint8_t, 32>;  // the first DigestSize() bytes are used

// "crc32c", "xxh3", "sha256", "blake3"; anything else is InvalidArgument.
Result<ChecksumType> ParseChecksum(std::string_view name);
std::string_view ChecksumName(ChecksumType type);
// Bytes of digest stored besides the CRC: 0 for crc32c, 8 for xxh3, 32 for sha256 and blake3.
size_t DigestSize(ChecksumType type);
// The digest of `data` (all zero for crc32c, whose value is the CRC field itself).
Digest ComputeDigest(ChecksumType type, std::span<const uint8_t> data);

}  // namespace cairn
