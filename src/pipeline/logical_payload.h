// The logical payload of an extent (file data, then its member table) from the stored
// payload its chunks hold: the extent's transform chain undone (codec/), with the data key
// of the file it holds when the chain encrypts.
#pragma once

#include <cstdint>
#include <vector>

#include "archive/archive.h"
#include "catalog/catalog.h"

namespace cairn {

// REQUIRES: `stored` is the extent's verified stored payload (ExtentStore::ReadExtentPayload),
// `ino` the file it holds data of (0 when not known: an encrypted extent then cannot be
// read), and the catalog mutex not held. NotSupported naming the extent when its chain names
// a transform this cairn does not have; NotFound when it is encrypted and its file has no data
// key (crypto-erased, or lost with a catalog), NotSupported too when its master key cannot be
// had (keystore, key file or command); Corruption when the chain cannot decode the bytes into logical_length of them
// (an encrypted extent that fails authentication included).
Result<std::vector<uint8_t>> LogicalPayload(Archive& archive, const ExtentRecord& extent, uint64_t ino,
                                            std::vector<uint8_t> stored);

}  // namespace cairn
