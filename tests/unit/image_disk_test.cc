// ImageDisk's syncs after a failed write-back: Linux reports the failure to one fdatasync
// only, so the disk must keep failing its syncs. The failure is injected by interposing
// fdatasync in this test binary (every other call goes on to the C library's).
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cairn/disk.h"
#include "test_util.h"

namespace {

std::atomic<int> fail_next_sync_of{-1};  // a descriptor whose next fdatasync fails, once

// The descriptor this process has open on `path`.
int DescriptorOf(const std::string& path) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    if (std::filesystem::read_symlink(entry.path(), error) == path) return std::stoi(entry.path().filename());
  }
  return -1;
}

}  // namespace

extern "C" int fdatasync(int fd) {
  int armed = fd;
  if (fail_next_sync_of.compare_exchange_strong(armed, -1)) {
    errno = EIO;  // as after a write-back error the kernel reports once
    return -1;
  }
  static auto* real = reinterpret_cast<int (*)(int)>(dlsym(RTLD_NEXT, "fdatasync"));
  return real(fd);
}

using namespace cairn;

TEST_CASE("ImageDisk: once a sync has failed, every later sync fails too") {
  test::TempDir dir;
  std::string path = dir / "disk.img";
  std::vector<uint8_t> block(4096, 0xAB);
  {
    FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f);
    REQUIRE(::ftruncate(::fileno(f), 1 << 20) == 0);
    std::fclose(f);
  }
  auto disk = OpenImageDisk(path);
  REQUIRE(disk.ok());
  REQUIRE((*disk)->WriteAt(0, block).ok());
  REQUIRE((*disk)->Sync().ok());
  int fd = DescriptorOf(std::filesystem::canonical(path));
  REQUIRE(fd >= 0);
  fail_next_sync_of = fd;
  REQUIRE((*disk)->WriteAt(4096, block).ok());
  Status first = (*disk)->Sync();
  CHECK_FALSE(first.ok());
  CHECK(fail_next_sync_of == -1);  // the interposed fdatasync was the one called
  REQUIRE((*disk)->WriteAt(8192, block).ok());
  Status later = (*disk)->Sync();  // the C library's fdatasync succeeds now
  CHECK_FALSE(later.ok());
  CHECK_THAT(later.message(), Catch::Contains("an earlier fdatasync failed"));
}
