// Finds every extent on an archive's disks without a catalog: walks each disk block by block
// for chunk headers (checked: magic, CRC, archive id), skips over each chunk found, and
// groups the chunks into extent records the read path can use (cairn recover).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "archive/archive.h"

namespace cairn {

struct FoundExtent {
  ExtentRecord record;     // chunks in chunk-index order; those not found on kNoDisk
  ExtentHeader header;     // of one chunk: kind, policy stamp, member table length, version
  std::string where;       // "disk N offset O" of that chunk, for messages
  std::string missing;     // the chunk indexes not found, "" when complete
};

struct ExtentScan {
  std::map<uint64_t, FoundExtent> extents;  // by id, complete or not
  std::vector<std::string> problems;        // damaged headers, unreadable ranges
  uint64_t max_extent_id = 0;               // of every header seen, complete or not
  uint64_t chunks = 0;
};

// `progress(disk, bytes_scanned)` after every megabyte or so.
ExtentScan ScanDisks(Archive& archive, const std::function<void(size_t, uint64_t)>& progress = {});

}  // namespace cairn
