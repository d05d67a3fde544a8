#include "daemon/parity_resync.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "util/log.h"
#include "util/size.h"

namespace cairn {
namespace {

constexpr uint64_t kStep = 64ull << 20;  // between two steps the unmount may stop it

}  // namespace

ParityResync::ParityResync(Archive& archive) : archive_(archive) {
  for (const auto& array : archive_.arrays()) {
    if (array->defective_bytes(false) > 0) {
      thread_ = std::thread([this] { Run(); });
      return;
    }
  }
}

ParityResync::~ParityResync() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void ParityResync::Run() {
  // Behind the mount's own work: reads and writes of files go first when the CPUs are busy.
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10) != 0) {
    LogWarning("parity resync: cannot lower its priority: {}", std::strerror(errno));
  }
  for (const auto& array : archive_.arrays()) {
    const uint64_t total = array->defective_bytes(false);
    if (total == 0) continue;
    LogInfo("lonestar group {}: re-deriving {} of parity in the background", array->name(), FormatSize(total));
    auto start = std::chrono::steady_clock::now();
    for (uint64_t left = total; left > 0;) {
      if (stopping_) {
        LogInfo("lonestar group {}: parity resync stopped by the unmount, {} left for the next mount", array->name(),
                FormatSize(left));
        return;
      }
      auto after = array->RebuildStep(kStep, false);
      if (!after.ok()) {
        LogError("lonestar group {}: parity resync stopped, {} left (cairn rebuild retries): {}", array->name(),
                 FormatSize(left), after.status().message());
        break;
      }
      if (*after >= left) {  // nothing it can rebuild now: on missing disks
        LogWarning("lonestar group {}: {} of parity waits for missing disks (cairn disk replace, cairn rebuild)",
                   array->name(), FormatSize(*after));
        break;
      }
      // A line per tenth done: a resync of large disks takes hours.
      if ((total - *after) * 10 / total > (total - left) * 10 / total && *after > 0) {
        LogInfo("lonestar group {}: parity resync {}% done, {} left", array->name(), (total - *after) * 100 / total,
                FormatSize(*after));
      }
      left = *after;
      if (left == 0) {
        std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        LogInfo("lonestar group {}: parity re-derived ({} in {:.1f} s)", array->name(), FormatSize(total),
                took.count());
      }
    }
  }
}

}  // namespace cairn
