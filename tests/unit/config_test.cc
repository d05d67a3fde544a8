#include <catch2/catch.hpp>

#include "archive/config.h"

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
}

TEST_CASE("Config: errors name the file, the line and the problem") {
  auto check = [](const std::string& text, const char* expected) {
    auto r = ParseConfig(text, "cairn.conf");
    REQUIRE_FALSE(r.ok());
    INFO(r.status().message());
    CHECK(r.status().message().find(expected) != std::string::npos);
  };
  std::string head = std::string("archive_id = ") + kId + "\ndisk.0 = d\n";
  check(head + "colour = blue\n", "cairn.conf:3: unknown option 'colour'");
  check(head + "segment_size = lots\n", "cairn.conf:3: segment_size");
  check(head + "segment_size = 1K\n", "below the minimum");
  check(head + "log_max_size = 1K\n", "cairn.conf:3: log_max_size = 1K is below the minimum");
  check(head + "just words\n", "cairn.conf:3: expected 'key = value'");
  check(head + "disk.5 = x\n", "expected disk.1 next");
  check("disk.0 = d\n", "archive_id missing");
  check(std::string("archive_id = ") + kId + "\n", "no disk.0");
}
