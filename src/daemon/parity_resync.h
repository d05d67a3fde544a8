// ParityResync re-derives, in the background of a mount, the parity that a lost journal, a
// crash or an older cairn left not covering a lonestar group's disks (a replaced disk waits
// for cairn rebuild), a step at a time at a low CPU priority, until done or unmounted.
#pragma once

#include <atomic>
#include <thread>

#include "archive/archive.h"

namespace cairn {

class ParityResync {
 public:
  // Starts the thread if a group has anything to re-derive.
  explicit ParityResync(Archive& archive);
  // Stops between two steps (what is left stays in the journal for the next mount) and joins.
  ~ParityResync();

 private:
  void Run();

  Archive& archive_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace cairn
