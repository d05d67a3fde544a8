// ChunkLocator names where one chunk lives inside its chunk store. Only the store that
// handed it out interprets it; everything above compares and stores it as it is.
#pragma once

#include <compare>
#include <cstdint>

namespace cairn {

struct ChunkLocator {
  // Store-defined; ordering by it follows the store's layout (a block store: the byte
  // offset of the chunk on its disk, so reading in this order reads front to back).
  uint64_t address = 0;
  uint64_t length = 0;  // bytes the store reserved for the chunk
  auto operator<=>(const ChunkLocator&) const = default;
};

}  // namespace cairn
