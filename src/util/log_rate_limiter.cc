#include "util/log_rate_limiter.h"

namespace cairn {

bool LogRateLimiter::Admit(std::string_view site, Clock::time_point now, std::vector<Suppressed>* reports) {
  for (auto& [name, state] : sites_) {
    if (now - state.window_start < window_) continue;
    if (state.suppressed > 0) reports->push_back({name, state.suppressed});
    state = Site{now, 0, 0};
  }
  auto it = sites_.find(site);
  if (it == sites_.end()) it = sites_.emplace(std::string(site), Site{now, 0, 0}).first;
  if (it->second.written < burst_) {
    it->second.written++;
    return true;
  }
  it->second.suppressed++;
  return false;
}

std::vector<LogRateLimiter::Suppressed> LogRateLimiter::TakeAll() {
  std::vector<Suppressed> reports;
  for (auto& [name, state] : sites_) {
    if (state.suppressed > 0) reports.push_back({name, state.suppressed});
    state.suppressed = 0;
  }
  return reports;
}

}  // namespace cairn
