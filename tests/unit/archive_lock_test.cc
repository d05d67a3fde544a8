// The archive lock against a second holder, a probe of who holds it, and a lock file that
// is a second name of some other file.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "archive/archive_lock.h"
#include "test_util.h"

using namespace cairn;

namespace {

std::string Contents(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("ArchiveLock: a second holder is refused, naming the first") {
  test::TempDir dir;
  auto first = ArchiveLock::Acquire(dir.path());
  REQUIRE(first.ok());
  CHECK(ArchiveLock::Holder(dir.path()) == ::getpid());
  auto second = ArchiveLock::Acquire(dir.path());
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().IsBusy());
  CHECK_THAT(second.status().message(), Catch::Contains(fmt::format("pid {}", ::getpid())));
}

TEST_CASE("ArchiveLock: a probe of the holder at the same moment does not keep the lock from being taken") {
  test::TempDir dir;
  std::string path = dir / "lock";
  int probe = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
  REQUIRE(probe >= 0);
  REQUIRE(::flock(probe, LOCK_SH) == 0);  // what Holder() holds for an instant
  auto released = std::async(std::launch::async, [probe] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ::close(probe);
  });
  auto lock = ArchiveLock::Acquire(dir.path());
  released.wait();
  INFO(lock.status().message());
  CHECK(lock.ok());
}

TEST_CASE("ArchiveLock: a lock file with a second name elsewhere is refused, and left as it is") {
  test::TempDir dir;
  std::string other = dir / "someone-elses-file";
  std::ofstream(other) << "precious\n";
  REQUIRE(::link(other.c_str(), (dir / "lock").c_str()) == 0);
  auto lock = ArchiveLock::Acquire(dir.path());
  REQUIRE_FALSE(lock.ok());
  CHECK_THAT(lock.status().message(), Catch::Contains("not a regular file with one name"));
  CHECK(Contents(other) == "precious\n");
}
