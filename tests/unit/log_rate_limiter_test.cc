#include <catch2/catch.hpp>

#include <chrono>
#include <vector>

#include "util/log_rate_limiter.h"

using namespace cairn;
using namespace std::chrono_literals;

TEST_CASE("LogRateLimiter: a burst per site and window, then a count of what was suppressed") {
  LogRateLimiter limiter(3, 10s);
  LogRateLimiter::Clock::time_point t0{};
  std::vector<LogRateLimiter::Suppressed> reports;
  for (int i = 0; i < 3; i++) CHECK(limiter.Admit("refused {}", t0 + 1s, &reports));
  for (int i = 0; i < 1000; i++) CHECK_FALSE(limiter.Admit("refused {}", t0 + 2s, &reports));
  CHECK(limiter.Admit("other {}", t0 + 3s, &reports));  // another site has its own budget
  CHECK(reports.empty());
  CHECK_FALSE(limiter.Admit("refused {}", t0 + 10s, &reports));  // still the window begun at 1 s
  CHECK(reports.empty());
  // The window is over: the count comes first, then lines are written again.
  CHECK(limiter.Admit("refused {}", t0 + 11s, &reports));
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].site == "refused {}");
  CHECK(reports[0].count == 1001);
  reports.clear();
  CHECK(limiter.Admit("refused {}", t0 + 12s, &reports));
  CHECK(reports.empty());
}

TEST_CASE("LogRateLimiter: a count is reported when any site logs after the window, and at the end") {
  LogRateLimiter limiter(1, 5s);
  LogRateLimiter::Clock::time_point t0{};
  std::vector<LogRateLimiter::Suppressed> reports;
  CHECK(limiter.Admit("a", t0, &reports));
  CHECK_FALSE(limiter.Admit("a", t0, &reports));
  CHECK_FALSE(limiter.Admit("a", t0, &reports));
  CHECK(limiter.Admit("b", t0 + 6s, &reports));
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].count == 2);

  CHECK_FALSE(limiter.Admit("b", t0 + 7s, &reports));
  auto pending = limiter.TakeAll();
  REQUIRE(pending.size() == 1);
  CHECK(pending[0].site == "b");
  CHECK(pending[0].count == 1);
  CHECK(limiter.TakeAll().empty());
}
