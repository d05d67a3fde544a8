// ParityResync re-derives, in the background of a mount, the parity that does not cover a
// lonestar group's disks: left by a lost journal, a crash or an older cairn at open, or by a
// failed parity write or a damaged delta since (a replaced disk waits for cairn rebuild). A
// step at a time at a low CPU priority; it looks for new gaps every few seconds until unmounted.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

#include "archive/archive.h"

namespace cairn {

class ParityResync {
 public:
  // Starts the thread if the archive has a lonestar group.
  explicit ParityResync(Archive& archive);
  // Stops between two steps (what is left stays in the journal for the next mount) and joins.
  ~ParityResync();

 private:
  void Run();
  // Re-derives what `array` has to (`total` bytes); what is left when it cannot go on, or
  // nothing when the unmount stopped it.
  std::optional<uint64_t> Resync(LoneStarArray& array, uint64_t total);
  bool stopping();

  Archive& archive_;
  std::mutex mutex_;
  std::condition_variable stop_;  // with mutex_
  bool stopping_ = false;         // guarded by mutex_
  std::thread thread_;
};

}  // namespace cairn
