// ParityResync re-derives, in the background of a mount, the parity that does not cover a
// lonestar group's disks: left by a lost journal, a crash or an older cairn at open, or by a
// failed parity write or a damaged delta since (a replaced disk waits for cairn rebuild). A
// step at a time at a low CPU priority; it looks for new gaps every few seconds until unmounted.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

#include "archive/archive.h"

namespace cairn {

class ParityResync {
 public:
  struct Timing {
    std::chrono::milliseconds recheck{5000};       // how often it looks for new gaps
    std::chrono::milliseconds after_error{60000};  // before a group whose step failed is tried again
  };
  // Starts the thread if the archive has a lonestar group.
  explicit ParityResync(Archive& archive);
  ParityResync(Archive& archive, Timing timing);
  // Stops between two steps (what is left stays in the journal for the next mount) and joins.
  ~ParityResync();

 private:
  void Run();
  struct Outcome {
    uint64_t left;  // bytes still to re-derive
    bool failed;    // a step failed (else: what is left waits for missing disks, or nothing)
  };
  // Re-derives what `array` has to (`total` bytes); nothing when the unmount stopped it.
  std::optional<Outcome> Resync(LoneStarArray& array, uint64_t total);
  bool stopping();

  Archive& archive_;
  const Timing timing_;
  std::mutex mutex_;
  std::condition_variable stop_;  // with mutex_
  bool stopping_ = false;         // guarded by mutex_
  std::thread thread_;
};

}  // namespace cairn
