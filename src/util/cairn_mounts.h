// The cairn mounts of this system, read from /proc/mounts. A mount's source (its fsname) names
// its archive directory, and anyone allowed to mount FUSE can claim any name: a mount counts
// only when root or the owner of that directory made it, so a command aimed at a mount point
// never reaches an archive its owner did not mount.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn {

// The fuse.cairn mounts in `table` (text as /proc/mounts gives it): (archive directory,
// mountpoint), those whose user_id= is neither 0 nor the owner of their source left out.
std::vector<std::pair<std::string, std::string>> ParseCairnMounts(std::string_view table);
// ParseCairnMounts of /proc/mounts.
std::vector<std::pair<std::string, std::string>> CairnMounts();
// Where archive directory `archive` (a canonical path) is mounted, if it is (CairnMounts).
std::optional<std::string> MountpointOf(const std::string& archive);

// The device ("MAJOR:MINOR") of the last fuse.cairn mount at `mountpoint` (a canonical path) in
// `mountinfo` (text as /proc/self/mountinfo gives it); nothing when there is none.
std::optional<std::string> CairnMountDevice(std::string_view mountinfo, std::string_view mountpoint);

}  // namespace cairn
