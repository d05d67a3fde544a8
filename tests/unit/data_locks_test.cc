#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <vector>

#include "pipeline/data_locks.h"

using namespace cairn;
using namespace std::chrono_literals;

TEST_CASE("DataLocks: a file's lock holds up its own writers only", "[locks]") {
  DataLocks locks;
  auto reading = locks.Shared(2);  // a read of file 2, waiting for a disk
  // Files that a striped table put on the same lock (2 + 64k) go on.
  for (uint64_t ino : {1ull, 3ull, 66ull, 130ull}) {
    auto writer = std::async(std::launch::async, [&] { locks.Exclusive(ino); });
    CHECK(writer.wait_for(10s) == std::future_status::ready);
  }
  CHECK(std::async(std::launch::async, [&] { locks.Shared(2); }).wait_for(10s) == std::future_status::ready);
  auto writer = std::async(std::launch::async, [&] { locks.Exclusive(2); });
  CHECK(writer.wait_for(100ms) == std::future_status::timeout);  // file 2's own writer waits
  reading.unlock();
  CHECK(writer.wait_for(10s) == std::future_status::ready);
}

TEST_CASE("DataLocks: several at once, or only those free", "[locks]") {
  DataLocks locks;
  auto reading = locks.Shared(7);
  std::vector<uint64_t> inos{9, 7, 3, 9, 71};
  auto held = locks.TryExclusive(&inos);
  CHECK(inos == std::vector<uint64_t>{3, 9, 71});  // 7 is busy; each once, ascending
  CHECK(held.size() == 3);
  auto all = std::async(std::launch::async, [&] { return locks.Exclusive(std::vector<uint64_t>{71, 7}).size(); });
  CHECK(all.wait_for(100ms) == std::future_status::timeout);
  held.clear();
  reading.unlock();
  REQUIRE(all.wait_for(10s) == std::future_status::ready);
  CHECK(all.get() == 2);
}

TEST_CASE("DataLocks: waiting for several, it holds none of them", "[locks]") {
  DataLocks locks;
  auto reading = locks.Shared(7);  // a read of file 7, waiting for a disk to spin up
  auto all = std::async(std::launch::async, [&] { return locks.Exclusive(std::vector<uint64_t>{3, 7, 11}).size(); });
  CHECK(all.wait_for(100ms) == std::future_status::timeout);
  // Files 3 and 11 are not held up by file 7's read: their writers go on meanwhile.
  std::vector<std::future<void>> writers;
  for (uint64_t ino : {3ull, 11ull}) {
    writers.push_back(std::async(std::launch::async, [&locks, ino] { locks.Exclusive(ino); }));
  }
  for (auto& w : writers) CHECK(w.wait_for(10s) == std::future_status::ready);
  auto writer = locks.Exclusive(11);  // held when 7 is let go: it waits for 11 then
  reading.unlock();
  CHECK(all.wait_for(100ms) == std::future_status::timeout);
  writer.unlock();
  REQUIRE(all.wait_for(10s) == std::future_status::ready);
  CHECK(all.get() == 3);
}
