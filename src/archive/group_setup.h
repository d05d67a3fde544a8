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

// The smallest disk a group may have.
constexpr uint64_t kMinDiskSize = 64 * 1024;

// `devices` as absolute paths (cairn.conf records them so; a relative one would be read
// relative to the archive directory).
std::vector<std::string> AbsoluteDevices(const std::vector<std::string>& devices);

// Each device once, none the archive has already (it would be formatted, a lonestar group's
// zeroed, over what it holds), none of the archive's own files (its catalog, even where it is
// a link to another disk) or inside its directory, and each a path cairn.conf can record.
Status CheckDevicesAreNew(const std::string& dir, const std::vector<std::string>& devices,
                          const ArchiveOptions& options);

// What AddGroup checks before it writes anything: the number of devices (absolute paths),
// each new to the archive and none of its files or inside its directory, and the disk size.
Status CheckGroup(const std::string& dir, const GroupSpec& spec, uint64_t disk_size,
                  const std::vector<std::string>& devices, const ArchiveOptions& options);

// Adds group `spec` to the archive in `dir` (identity `id`): formats its disks as images of
// `disk_size` bytes under dir/disks, or, when `devices` are given (one per disk), on those
// block devices or files; appends them and the group to `options`; creates a lonestar
// group's journal. The caller saves `options` (SaveConfig) afterwards. Refuses a name taken.
// A lonestar group's devices are zeroed first (with `progress` lines): its parity starts as the
// parity of zeros, as on new images, whatever the devices held before. On failure, the images
// and journal it made are removed and `options` is as it was.
Status AddGroup(const std::string& dir, const ArchiveId& id, const GroupSpec& spec, uint64_t disk_size,
                const std::vector<std::string>& devices, ArchiveOptions& options,
                const std::function<void(const std::string&)>& progress = {});

}  // namespace cairn
