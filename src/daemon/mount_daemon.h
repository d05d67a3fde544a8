// The daemon that serves a mounted archive, from opening it to the last persist after the
// unmount: recovery, control socket, background threads, SIGHUP reload, the FUSE loop.
// cairn mount (cli/mount_command.cc) parses the command line and calls one of these once.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cairn/status.h"
#include "fuse/fuse_ops.h"

namespace cairn {

struct DaemonOptions {
  std::string archive;     // absolute: a forked daemon runs in "/"
  MountSettings settings;  // mountpoint (absolute too) and FUSE options
  bool degraded = false;   // -o degraded: mount even with disks missing
  std::vector<std::pair<std::string, std::string>> overrides;  // -o key=value
};

// Serves the mount from this process until it is unmounted (cairn mount -f). A failure
// to start is printed to stderr. Returns the process exit code: 0 once everything is
// persisted, 1 otherwise.
int RunDaemonInForeground(const DaemonOptions& options);

// Forks a daemon (its own session, in "/", stdin/stdout/stderr on /dev/null once the mount
// is live) and returns once it reports: OK when the mount is live, else its reason.
Status StartDaemon(const DaemonOptions& options);

}  // namespace cairn
