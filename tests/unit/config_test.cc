#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

#include <fmt/format.h>

#include "archive/archive.h"
#include "archive/config.h"
#include "archive_fixture.h"

using namespace cairn;

namespace {
const char* kId = "00112233445566778899aabbccddeeff";
}

TEST_CASE("Config: parses, round-trips and applies overrides") {
  std::string text = std::string("# comment\narchive_id = ") + kId +
                     "\nsegment_size = 8M\ncache_size = 2G  # trailing\ndisk.0 = disks/a.img\ndisk.1 = /dev/sdz\n";
  auto o = ParseConfig(text, "cairn.conf");
  REQUIRE(o.ok());
  CHECK(o->segment_size == 8u << 20);
  CHECK(o->cache_size == 2ull << 30);
  CHECK(o->disks == std::vector<std::string>{"disks/a.img", "/dev/sdz"});
  auto again = ParseConfig(FormatConfig(*o), "x");
  REQUIRE(again.ok());
  CHECK(again->segment_size == o->segment_size);
  CHECK(again->disks == o->disks);
  REQUIRE(ApplyOption(*o, "persist_idle", "9").ok());
  CHECK(o->persist_idle_seconds == 9);
  CHECK(o->log_max_size == 64u << 20);
  REQUIRE(ApplyOption(*o, "log_max_size", "1M").ok());
  auto with_log_size = ParseConfig(FormatConfig(*o), "x");
  REQUIRE(with_log_size.ok());
  CHECK(with_log_size->log_max_size == 1u << 20);
  CHECK(o->read_ahead == 1u << 20);
  CHECK(FormatConfig(*o).find("read_ahead") == std::string::npos);  // a cairn from before reads the file too
  REQUIRE(ApplyOption(*o, "read_ahead", "256K").ok());
  CHECK(ParseConfig(FormatConfig(*o), "x")->read_ahead == 256u << 10);
  REQUIRE(ApplyOption(*o, "read_ahead", "0").ok());  // the kernel's default
  CHECK(o->read_ahead == 0);
  for (const char* bad : {"1000", "65M", "lots"}) {  // not whole pages; past 64M; not a size
    auto st = ApplyOption(*o, "read_ahead", bad);
    CHECK(!st.ok());
    CHECK(st.message().find("read_ahead") != std::string::npos);
    CHECK(o->read_ahead == 0);  // unchanged
  }
}

TEST_CASE("Config: compressed_segment_size is written only when set; mkfs sets it") {
  auto o = ParseConfig(std::string("archive_id = ") + kId + "\nsegment_size = 1M\ndisk.0 = disks/a.img\n", "cairn.conf");
  REQUIRE(o.ok());
  CHECK(o->compressed_segment_size == 0);  // an archive from before the key: segment_size
  CHECK(FormatConfig(*o).find("compressed_segment_size") == std::string::npos);  // a cairn from before reads it
  REQUIRE(ApplyOption(*o, "compressed_segment_size", "16M").ok());
  CHECK(ParseConfig(FormatConfig(*o), "x")->compressed_segment_size == 16u << 20);
  for (const char* bad : {"1K", "2G", "lots"}) {
    auto st = ApplyOption(*o, "compressed_segment_size", bad);
    CHECK(st.message().find("compressed_segment_size") != std::string::npos);
    CHECK(o->compressed_segment_size == 16u << 20);
  }

  test::ArchiveFixture made;
  CHECK(made.archive->options().compressed_segment_size == 8u << 20);
  test::ArchiveFixture large([](MkfsOptions& m) { m.options.segment_size = 32 << 20; });
  CHECK(large.archive->options().compressed_segment_size == 32u << 20);
}

TEST_CASE("Config: errors name the file, the line and the problem") {
  auto check = [](const std::string& text, const char* expected) {
    auto r = ParseConfig(text, "cairn.conf");
    REQUIRE_FALSE(r.ok());
    INFO(r.status().message());
    CHECK(r.status().message().find(expected) != std::string::npos);
  };
  std::string head = std::string("archive_id = ") + kId + "\ndisk.0 = d\n";
  check(head + "colour = blue\n", "cairn.conf:3: unknown option \"colour\"");
  check(head + "segment_size = lots\n", "cairn.conf:3: segment_size");
  check(head + "segment_size = 1K\n", "segment_size = \"1K\" is out of range (4096..1073741824 bytes)");
  check(head + "segment_size = 4097\n", "cairn.conf:3: segment_size = \"4097\": a multiple of 4K");
  check(head + "compressed_segment_size = 1000000\n", "compressed_segment_size = \"1000000\": a multiple of 4K");
  check(head + "read_ahead = 1000\n", "read_ahead = \"1000\": a multiple of 4K");
  check(head + "log_max_size = 1K\n", "cairn.conf:3: log_max_size = \"1K\" is out of range (65536..18446744073709551615 bytes)");
  check(head + "just words\n", "cairn.conf:3: expected 'key = value'");
  check(head + "disk.5 = x\n", "expected disk.1 next");
  check(head + "failed_disks =\n", "cairn.conf:3: failed_disks needs disk numbers");
  check(head + "rebuild_disks = 0,\n", "cairn.conf:3: rebuild_disks needs disk numbers");
  check("disk.0 = d\n", "archive_id missing");
  check(std::string("archive_id = ") + kId + "\n", "no disk.0");
}

TEST_CASE("Config: numbers beyond their field are refused, not truncated") {
  std::string head = std::string("archive_id = ") + kId + "\ndisk.0 = d\ndisk.1 = e\n";
  auto message = [&](const std::string& line) {
    auto r = ParseConfig(head + line + "\n", "cairn.conf");
    return r.ok() ? std::string("accepted") : r.status().message();
  };
  // 4294967297 = 2^32 + 1 used to become 1.
  CHECK(message("read_buffer_segments = 4294967297") ==
        "cairn.conf:4: \"read_buffer_segments\" = \"4294967297\" is out of range (1..4294967295)");
  CHECK(message("read_buffer_segments = 0").find("out of range (1..4294967295)") != std::string::npos);
  CHECK(message("persist_idle = 99999999999999999999999").find("\"persist_idle\" = \"99999999999999999999999\" is "
                                                              "out of range (0..4294967295)") != std::string::npos);
  CHECK(message("reconcile_idle = 4294967296").find("out of range (0..4294967295)") != std::string::npos);
  CHECK(message("segment_size = 2G").find("out of range (4096..1073741824 bytes)") != std::string::npos);
  // A disk index of 2^32 used to become disk 0.
  CHECK(message("failed_disks = 4294967296").find("out of range (0..4294967295)") != std::string::npos);
  CHECK(message("rebuild_disks = 2") == "cairn.conf: rebuild_disks lists disk 2; the archive has disks 0..1");
  auto ok = ParseConfig(head + "read_buffer_segments = 4294967295\nfailed_disks = 1\n", "cairn.conf");
  REQUIRE(ok.ok());
  CHECK(ok->read_buffer_segments == 4294967295u);
  CHECK(ok->failed_disks == std::set<uint32_t>{1});
}

TEST_CASE("Config: control characters in a bad line are escaped in the message") {
  std::string head = std::string("archive_id = ") + kId + "\ndisk.0 = d\n";
  for (std::string line : {std::string("\x1b[2J\x1b]0;owned\x07 junk"), std::string("col\x1bour = \x01"),
                           std::string("persist_idle = 5\x1b[31m"), std::string("cache_size = \x1b\x7f")}) {
    auto r = ParseConfig(head + line + "\n", "cairn.conf");
    REQUIRE_FALSE(r.ok());
    const std::string& m = r.status().message();
    INFO(m);
    CHECK(m.starts_with("cairn.conf:3: "));
    CHECK(std::none_of(m.begin(), m.end(), [](char c) { return (c >= 0 && c < 0x20) || c == 0x7f; }));
    CHECK(m.find("\\x1b") != std::string::npos);
  }
}

TEST_CASE("Config: disk groups parse, round-trip, and default to one pool of every disk") {
  std::string head = std::string("archive_id = ") + kId + "\n";
  for (int i = 0; i < 6; i++) head += "disk." + std::to_string(i) + " = d" + std::to_string(i) + "\n";
  auto none = ParseConfig(head, "cairn.conf");
  REQUIRE(none.ok());
  CHECK(none->groups.empty());
  auto implicit = EffectiveGroups(*none);
  REQUIRE(implicit.size() == 1);
  CHECK(implicit[0].name == "default");
  CHECK(implicit[0].type == "pool");
  CHECK(implicit[0].disks == std::vector<uint32_t>{0, 1, 2, 3, 4, 5});
  CHECK(FormatConfig(*none).find("group.") == std::string::npos);  // existing configs stay as they are

  auto two = ParseConfig(head + "group.fast.type = pool\ngroup.fast.disks = 4, 0\ngroup.bulk_2.disks = 1-3,5\n",
                         "cairn.conf");
  REQUIRE(two.ok());
  REQUIRE(two->groups.size() == 2);
  CHECK(two->groups[0].name == "fast");  // listed first: new data goes there
  CHECK(two->groups[0].disks == std::vector<uint32_t>{4, 0});
  CHECK(two->groups[1].name == "bulk_2");
  CHECK(two->groups[1].type == "pool");  // the default type
  CHECK(two->groups[1].disks == std::vector<uint32_t>{1, 2, 3, 5});
  CHECK(EffectiveGroups(*two).size() == 2);
  auto again = ParseConfig(FormatConfig(*two), "x");
  REQUIRE(again.ok());
  REQUIRE(again->groups.size() == 2);
  CHECK(again->groups[0].name == "fast");
  CHECK(again->groups[0].disks == two->groups[0].disks);
  CHECK(again->groups[1].disks == two->groups[1].disks);
}

TEST_CASE("Config: a lonestar group has a geometry that fits its disks and a write mode") {
  std::string head = std::string("archive_id = ") + kId + "\n";
  for (int d = 0; d < 18; d++) head += fmt::format("disk.{} = d{}\n", d, d);
  auto parse = [&](const std::string& lines) { return ParseConfig(head + lines, "cairn.conf"); };
  auto message = [&](const std::string& lines) {
    auto r = parse(lines);
    return r.ok() ? std::string("accepted") : r.status().message();
  };
  auto good = parse("group.fast.disks = 0,1\ngroup.cold.type = lonestar\ngroup.cold.geometry = 4x4:2+1\n"
                    "group.cold.disks = 2-17\ngroup.cold.write_mode = delayed\n");
  REQUIRE(good.ok());
  CHECK(good->groups[1].type == "lonestar");
  CHECK(good->groups[1].geometry == "4x4:2+1");
  CHECK(good->groups[1].write_mode == "delayed");
  auto again = ParseConfig(FormatConfig(*good), "x");  // what cairn writes back reads the same
  REQUIRE(again.ok());
  CHECK(again->groups[1].geometry == "4x4:2+1");
  CHECK(again->groups[1].write_mode == "delayed");
  CHECK(again->groups[1].disks == good->groups[1].disks);
  CHECK(message("group.c.type = lonestar\ngroup.c.disks = 0-17\n") ==
        "cairn.conf: lonestar group c has no geometry (add group.c.geometry = XxY:HN+1, e.g. 8x5:3+1)");
  CHECK(message("group.c.type = lonestar\ngroup.c.geometry = 4x4:2+1\ngroup.c.disks = 0-16\ngroup.d.disks = 17\n") ==
        "cairn.conf: lonestar group c of geometry 4x4:2+1 needs 16 disks; group.c.disks lists 17");
  CHECK(message("group.c.geometry = 4x4:3+1\n").find("4x4:3+1") != std::string::npos);  // the rule it breaks
  CHECK(message("group.c.write_mode = fast\n") ==
        "cairn.conf:20: group.c.write_mode = \"fast\": unknown write mode (known: serialized, direct, delayed)");
  CHECK(message("group.p.geometry = 4x4:2+1\ngroup.p.disks = 0-17\n") ==
        "cairn.conf: group p is of type pool: geometry, write_mode and delta_cache are for lonestar groups");
  CHECK(message("group.c.delta_cache = 4K\n") == "cairn.conf:20: group.c.delta_cache = 4K: out of range (64K to 64G)");
  CHECK(message("group.c.delta_cache = 16E\n").find("unknown size suffix") != std::string::npos);
  CHECK(message("group.c.delta_cache = 65G\n") == "cairn.conf:20: group.c.delta_cache = 65G: out of range (64K to 64G)");
}

TEST_CASE("Config: a bad disk group is refused, naming the problem") {
  std::string head = std::string("archive_id = ") + kId + "\ndisk.0 = a\ndisk.1 = b\ndisk.2 = c\n";
  auto message = [&](const std::string& lines) {
    auto r = ParseConfig(head + lines, "cairn.conf");
    return r.ok() ? std::string("accepted") : r.status().message();
  };
  CHECK(message("group.g.type = raid7\ngroup.g.disks = 0-2\n") ==
        "cairn.conf:5: group.g.type = \"raid7\": unknown group type (known: pool, lonestar)");
  CHECK(message("group.g.colour = red\n") ==
        "cairn.conf:5: \"group.g.colour\": unknown group setting \"colour\" (known: type, disks, geometry, write_mode, "
        "delta_cache)");
  CHECK(message("group.disks = 0\n") == "cairn.conf:5: \"group.disks\": expected group.NAME.FIELD (type, disks, geometry, write_mode)");
  CHECK(message("group.a b.disks = 0\n") ==
        "cairn.conf:5: \"group.a b.disks\": a group name is letters, digits, '-' and '_'");
  CHECK(message("group..disks = 0\n") == "cairn.conf:5: \"group..disks\": a group name is letters, digits, '-' and '_'");
  CHECK(message("group.g.disks = 0,x\n") == "cairn.conf:5: \"group.g.disks\" = \"x\" is not a whole number");
  CHECK(message("group.g.disks = 2-1\n") == "cairn.conf:5: group.g.disks = \"2-1\": range \"2-1\" runs backwards");
  CHECK(message("group.g.disks = 0,1,0-2\n") == "cairn.conf:5: group.g.disks = \"0,1,0-2\" lists disk 0 twice");
  CHECK(message("group.g.disks = 0-4294967295\n") ==
        "cairn.conf:5: group.g.disks = \"0-4294967295\": disk 4294967295 is past the last an archive can have (4095)");
  CHECK(message("group.g.disks =\n") == "cairn.conf:5: group.g.disks needs at least one disk (e.g. 0,1,4-7)");
  CHECK(message("group.g.type = pool\ngroup.h.disks = 0-2\n") ==
        "cairn.conf: group g has no disks (add group.g.disks = 0,1,...)");
  CHECK(message("group.g.disks = 0-3\n") == "cairn.conf: group g lists disk 3; the archive has disks 0..2");
  CHECK(message("group.g.disks = 0,1\ngroup.h.disks = 1,2\n") ==
        "cairn.conf: disk 1 is in groups g and h; a disk belongs to one group");
  CHECK(message("group.g.disks = 0,2\n") ==
        "cairn.conf: disk 1 is in no group; once groups are named, every disk belongs to one (group.NAME.disks)");
  CHECK(message("group.g.disks = 0-1\ngroup.h.disks = 2\n") == "accepted");
}

TEST_CASE("SaveConfig: a leftover cairn.conf.tmp with a second name elsewhere is replaced, not written through") {
  test::ArchiveFixture f;
  f.Close();
  std::string other = f.tmp / "someone-elses-file";
  std::ofstream(other) << "precious\n";
  REQUIRE(::link(other.c_str(), (f.dir + "/cairn.conf.tmp").c_str()) == 0);
  auto options = LoadConfig(f.dir + "/cairn.conf");
  REQUIRE(options.ok());
  REQUIRE(SaveConfig(f.dir, *options).ok());
  std::ifstream in(other);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "precious\n");
  CHECK(LoadConfig(f.dir + "/cairn.conf").ok());
}

TEST_CASE("Config: a keystore elsewhere is taken only from a cairn.conf of root's or of whoever runs cairn",
          "[config]") {
  test::TempDir tmp;
  std::string path = tmp / "cairn.conf";
  MkfsOptions mkfs;
  mkfs.options.keystore = "/srv/other-archive/keystore";
  mkfs.options.disks = {"disks/disk-000.img"};
  mkfs.options.archive_id = kId;
  {
    std::ofstream out(path);
    out << FormatConfig(mkfs.options);
  }
  INFO(LoadConfig(path).status().ToString());
  REQUIRE(LoadConfig(path).ok());  // ours
  if (::geteuid() != 0) return;    // chown needs root (CI runs as root)
  REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
  auto foreign = LoadConfig(path);
  CHECK(foreign.status().code() == Status::Code::kPermission);
  CHECK(foreign.status().message().find("owned by uid 65534") != std::string::npos);
  mkfs.options.keystore.clear();  // its own keystore: fine
  {
    std::ofstream out(path);
    out << FormatConfig(mkfs.options);
  }
  CHECK(LoadConfig(path).ok());
}
