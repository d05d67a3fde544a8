// Striping turns one extent payload into the chunks its Redundancy asks for (the payload
// itself, identical copies, or Reed–Solomon slices plus parity) and rebuilds the payload
// from whichever chunks could be read. Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "cairn/status.h"
#include "redundancy/redundancy.h"

namespace cairn {

// raid = none | mirror-N | rs-K-M, idr = none | spc-16-1[-sS] and checksum = crc32c |
// xxh3 | sha256, as in user.cairn.*.
Result<Redundancy> ParseRedundancy(std::string_view raid, std::string_view idr,
                                   std::string_view checksum = "crc32c");

// The chunks of `payload`, redundancy.chunk_count() of them, each ChunkLength() bytes.
std::vector<std::vector<uint8_t>> MakeChunks(std::span<const uint8_t> payload, const Redundancy& redundancy);

// One entry per chunk of an extent; nullopt = lost, damaged or not read.
using ChunkSet = std::vector<std::optional<std::vector<uint8_t>>>;

// Rebuilds the payload from `chunks` (entries may be filled in while decoding). Without
// Reed–Solomon the payload is chunk 0's bytes, moved out of `chunks` (left empty there).
// Corruption when too few survive.
Result<std::vector<uint8_t>> JoinChunks(ChunkSet& chunks, const Redundancy& redundancy, uint64_t payload_length);

// Fills the absent chunks listed in `wanted` exactly as they were written, from the present
// ones, computing as little else as it can (Reed–Solomon decodes from the first k present
// chunks). Corruption when fewer than ChunksNeeded() are present.
Status RebuildChunks(ChunkSet& chunks, const Redundancy& redundancy, uint64_t payload_length,
                     std::span<const size_t> wanted);

// How many chunks must survive: 1 for none and mirror, data_chunks for Reed–Solomon.
inline size_t ChunksNeeded(const Redundancy& r) {
  return r.scheme == Redundancy::Scheme::kReedSolomon ? r.data_chunks : 1;
}

}  // namespace cairn
