#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "test_util.h"
#include "util/cairn_mounts.h"

using namespace cairn;

TEST_CASE("CairnMounts: a mount counts only when root or the owner of the archive it names made it", "[cli]") {
  test::TempDir dir;
  std::filesystem::create_directories(dir / "my archive");
  std::filesystem::create_directories(dir / "theirs");
  REQUIRE(::chown((dir / "theirs").c_str(), 1234, 1234) == 0);
  std::string mine = dir / "my archive", theirs = dir / "theirs";
  std::string escaped = dir / "my\\040archive";  // /proc/mounts writes a space as \040
  std::string table = fmt::format(
      "proc /proc proc rw,nosuid 0 0\n"
      "{0} /mnt/a fuse.cairn rw,user_id=0,group_id=0,default_permissions 0 0\n"
      "{1} /mnt/b fuse.cairn rw,user_id=1234,group_id=1234 0 0\n"
      "{1} /home/eve/fake fuse.cairn rw,user_id=4321,group_id=4321 0 0\n"  // another user naming theirs
      "{0} /home/eve/fake2 fuse.cairn rw,user_id=4321 0 0\n"               // ... or root's
      "{0} /mnt/c fuse.cairn rw,group_id=0 0 0\n"                          // no user_id: not counted
      "{0} /mnt/d fuse.other rw,user_id=0 0 0\n",
      escaped, theirs);
  auto mounts = ParseCairnMounts(table);
  REQUIRE(mounts.size() == 2);
  CHECK(mounts[0] == std::pair<std::string, std::string>(mine, "/mnt/a"));
  CHECK(mounts[1] == std::pair<std::string, std::string>(theirs, "/mnt/b"));
}
