// Redundancy: how an extent's payload is spread over chunks on distinct disks (none, mirror
// copies, Reed–Solomon slices) and what each chunk carries besides (intra-disk parity, a digest).
// Its fields are stored in extent headers and catalog rows: never renumber them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cairn/status.h"
#include "redundancy/checksum.h"

namespace cairn {

// Each chunk is stored as its own on-disk extent on its own disk.
struct Redundancy {
  enum class Scheme : uint8_t {
    kNone = 0,         // one chunk: the payload
    kMirror = 1,       // 1 + parity_chunks identical copies
    kReedSolomon = 2,  // data_chunks slices + parity_chunks Cauchy RS parity (isa-l)
    kTwoDimensional = 3,  // one chunk, the payload, on a bucket of a lonestar group (its parity grid protects it)
  };
  Scheme scheme = Scheme::kNone;
  uint8_t data_chunks = 1;
  uint8_t parity_chunks = 0;
  uint8_t idr_scramble = 0;  // 0: no intra-disk redundancy; else SPC 16+1 with this scrambling
  ChecksumType checksum = ChecksumType::kCrc32c;  // kept with each chunk besides its CRC32C
  size_t chunk_count() const { return scheme == Scheme::kMirror ? 1u + parity_chunks : data_chunks + parity_chunks; }
  // Bytes of payload each chunk carries (RS slices are padded to a multiple of 64).
  uint64_t ChunkLength(uint64_t payload_length) const;
  bool operator==(const Redundancy&) const = default;
};
constexpr uint8_t kMaxMirrorCopies = 8;  // mirror-2 .. mirror-8

// Corruption naming the field unless `r` is a scheme this build knows with its fields in
// range: none and 2d are 1 + 0 chunks, mirror 1 + 1..7, rs-K-M K 1..128 and M 1..32, idr_scramble
// 0..64, a known checksum. Then chunk_count() >= 1 and ChunkLength() cannot divide by zero.
Status CheckRedundancy(const Redundancy& r);

}  // namespace cairn
