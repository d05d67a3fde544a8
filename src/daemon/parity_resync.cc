#include "daemon/parity_resync.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>

#include "util/log.h"
#include "util/size.h"

namespace cairn {
namespace {

constexpr uint64_t kStep = 64ull << 20;  // between two steps the unmount may stop it

}  // namespace

ParityResync::ParityResync(Archive& archive) : ParityResync(archive, Timing{}) {}

ParityResync::ParityResync(Archive& archive, Timing timing) : archive_(archive), timing_(timing) {
  if (!archive_.arrays().empty()) thread_ = std::thread([this] { Run(); });
}

ParityResync::~ParityResync() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool ParityResync::stopping() {
  std::lock_guard lock(mutex_);
  return stopping_;
}

void ParityResync::Run() {
  // Behind the mount's own work: reads and writes of files go first when the CPUs are busy.
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10) != 0) {
    LogWarning("parity resync: cannot lower its priority: {}", std::strerror(errno));
  }
  using Clock = std::chrono::steady_clock;
  std::map<const LoneStarArray*, uint64_t> waiting;  // what a group had left when missing disks held it up
  std::map<const LoneStarArray*, Clock::time_point> retry_at;  // of a group whose step failed
  for (;;) {
    for (const auto& array : archive_.arrays()) {
      const uint64_t total = array->defective_bytes(false);
      auto it = waiting.find(array.get());
      if (total == 0 || (it != waiting.end() && it->second == total)) continue;  // tried already
      if (auto retry = retry_at.find(array.get()); retry != retry_at.end() && Clock::now() < retry->second) continue;
      auto outcome = Resync(*array, total);
      if (!outcome) return;
      waiting.erase(array.get());
      retry_at.erase(array.get());
      if (outcome->failed) {
        retry_at[array.get()] = Clock::now() + timing_.after_error;
      } else {
        waiting[array.get()] = outcome->left;
      }
    }
    std::unique_lock lock(mutex_);
    if (stop_.wait_for(lock, timing_.recheck, [this] { return stopping_; })) return;
  }
}

std::optional<ParityResync::Outcome> ParityResync::Resync(LoneStarArray& array, uint64_t total) {
  LogInfo("lonestar group {}: re-deriving {} of parity in the background", array.name(), FormatSize(total));
  auto start = std::chrono::steady_clock::now();
  LoneStarArray::RebuildRun run;  // a range that fails is passed over until the next resync
  for (uint64_t left = total; left > 0;) {
    if (stopping()) {
      LogInfo("lonestar group {}: parity resync stopped by the unmount, {} left for the next mount", array.name(),
              FormatSize(left));
      return std::nullopt;
    }
    const size_t failures = run.failures;
    auto after = array.RebuildStep(kStep, false, &run);
    if (after.ok() && *after >= left) {
      // No progress: what is left is on missing disks or failed, unless gaps came during
      // the step, which a second one then takes on.
      auto again = array.RebuildStep(kStep, false, &run);
      if (again.ok() && *again >= *after && run.failures > 0) {
        LogError("lonestar group {}: {} of parity could not be re-derived this time (tried again in {} s, or by "
                 "cairn rebuild)", array.name(), FormatSize(*again),
                 std::chrono::duration_cast<std::chrono::seconds>(timing_.after_error).count());
        return Outcome{*again, true};
      }
      if (again.ok() && *again >= *after) {
        LogWarning("lonestar group {}: {} of parity waits for missing disks (cairn disk replace, cairn rebuild)",
                   array.name(), FormatSize(*again));
        return Outcome{*again, false};
      }
      after = std::move(again);
    }
    if (!after.ok() && run.failures > failures) {  // that range waits; the rest goes on
      LogError("lonestar group {}: parity resync passes over a range: {}", array.name(), after.status().message());
      continue;
    }
    if (!after.ok()) {
      LogError("lonestar group {}: parity resync stopped, {} left (tried again in {} s, or by cairn rebuild): {}",
               array.name(), FormatSize(left), std::chrono::duration_cast<std::chrono::seconds>(timing_.after_error).count(),
               after.status().message());
      return Outcome{left, true};
    }
    total = std::max(total, *after);  // gaps that came meanwhile count too
    // A line per tenth done: a resync of large disks takes hours.
    if ((total - *after) * 10 / total > (total - left) * 10 / total && *after > 0) {
      LogInfo("lonestar group {}: parity resync {}% done, {} left", array.name(), (total - *after) * 100 / total,
              FormatSize(*after));
    }
    left = *after;
  }
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  LogInfo("lonestar group {}: parity re-derived ({} in {:.1f} s)", array.name(), FormatSize(total), took.count());
  return Outcome{0, false};
}

}  // namespace cairn
