// Making disk groups: a NAME:TYPE:... specification (cairn mkfs --group, cairn group add), the
// disks it needs formatted and added to the archive's configuration, and a lonestar group's
// journal.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/extent_format.h"
#include "cairn/options.h"
#include "cairn/status.h"

namespace cairn {

struct GroupSpec {
  std::string name;
  std::string type;        // pool or lonestar
  uint32_t disks = 0;      // how many: a pool's as given, a lonestar group's X·Y
  std::string geometry;    // lonestar: XxY:HN+1
  std::string write_mode;  // lonestar: serialized (default), direct or delayed
};

// Parses NAME:pool:N or NAME:lonestar:XxY:HN+1[:MODE]; InvalidArgument names what is wrong
// (a lonestar geometry's message names the rule it breaks).
Result<GroupSpec> ParseGroupSpec(std::string_view text);

// Adds group `spec` to the archive in `dir` (identity `id`): formats its disks as images of
// `disk_size` bytes under dir/disks, or, when `devices` are given (one per disk), on those
// block devices or files; appends them and the group to `options`; creates a lonestar
// group's journal. The caller saves `options` (SaveConfig) afterwards. Refuses a name taken.
// A lonestar group's devices are zeroed first (with `progress` lines): its parity starts as the
// parity of zeros, as on new images, whatever the devices held before.
Status AddGroup(const std::string& dir, const ArchiveId& id, const GroupSpec& spec, uint64_t disk_size,
                const std::vector<std::string>& devices, ArchiveOptions& options,
                const std::function<void(const std::string&)>& progress = {});

}  // namespace cairn
