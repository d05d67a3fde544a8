// TransformPool: results arrive through their own futures, on the pool's threads, failures
// included; a pool being destroyed still runs what was queued.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>

#include "codec/transform_pool.h"

using namespace cairn;

TEST_CASE("TransformPool: every result reaches its own future, work runs on the pool's threads", "[codec]") {
  TransformPool pool(3);
  CHECK(pool.threads() == 3);
  std::mutex mutex;
  std::set<std::thread::id> ran_on;
  std::vector<std::future<Result<std::vector<uint8_t>>>> results;
  for (int i = 0; i < 200; i++) {
    results.push_back(pool.Submit([i, &mutex, &ran_on]() -> Result<std::vector<uint8_t>> {
      {
        std::lock_guard lock(mutex);
        ran_on.insert(std::this_thread::get_id());
      }
      if (i % 50 == 7) return Status::Corruption("work " + std::to_string(i) + " failed");
      return std::vector<uint8_t>(static_cast<size_t>(i % 13), static_cast<uint8_t>(i));
    }));
  }
  for (int i = 0; i < 200; i++) {
    auto r = results[i].get();
    if (i % 50 == 7) {
      CHECK(r.status().message() == "work " + std::to_string(i) + " failed");
    } else {
      REQUIRE(r.ok());
      CHECK(*r == std::vector<uint8_t>(static_cast<size_t>(i % 13), static_cast<uint8_t>(i)));
    }
  }
  CHECK(!ran_on.contains(std::this_thread::get_id()));
  CHECK(ran_on.size() <= 3);
}

TEST_CASE("TransformPool: an exception reaches the future; destruction runs what is queued", "[codec]") {
  std::atomic<int> done{0};
  std::vector<std::future<Result<std::vector<uint8_t>>>> results;
  {
    TransformPool pool(1);
    results.push_back(pool.Submit([]() -> Result<std::vector<uint8_t>> { throw std::runtime_error("boom"); }));
    for (int i = 0; i < 20; i++) {
      results.push_back(pool.Submit([&done]() -> Result<std::vector<uint8_t>> {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        done++;
        return std::vector<uint8_t>{};
      }));
    }
  }
  CHECK(done == 20);
  CHECK_THROWS_WITH(results[0].get(), "boom");
  for (size_t i = 1; i < results.size(); i++) CHECK(results[i].get().ok());
}
