// The logical payload of an extent (file data, then its member table) from the stored
// payload its chunks hold: the extent's transform chain undone (codec/).
#pragma once

#include <cstdint>
#include <vector>

#include "catalog/catalog.h"

namespace cairn {

// REQUIRES: `stored` is the extent's verified stored payload (ExtentStore::ReadExtentPayload).
// NotSupported naming the extent when its chain names a transform this cairn does not have,
// Corruption when the chain cannot decode the bytes into logical_length of them.
Result<std::vector<uint8_t>> LogicalPayload(const ExtentRecord& extent, std::vector<uint8_t> stored);

}  // namespace cairn
