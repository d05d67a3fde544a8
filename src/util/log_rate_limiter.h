// Rate limit per log call site: each site (its format string) may write `burst` lines per
// `window`; further lines in that window are counted, and the count is reported once the
// window is over, so a flood costs a few lines and says how much it was.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace cairn {

class LogRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // A "N similar messages suppressed" report due for `site`.
  struct Suppressed {
    std::string site;
    uint64_t count = 0;
  };

  LogRateLimiter(size_t burst, Clock::duration window) : burst_(burst), window_(window) {}

  // Whether a line from `site` at `now` is written. Sites whose window is over and which
  // had lines suppressed are appended to `reports` (and start afresh).
  bool Admit(std::string_view site, Clock::time_point now, std::vector<Suppressed>* reports);
  // Every pending count, window over or not (at shutdown).
  std::vector<Suppressed> TakeAll();

 private:
  struct Site {
    Clock::time_point window_start;
    size_t written = 0;
    uint64_t suppressed = 0;
  };

  size_t burst_;
  Clock::duration window_;
  std::map<std::string, Site, std::less<>> sites_;
};

}  // namespace cairn
