#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"
#include "util/log.h"

using namespace cairn;

namespace {

// Lines from many call sites (so the rate limit lets them all through).
void LogFromManySites(int lines) {
  std::string filler(200, 'f');
  for (int i = 0; i < lines; i++) {
    std::string site = "site " + std::to_string(i);
    LogLine(LogLevel::kWarning, site, site + " " + filler);
  }
}

}  // namespace

TEST_CASE("Log: the file moves to PATH.1 at its size limit and is created 0600") {
  test::TempDir dir;
  std::string path = dir / "cairn.log";
  constexpr uint64_t kMax = 64 << 10;
  SetLogToStderr(false);
  SetLogFile(path, kMax);
  LogFromManySites(1000);  // about 250 KiB of lines
  SetLogFile("");
  SetLogToStderr(true);

  REQUIRE(std::filesystem::exists(path + ".1"));
  CHECK(std::filesystem::file_size(path) <= kMax);
  CHECK(std::filesystem::file_size(path + ".1") <= kMax);
  CHECK(std::filesystem::file_size(path + ".1") > kMax - 300);
  CHECK_FALSE(std::filesystem::exists(path + ".2"));
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // The newest line is the last one in the new file.
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  CHECK(last.find("site 999 fff") != std::string::npos);
}

TEST_CASE("Log: a file made anew after a rotation belongs to the owner of its directory") {
  if (::geteuid() != 0) {
    WARN("not run: needs root to own files as another user");
    return;
  }
  test::TempDir dir;
  std::string path = dir / "cairn.log";
  constexpr uid_t kOwner = 65534;
  REQUIRE(::chown(dir.path().c_str(), kOwner, kOwner) == 0);
  SetLogToStderr(false);
  SetLogFile(path, 64 << 10);
  LogFromManySites(1000);
  SetLogFile("");
  SetLogToStderr(true);

  REQUIRE(std::filesystem::exists(path + ".1"));
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK(st.st_uid == kOwner);
  CHECK(st.st_gid == kOwner);
}
