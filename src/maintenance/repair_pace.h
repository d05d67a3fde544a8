// RepairPace keeps a scrub or rebuild to the options it was given: a rate in bytes per second,
// a time budget and a stop request, for all its phases together (lonestar groups and extents).
// Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

#include "maintenance/repair.h"
#include "util/clock.h"

namespace cairn {

class RepairPace {
 public:
  explicit RepairPace(const RepairOptions& options) : options_(options), start_(NowNs()) {}

  bool Stopping() const { return options_.should_stop && options_.should_stop(); }
  // Stopping, or past the budget: the run ends here and resumes later.
  bool Over() const { return Stopping() || (options_.budget_ns > 0 && NowNs() - start_ > options_.budget_ns); }
  // Sleeps while `bytes` read in this phase, with those of the phases before, are ahead of the
  // rate (waking to check Stopping).
  void Throttle(uint64_t bytes) const {
    if (options_.rate == 0) return;
    double due = start_ + (earlier_ + bytes) * 1e9 / static_cast<double>(options_.rate);
    while (!Stopping() && due > static_cast<double>(NowNs())) {
      std::this_thread::sleep_for(
          std::chrono::nanoseconds(static_cast<int64_t>(std::min(due - static_cast<double>(NowNs()), 100e6))));
    }
  }
  // A phase that read `bytes` has ended; the next counts its own from zero.
  void PhaseDone(uint64_t bytes) { earlier_ += bytes; }

 private:
  const RepairOptions& options_;
  const int64_t start_;
  uint64_t earlier_ = 0;  // bytes read by the phases before this one
};

}  // namespace cairn
