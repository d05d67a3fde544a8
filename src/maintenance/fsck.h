// CheckArchive verifies an unmounted archive end to end: catalog integrity, the
// namespace (names, link counts, reachability), file → segment → extent maps, extent
// placement (bounds, overlaps, reference counts, leaks) and every extent on the disks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "archive/archive.h"

namespace cairn {

struct FsckReport {
  std::vector<std::string> problems;  // each names the object and what is wrong
  std::vector<std::string> notes;     // harmless findings (e.g. orphans freed at next mount)
  uint64_t inodes = 0;
  uint64_t extents = 0;
  uint64_t bytes_verified = 0;
  uint64_t parity_bytes_checked = 0;  // of lonestar groups' disks, read to check their parity
  bool clean() const { return problems.empty(); }
};

// `progress` is called with (extents checked, extents total) while reading the disks.
FsckReport CheckArchive(Archive& archive, const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace cairn
