// Writing and reading whole extents (header + payload) on a Disk, with every check
// the format requires on the way back in.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/extent_format.h"
#include "cairn/disk.h"

namespace cairn {

// Writes header and payload at `offset` (block aligned), padding to whole blocks; with
// header.redundancy.idr_scramble the payload goes with its intra-disk parity.
// The caller syncs the disk before committing the extent to the catalog.
Status WriteExtent(Disk& disk, uint64_t offset, const ExtentHeader& header, std::span<const uint8_t> payload);
// The bytes WriteExtent writes.
std::vector<uint8_t> EncodeExtent(const ExtentHeader& header, std::span<const uint8_t> payload);

// What the catalog says the extent at an offset must be.
struct ExtentExpectation {
  ArchiveId archive_id{};
  uint64_t extent_id = 0;
  uint64_t payload_length = 0;
  uint32_t payload_crc = 0;
  uint8_t chunk_index = 0;
  uint8_t idr_scramble = 0;
  ChecksumType checksum = ChecksumType::kCrc32c;
  Digest digest{};  // for checksum types other than crc32c
};

// Reads the extent at `offset`, checks header, identity, length and payload CRC, and
// returns the payload. With intra-disk parity, blocks the disk cannot read are rebuilt
// and a block with a silent error is located with the CRC and rebuilt; the blocks
// repaired are added to *repaired (physical block numbers in the payload) so the caller
// can rewrite them. Anything else is Corruption (or IOError) naming disk, offset and problem.
// On success *header_out (if given) is the extent's checked header.
Result<std::vector<uint8_t>> ReadExtent(Disk& disk, uint64_t offset, const ExtentExpectation& expect,
                                        std::vector<uint64_t>* repaired = nullptr, ExtentHeader* header_out = nullptr);

}  // namespace cairn
