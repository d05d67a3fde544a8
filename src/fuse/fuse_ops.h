// The FUSE low-level front end: one thin handler per operation that calls Filesystem
// and sends exactly one reply. Nothing else in cairn includes fuse headers.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "fs/filesystem.h"

namespace cairn {

struct MountSettings {
  std::string mountpoint;
  bool debug = false;
  bool single_thread = false;
  std::vector<std::string> fuse_options;  // passed to the kernel / libfuse (allow_other, ro, ...)
};

// Mounts `fs` at settings.mountpoint, calls `ready()` once the mount is live (libfuse's
// signal handlers installed: SIGINT, SIGTERM and SIGHUP unmount), then serves requests
// until unmounted or signalled. Returns after unmounting.
Status ServeFuse(Filesystem& fs, const MountSettings& settings, const std::function<Status()>& ready);

}  // namespace cairn
