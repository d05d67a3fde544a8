#include <catch2/catch.hpp>

#include <cstring>

#include "backend/extent_format.h"
#include "backend/member_table.h"
#include "pipeline/logical_payload.h"
#include "util/coding.h"

using namespace cairn;

namespace {

bool Mentions(const Status& st, const char* text) { return st.message().find(text) != std::string::npos; }

MemberTable SampleTable() {
  MemberNode file;
  file.ino = 0x11;
  file.mode = 0100644;
  file.uid = 1000;
  file.gid = 100;
  file.size = 5;
  file.rdev = 0;
  file.atime_ns = 1;
  file.mtime_ns = 2;
  file.ctime_ns = -3;
  file.generation = 6;
  file.segment_size = 4096;
  file.paths = {"d/a", "b"};
  file.xattrs = {{"user.k", "v"}};
  file.segments = {{0, 7, 5}};
  file.holes = {{1, 3}, {9, 1}};
  MemberNode link;
  link.ino = 0x12;
  link.mode = 0120777;
  link.size = 1;
  link.symlink = "a";
  link.paths = {"d/l"};
  link.entries_truncated = true;  // meaningful for directories; encoded for every node
  return MemberTable{{file, link}};
}

}  // namespace

TEST_CASE("MemberTable: known vector, field by field") {
  std::vector<uint8_t> bytes = EncodeMemberTable(SampleTable());
  // magic 8 | count 4 | file: 88 fixed + 2 symlink length + 1 flags + (2+3) + (2+1) paths
  // + (2+6+4+1) xattr + 24 segment + 2 * 16 hole runs | link: 88 + 2+1 + 1 + 2+3 | crc 4
  REQUIRE(bytes.size() == 8 + 4 + (88 + 2 + 1 + 5 + 3 + 13 + 24 + 32) + (88 + 3 + 1 + 5) + 4);
  CHECK(std::memcmp(bytes.data(), "CAIRNMBR", 8) == 0);
  CHECK(GetFixed32(&bytes[8]) == 2);
  const uint8_t* f = &bytes[12];
  CHECK(GetFixed64(f) == 0x11);
  CHECK(GetFixed32(f + 8) == 0100644);
  CHECK(GetFixed32(f + 12) == 1000);
  CHECK(GetFixed32(f + 16) == 100);
  CHECK(GetFixed64(f + 20) == 5);                  // size
  CHECK(GetFixed64(f + 28) == 0);                  // rdev
  CHECK(GetFixed64(f + 36) == 1);                  // atime
  CHECK(GetFixed64(f + 44) == 2);                  // mtime
  CHECK(GetFixed64(f + 52) == uint64_t(-3));       // ctime, two's complement
  CHECK(GetFixed64(f + 60) == 6);                  // generation
  CHECK(GetFixed64(f + 68) == 4096);               // segment size
  CHECK(GetFixed16(f + 76) == 2);                  // paths
  CHECK(GetFixed16(f + 78) == 1);                  // xattrs
  CHECK(GetFixed32(f + 80) == 1);                  // segments
  CHECK(GetFixed32(f + 84) == 2);                  // hole runs
  CHECK(GetFixed16(f + 88) == 0);                  // no symlink target
  CHECK(f[90] == 0);                               // flags
  CHECK(GetFixed16(f + 91) == 3);
  CHECK(std::memcmp(f + 93, "d/a", 3) == 0);
  CHECK(GetFixed16(f + 96) == 1);
  CHECK(f[98] == 'b');
  CHECK(GetFixed16(f + 99) == 6);
  CHECK(std::memcmp(f + 101, "user.k", 6) == 0);
  CHECK(GetFixed32(f + 107) == 1);
  CHECK(f[111] == 'v');
  CHECK(GetFixed64(f + 112) == 0);  // segment index
  CHECK(GetFixed64(f + 120) == 7);  // offset in the payload
  CHECK(GetFixed64(f + 128) == 5);  // length
  CHECK(GetFixed64(f + 136) == 1);  // hole run: first index
  CHECK(GetFixed64(f + 144) == 3);  // and count
  CHECK(GetFixed64(f + 152) == 9);
  CHECK(GetFixed64(f + 160) == 1);
  const uint8_t* l = f + 168;
  CHECK(GetFixed64(l) == 0x12);
  CHECK(GetFixed16(l + 88) == 1);
  CHECK(l[90] == 'a');
  CHECK(l[91] == 1);                // flags: entries truncated
  CHECK(UnmaskCrc(GetFixed32(&bytes[bytes.size() - 4])) ==
        Crc32c(std::span<const uint8_t>(bytes).first(bytes.size() - 4)));

  auto back = DecodeMemberTable(bytes, kFormatVersion, "extent 9");
  REQUIRE(back.ok());
  CHECK(*back == SampleTable());
}

TEST_CASE("MemberTable: every anomaly is a clear error") {
  std::vector<uint8_t> good = EncodeMemberTable(SampleTable());
  SECTION("empty table round trips") {
    auto empty = DecodeMemberTable(EncodeMemberTable({}), kFormatVersion, "x");
    REQUIRE(empty.ok());
    CHECK(empty->nodes.empty());
  }
  SECTION("bad magic") {
    good[3] ^= 1;
    CHECK(Mentions(DecodeMemberTable(good, kFormatVersion, "extent 9").status(), "extent 9: no member table"));
  }
  SECTION("truncated") {
    CHECK(Mentions(DecodeMemberTable(std::span(good).first(10), kFormatVersion, "x").status(), "no member table"));
    CHECK(Mentions(DecodeMemberTable(std::span(good).first(good.size() - 1), kFormatVersion, "x").status(), "checksum mismatch"));
  }
  SECTION("flipped bit") {
    for (size_t byte = 8; byte < good.size(); byte += 5) {
      auto copy = good;
      copy[byte] ^= 0x04;
      CHECK_FALSE(DecodeMemberTable(copy, kFormatVersion, "x").ok());
    }
  }
  SECTION("lengths that do not add up (with a valid checksum)") {
    PutFixed32(&good[8], 3);  // one node more than there is
    PutFixed32(&good[good.size() - 4], MaskCrc(Crc32c(std::span<const uint8_t>(good).first(good.size() - 4))));
    CHECK(Mentions(DecodeMemberTable(good, kFormatVersion, "x").status(), "lengths do not add up"));
  }
}

TEST_CASE("MemberTable: names too long for their length field are left out, and the table decodes") {
  MemberTable table = SampleTable();
  std::string deep;
  while (deep.size() <= UINT16_MAX) deep += std::string(255, 'n') + "/";  // some 257 directories deep
  table.nodes[0].paths = {deep + "f", "short/f", deep};
  auto decoded = DecodeMemberTable(EncodeMemberTable(table), kFormatVersion, "extent 9");
  INFO(decoded.status().ToString());
  REQUIRE(decoded.ok());
  CHECK(decoded->nodes[0].paths == std::vector<std::string>{"short/f"});
  CHECK(decoded->nodes[1].paths == std::vector<std::string>{"d/l"});  // the next node reads as written
  CHECK(decoded->nodes[0].xattrs == table.nodes[0].xattrs);
}

TEST_CASE("RecordedSegments: a segments row must be one its extent's member table records") {
  MemberTable table = SampleTable();  // inode 0x11: segment 0 at bytes 7..12
  MemberNode other = table.nodes[0];
  other.ino = 0x13;
  other.segments = {{2, 0, 7}, {0, 12, 4}};  // listed out of order: the check must not care
  table.nodes.push_back(other);
  std::vector<uint8_t> logical(16, 0xab);  // the data, then the table
  std::vector<uint8_t> encoded = EncodeMemberTable(table);
  logical.insert(logical.end(), encoded.begin(), encoded.end());
  ExtentHeader header;
  header.extent_id = 42;
  header.members_length = static_cast<uint32_t>(encoded.size());
  auto recorded = RecordedSegments::Of(header, logical);
  REQUIRE(recorded.ok());
  auto row = [](uint64_t ino, uint64_t index, uint64_t offset, uint64_t length) {
    return SegmentRecord{.ino = ino, .index = index, .extent_id = 42, .extent_offset = offset, .length = length};
  };
  CHECK(recorded->Check(row(0x11, 0, 7, 5)).ok());
  CHECK(recorded->Check(row(0x11, 0, 7, 3)).ok());  // cut short by a truncate
  CHECK(recorded->Check(row(0x13, 2, 0, 7)).ok());
  CHECK(recorded->Check(row(0x13, 0, 12, 4)).ok());
  Status wrong_file = recorded->Check(row(0x12, 0, 7, 5));
  CHECK(wrong_file.IsCorruption());
  CHECK(wrong_file.message() ==
        "catalog: segment 0 of inode 18 points to bytes 7+5 of extent 42, whose member table does not record them "
        "as that segment's (another file's data)");
  Status other_segment = recorded->Check(row(0x11, 1, 7, 5));  // another segment of the file
  CHECK(other_segment.IsCorruption());
  CHECK(Mentions(other_segment, "(another segment's data)"));
  CHECK(recorded->Check(row(0x11, 0, 8, 4)).IsCorruption());  // elsewhere in the extent
  CHECK(recorded->Check(row(0x11, 0, 7, 6)).IsCorruption());  // longer than recorded
  SegmentRecord hole = row(0x12, 5, 0, 0);
  hole.extent_id = kHoleExtent;
  CHECK(recorded->Check(hole).ok());  // reads as zeros whatever it points at

  SECTION("an extent without a table (format v2) checks nothing") {
    header.members_length = 0;
    auto none = RecordedSegments::Of(header, logical);
    REQUIRE(none.ok());
    CHECK(none->Check(row(0x12, 0, 7, 5)).ok());
  }
  SECTION("a table that does not decode checks nothing; one longer than the payload is corruption") {
    logical.back() ^= 1;  // (the payload's CRC would catch this: such tables come from older cairns)
    auto undecodable = RecordedSegments::Of(header, logical);
    REQUIRE(undecodable.ok());
    CHECK(undecodable->Check(row(0x12, 0, 7, 5)).ok());
    header.members_length = static_cast<uint32_t>(logical.size() + 1);
    auto too_long = RecordedSegments::Of(header, logical);
    CHECK(too_long.status().IsCorruption());
    CHECK(Mentions(too_long.status(), "extent 42"));
  }
}
