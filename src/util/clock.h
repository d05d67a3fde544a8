// Wall-clock time in nanoseconds since the epoch, as stored in the catalog.
#pragma once

#include <cstdint>
#include <ctime>

namespace cairn {

inline int64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace cairn
