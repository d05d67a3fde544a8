#include "redundancy/redundancy.h"

#include <fmt/format.h>

#include "redundancy/erasure_code.h"
#include "redundancy/intra_disk.h"

namespace cairn {

Status CheckRedundancy(const Redundancy& r) {
  auto bad = [&](std::string_view field, uint64_t value, std::string_view allowed) {
    return Status::Corruption(fmt::format("redundancy scheme {}: {} {} is out of range ({})",
                                          static_cast<int>(r.scheme), field, value, allowed));
  };
  switch (r.scheme) {
    case Redundancy::Scheme::kNone:
    case Redundancy::Scheme::kTwoDimensional:
      if (r.data_chunks != 1) return bad("data_chunks", r.data_chunks, "1 for none and 2d");
      if (r.parity_chunks != 0) return bad("parity_chunks", r.parity_chunks, "0 for none and 2d");
      break;
    case Redundancy::Scheme::kMirror:
      if (r.data_chunks != 1) return bad("data_chunks", r.data_chunks, "1 for mirror");
      if (r.parity_chunks < 1 || r.parity_chunks >= kMaxMirrorCopies) {
        return bad("parity_chunks", r.parity_chunks, "1..7 for mirror");
      }
      break;
    case Redundancy::Scheme::kReedSolomon:
      if (r.data_chunks < 1 || r.data_chunks > ErasureCode::kMaxDataChunks) {
        return bad("data_chunks", r.data_chunks, "1..128 for rs");
      }
      if (r.parity_chunks < 1 || r.parity_chunks > ErasureCode::kMaxParityChunks) {
        return bad("parity_chunks", r.parity_chunks, "1..32 for rs");
      }
      break;
    default:
      return Status::Corruption(fmt::format("unknown redundancy scheme {} (0 none, 1 mirror, 2 rs, 3 2d)",
                                            static_cast<int>(r.scheme)));
  }
  if (r.idr_scramble > kIdrMaxScramble) return bad("idr_scramble", r.idr_scramble, "0..64");
  if (r.checksum > kLastChecksumType) {
    return bad("checksum", static_cast<uint64_t>(r.checksum), "0..3: crc32c, xxh3, sha256, blake3");
  }
  return Status::OK();
}

uint64_t Redundancy::ChunkLength(uint64_t payload_length) const {
  if (scheme != Scheme::kReedSolomon) return payload_length;
  uint64_t slice = (payload_length + data_chunks - 1) / data_chunks;
  return (slice + 63) / 64 * 64;
}

}  // namespace cairn
