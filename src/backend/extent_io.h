// Writing and reading whole extents (header + payload) on a Disk, with every check
// the format requires on the way back in.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/extent_format.h"
#include "cairn/disk.h"

namespace cairn {

// Writes header and payload at `offset` (block aligned), padding to whole blocks.
// The caller syncs the disk before committing the extent to the catalog.
Status WriteExtent(Disk& disk, uint64_t offset, const ExtentHeader& header, std::span<const uint8_t> payload);

// What the catalog says the extent at an offset must be.
struct ExtentExpectation {
  ArchiveId archive_id{};
  uint64_t extent_id = 0;
  uint64_t payload_length = 0;
  uint32_t payload_crc = 0;
};

// Reads the extent at `offset`, checks header, identity, length and payload CRC, and
// returns the payload. Any mismatch is Corruption naming disk, offset and problem.
Result<std::vector<uint8_t>> ReadExtent(Disk& disk, uint64_t offset, const ExtentExpectation& expect);

}  // namespace cairn
