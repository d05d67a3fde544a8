// ReloadOnHangup makes SIGHUP re-read the archive's rules file, the way daemons reload
// their configuration (libfuse's own handler would unmount instead). The signal handler
// only writes to a pipe; a thread does the reload. One instance per process, made after
// libfuse installed its handlers (ServeFuse's ready callback).
#pragma once

#include <atomic>
#include <thread>

#include "fs/filesystem.h"

namespace cairn {

class ReloadOnHangup {
 public:
  // Installs the handler, replacing whatever SIGHUP did before (libfuse's).
  explicit ReloadOnHangup(Filesystem& fs);
  // Ignores SIGHUP from then on (its default would kill the daemon during its last persist)
  // and stops the thread.
  ~ReloadOnHangup();

 private:
  void Run();

  Filesystem& fs_;
  int pipe_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace cairn
