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

TEST_CASE("CairnMountDevice: the device of the last cairn mount at a path in /proc/self/mountinfo", "[cli]") {
  const std::string mountinfo =
      "22 1 0:21 / /proc rw,nosuid shared:12 - proc proc rw\n"
      "40 22 0:40 / /mnt/my\\040arch rw,nosuid,nodev shared:80 - fuse.cairn /srv/a rw,user_id=0,group_id=0\n"
      "41 22 0:41 / /mnt/other rw - fuse.other x rw,user_id=0\n"
      "42 22 0:42 / /mnt/plain rw - ext4 /dev/sda1 rw\n"
      "43 40 0:43 / /mnt/my\\040arch rw master:3 shared:81 - fuse.cairn /srv/b rw,user_id=0\n"  // on top
      "44 22 0:44 / /mnt/untagged rw - fuse.cairn /srv/c rw,user_id=0\n";
  CHECK(CairnMountDevice(mountinfo, "/mnt/my arch") == "0:43");
  CHECK(CairnMountDevice(mountinfo, "/mnt/untagged") == "0:44");
  CHECK_FALSE(CairnMountDevice(mountinfo, "/mnt/other").has_value());  // not cairn
  CHECK_FALSE(CairnMountDevice(mountinfo, "/mnt/plain").has_value());
  CHECK_FALSE(CairnMountDevice(mountinfo, "/mnt/my\\040arch").has_value());  // compared unescaped
  CHECK_FALSE(CairnMountDevice(mountinfo, "/mnt").has_value());
  CHECK_FALSE(CairnMountDevice("40 22 0:40 / /mnt/x rw\n", "/mnt/x").has_value());  // truncated line
}
