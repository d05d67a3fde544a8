// The logical payload of an extent (file data, then its member table) from the stored
// payload its chunks hold: the extent's transform chain undone (codec/), with the data key
// of the file it holds when the chain encrypts.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "archive/archive.h"
#include "backend/extent_format.h"
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

// The segments an extent's member table records: what a segments row that points into the
// extent must agree with, so a damaged catalog cannot hand one file another's bytes. An extent
// written before format v3 has no table, and then nothing is checked.
class RecordedSegments {
 public:
  RecordedSegments() = default;  // checks nothing
  // From the header of one of the extent's chunks and its logical payload (which the table
  // ends). Corruption naming the extent when the table's length does not fit the payload; a
  // table that does not decode (some older cairns wrote such tables) checks nothing, logged.
  static Result<RecordedSegments> Of(const ExtentHeader& header, std::span<const uint8_t> logical);
  // Corruption naming the row unless the table records segment `row.index` of inode `row.ino`
  // at `row.extent_offset`, with at least `row.length` bytes (a truncate shortens the row,
  // not the extent). Hole rows are not checked: they read as zeros whatever they point at.
  Status Check(const SegmentRecord& row) const;

 private:
  struct Segment {
    uint64_t ino, index, offset, length;
  };
  uint64_t extent_id_ = 0;
  bool has_table_ = false;
  std::vector<Segment> segments_;  // sorted by (ino, index)
};

}  // namespace cairn
