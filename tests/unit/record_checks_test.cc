#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "backend/extent_format.h"
#include "catalog/catalog.h"
#include "catalog/record_checks.h"
#include "redundancy/striping.h"
#include "test_util.h"
#include "util/coding.h"

using namespace cairn;

namespace {

bool Mentions(const Status& st, const std::string& text) {
  return st.message().find(text) != std::string::npos;
}

// A regular file persisted in 4 MiB segments.
InodeRecord PersistedFile(uint64_t size) {
  InodeRecord inode;
  inode.ino = 9;
  inode.mode = 0100644;
  inode.size = size;
  inode.segment_size = 4 << 20;
  inode.layout_id = 1;
  return inode;
}

ExtentRecord ValidExtent(const Redundancy& r, uint64_t payload_length) {
  ExtentRecord e;
  e.id = 7;
  e.payload_length = payload_length;
  e.logical_length = payload_length;
  e.redundancy = r;
  uint64_t alloc = ExtentAllocation(r.ChunkLength(payload_length), r.idr_scramble);
  for (size_t i = 0; i < r.chunk_count(); i++) e.chunks.push_back({static_cast<uint32_t>(i), 4096 + i * alloc, alloc, 0});
  return e;
}

}  // namespace

TEST_CASE("RecordChecks: every redundancy ParseRedundancy accepts is in range, its neighbours are not") {
  for (int n = 2; n <= 8; n++) CHECK(CheckRedundancy(*ParseRedundancy(fmt::format("mirror-{}", n), "none")).ok());
  for (int k = 1; k <= 128; k++) {
    for (int m = 1; m <= 32; m++) CHECK(CheckRedundancy(*ParseRedundancy(fmt::format("rs-{}-{}", k, m), "none")).ok());
  }
  for (int s = 1; s <= 64; s++) CHECK(CheckRedundancy(*ParseRedundancy("none", fmt::format("spc-16-1-s{}", s))).ok());
  CHECK(CheckRedundancy(*ParseRedundancy("none", "none", "blake3")).ok());

  using S = Redundancy::Scheme;
  auto why = [](Redundancy r) { return CheckRedundancy(r).message(); };
  CHECK(why({S::kReedSolomon, 0, 1}) == "redundancy scheme 2: data_chunks 0 is out of range (1..128 for rs)");
  CHECK(why({S::kReedSolomon, 129, 1}).find("data_chunks 129") != std::string::npos);
  CHECK(why({S::kReedSolomon, 4, 0}).find("parity_chunks 0") != std::string::npos);
  CHECK(why({S::kReedSolomon, 4, 33}).find("parity_chunks 33") != std::string::npos);
  CHECK(why({S::kMirror, 1, 0}).find("parity_chunks 0") != std::string::npos);
  CHECK(why({S::kMirror, 1, 8}).find("parity_chunks 8") != std::string::npos);
  CHECK(why({S::kMirror, 0, 1}).find("data_chunks 0") != std::string::npos);
  CHECK(why({S::kNone, 0, 0}).find("data_chunks 0") != std::string::npos);  // chunk_count() would be 0
  CHECK(why({S::kNone, 1, 3}).find("parity_chunks 3") != std::string::npos);
  CHECK(why({S::kTwoDimensional, 1, 1}).find("parity_chunks 1") != std::string::npos);
  CHECK(why({static_cast<S>(4), 1, 0}) == "unknown redundancy scheme 4 (0 none, 1 mirror, 2 rs, 3 2d)");
  CHECK(why({S::kNone, 1, 0, 65}).find("idr_scramble 65") != std::string::npos);
  CHECK(why({S::kNone, 1, 0, 0, static_cast<ChecksumType>(4)}).find("checksum 4") != std::string::npos);
  for (const Redundancy& bad : {Redundancy{S::kReedSolomon, 0, 1}, Redundancy{S::kNone, 0, 0}}) {
    REQUIRE_FALSE(CheckRedundancy(bad).ok());
    CHECK(CheckRedundancy(bad).IsCorruption());
  }
}

TEST_CASE("RecordChecks: inode rows") {
  CHECK(CheckInodeRecord(PersistedFile(kMaxFileSize)).ok());
  CHECK(CheckInodeRecord(PersistedFile(INT64_MAX)).message() ==
        "catalog: inodes row 9: size 9223372036854775807 is above the largest file cairn stores (17592186044416 "
        "bytes)");
  InodeRecord inode = PersistedFile(100);
  for (uint64_t bad : {uint64_t{1}, uint64_t{4095}, uint64_t{(1ull << 30) + 1}, uint64_t{UINT64_MAX}}) {
    inode.segment_size = bad;
    INFO(bad);
    CHECK(Mentions(CheckInodeRecord(inode), fmt::format("inodes row 9: segment_size {} is out of range", bad)));
  }
  inode.segment_size = 0;  // never persisted
  CHECK(CheckInodeRecord(inode).ok());
}

TEST_CASE("RecordChecks: segment rows against their inode") {
  InodeRecord file = PersistedFile(5000000);  // segments 0 (4 MiB) and 1 (805696 bytes)
  CHECK(CheckSegmentRecord({9, 0, 3, 0, 4 << 20}, file).ok());
  CHECK(CheckSegmentRecord({9, 1, 4, 0, 805696}, file).ok());
  CHECK(CheckSegmentRecord({9, 1, 4, 0, 1000}, file).ok());  // shorter: a grown file reads zeros past it
  CHECK(CheckSegmentRecord({9, 1, kHoleExtent, 0, 805696}, file).ok());
  CHECK(Mentions(CheckSegmentRecord({9, 2, 4, 0, 1}, file), "segments row (9, 2): inode 9: segment 2 lies past"));
  CHECK(Mentions(CheckSegmentRecord({9, UINT64_MAX, 4, 0, 1}, file), "lies past the end of the file"));
  CHECK(Mentions(CheckSegmentRecord({9, 1, 4, 0, 805697}, file), "is 805697 bytes, more than the file leaves"));
  InodeRecord truncated = file;  // truncated into segment 1 and not persisted since: its old row stays
  truncated.dirty = true;
  CHECK(CheckSegmentRecord({9, 1, 4, 0, 4 << 20}, truncated).ok());
  CHECK(Mentions(CheckSegmentRecord({9, 1, 4, 0, (4 << 20) + 1}, truncated), "more than the file leaves"));
  CHECK(Mentions(CheckSegmentRecord({9, 0, 4, UINT64_MAX - 10, 100}, file), "extent_offset"));

  // segment_size changed to 4096 in the catalog: segment 0 no longer fits
  InodeRecord changed = file;
  changed.segment_size = 4096;
  CHECK(Mentions(CheckSegmentRecord({9, 0, 3, 0, 4 << 20}, changed),
                 "segment 0 is 4194304 bytes, more than the file leaves for it (4096 of segment_size 4096)"));
  InodeRecord dir = file;
  dir.mode = 040755;
  CHECK(Mentions(CheckSegmentRecord({9, 0, 3, 0, 10}, dir), "not a persisted regular file"));

}

TEST_CASE("RecordChecks: a file's segment rows as a whole, from one summary query") {
  test::TempDir dir;
  auto c = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
  auto summary = [&] { return *c->SummarizeSegments(9); };
  InodeRecord file = PersistedFile(5000000);
  CHECK(CheckSegmentSummary(file, summary(), true).ok());  // no rows: nothing persisted to check
  REQUIRE(c->PutSegment({9, 0, 3, 0, 4 << 20}).ok());
  REQUIRE(c->PutSegment({8, 5, 3, 0, 1}).ok());  // another file's rows do not count
  CHECK(Mentions(CheckSegmentSummary(file, summary(), true), "inodes row 9: a clean file of 5000000 bytes has 1 of 2"));
  CHECK(CheckSegmentSummary(file, summary(), false).ok());  // still being written
  REQUIRE(c->PutSegment({9, 1, 4, 0, 805696}).ok());
  SegmentSummary both = summary();
  CHECK(both.count == 2);
  CHECK(both.last_index == 1);
  CHECK(both.last_length == 805696);
  CHECK(both.max_length == 4u << 20);
  CHECK(CheckSegmentSummary(file, both, true).ok());

  InodeRecord changed = file;
  changed.segment_size = 4096;  // lowered: segment 0 no longer fits, and most rows are missing
  CHECK(Mentions(CheckSegmentSummary(changed, both, false), "a segment of 4194304 bytes is longer than segment_size 4096"));
  changed.segment_size = 1 << 30;  // raised: segment 1 lies past the end
  CHECK(Mentions(CheckSegmentSummary(changed, both, false), "segments row (9, 1): inode 9: segment 1 lies past the end"));
  CHECK(Mentions(CheckSegmentSummary(PersistedFile(INT64_MAX), both, false), "size 9223372036854775807"));
  CHECK(Mentions(CheckSegmentSummary(PersistedFile(4200000), both, false),
                 "segment 1 is 805696 bytes, more than the file leaves for it (5696)"));
  InodeRecord truncated = PersistedFile(4200000);
  truncated.dirty = true;  // until persisted again, segment 1 keeps its old length
  CHECK(CheckSegmentSummary(truncated, both, false).ok());
  InodeRecord dir_inode = file;
  dir_inode.mode = 040755;
  CHECK(Mentions(CheckSegmentSummary(dir_inode, both, false), "not a persisted regular file"));

  auto exec = [&](const char* sql) { REQUIRE(sqlite3_exec(c->handle(), sql, nullptr, nullptr, nullptr) == SQLITE_OK); };
  exec("UPDATE segments SET extent_offset = 9223372036854775807 WHERE ino = 9 AND idx = 0");
  CHECK(Mentions(CheckSegmentSummary(file, summary(), true), "extent_offset 9223372036854775807 is beyond"));
  exec("UPDATE segments SET extent_offset = 0, length = -1 WHERE ino = 9 AND idx = 0");
  CHECK(Mentions(CheckSegmentSummary(file, summary(), true), "1 rows with a negative idx, length or extent_offset"));
}

TEST_CASE("RecordChecks: extent rows") {
  auto rs = *ParseRedundancy("rs-4-2", "spc-16-1-s8", "sha256");
  CHECK(CheckExtentRecord(ValidExtent(rs, 5000000)).ok());
  CHECK(CheckExtentRecord(ValidExtent(Redundancy{}, 0)).ok());
  auto damaged = [&](auto change) {
    ExtentRecord e = ValidExtent(rs, 5000000);
    change(e);
    return CheckExtentRecord(e).message();
  };
  CHECK(damaged([](ExtentRecord& e) { e.redundancy.data_chunks = 0; }) ==
        "catalog: extents row 7: redundancy scheme 2: data_chunks 0 is out of range (1..128 for rs)");
  CHECK(damaged([](ExtentRecord& e) { e.kind = 0; }) == "catalog: extents row 7: kind 0 is unknown (1 segment, 2 pack)");
  CHECK(damaged([](ExtentRecord& e) { e.payload_length = UINT64_MAX; })
            .find("payload_length 18446744073709551615 is above the maximum") != std::string::npos);
  CHECK(damaged([](ExtentRecord& e) { e.chunks.pop_back(); }).find("5 chunks recorded, its redundancy needs 6") !=
        std::string::npos);
  CHECK(damaged([](ExtentRecord& e) { e.chunks[2].offset = 0; }).find("chunk 2 at offset 0") != std::string::npos);
  CHECK(damaged([](ExtentRecord& e) { e.chunks[1].offset += 1; }).find("not block aligned") != std::string::npos);
  CHECK(damaged([](ExtentRecord& e) { e.chunks[3].alloc_length *= 2; }).find("chunk 3 allocated") !=
        std::string::npos);
  // The logical length: what reads size their buffers and segment checks by.
  CHECK(damaged([](ExtentRecord& e) { e.logical_length = kMaxExtentPayload + 1; })
            .find(fmt::format("logical_length {} is above the maximum", kMaxExtentPayload + 1)) != std::string::npos);
  CHECK(damaged([](ExtentRecord& e) { e.logical_length = 4999999; }) ==
        "catalog: extents row 7: a stored payload of 5000000 bytes cannot hold a logical one of 4999999 bytes "
        "without a transform chain");
  CHECK(damaged([](ExtentRecord& e) {
          e.chain_stamp = "squash@1";
          e.logical_length = 100;  // no transform may grow 100 bytes to 5000000
        }).find("through the chain 'squash@1'") != std::string::npos);
  CHECK(damaged([](ExtentRecord& e) {
          e.chain_stamp = "squash@1";
          e.logical_length = 9000000;  // shrunk by compression, say
        }).empty());
  CHECK(damaged([](ExtentRecord& e) { e.chain_stamp = std::string(kMaxChainStamp + 1, 'a'); })
            .find("chain of 257 bytes") != std::string::npos);
}

TEST_CASE("RecordChecks: Catalog refuses a damaged extent or layout row with Corruption") {
  test::TempDir dir;
  auto c = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
  REQUIRE(c->InsertExtent(ValidExtent(*ParseRedundancy("rs-2-1", "none"), 100000)).ok());
  REQUIRE(c->GetExtent(7).ok());
  auto exec = [&](const char* sql) { REQUIRE(sqlite3_exec(c->handle(), sql, nullptr, nullptr, nullptr) == SQLITE_OK); };
  exec("UPDATE extents SET redundancy = 2 WHERE id = 7");  // rs with every count zero
  auto extent = c->GetExtent(7);
  REQUIRE_FALSE(extent.ok());
  CHECK(extent.status().IsCorruption());
  CHECK(extent.status().message() ==
        "catalog: extents row 7: redundancy scheme 2: data_chunks 0 is out of range (1..128 for rs)");
  CHECK(c->AllExtents()->size() == 1);  // the scans hand the row to fsck, which reports it

  auto id = c->InternLayout("raid=none idr=none segment_size=4194304");
  REQUIRE(id.ok());
  CHECK(c->LayoutStamp(*id).ok());
  exec("UPDATE layouts SET stamp = 'raid=none' || char(27) || '[2J'");
  CHECK(c->LayoutStamp(*id).status().message() ==
        fmt::format("catalog: layouts row {}: stamp has byte 0x1b at 9 (printable ASCII only)", *id));
  exec("UPDATE layouts SET stamp = ''");
  CHECK(Mentions(c->LayoutStamp(*id).status(), "stamp of 0 bytes"));
}

TEST_CASE("ExtentHeader: fields out of range are Corruption even with a good checksum") {
  ExtentHeader h;
  h.extent_id = 1;
  h.payload_length = 1000;
  h.redundancy = *ParseRedundancy("rs-2-1", "none");
  REQUIRE(DecodeExtentHeader(EncodeExtentHeader(h), "x").ok());
  auto decode = [](ExtentHeader changed) { return DecodeExtentHeader(EncodeExtentHeader(changed), "disk-002.img offset 8192"); };
  ExtentHeader bad = h;
  bad.redundancy.data_chunks = 0;  // ChunkLength would divide by it
  auto r = decode(bad);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().IsCorruption());
  CHECK(r.status().message() ==
        "disk-002.img offset 8192: extent header: redundancy scheme 2: data_chunks 0 is out of range (1..128 for rs)");
  bad = h;
  bad.chunk_index = 3;
  CHECK(Mentions(decode(bad).status(), "chunk_index 3 but the redundancy has 3 chunks"));
  bad = h;
  bad.payload_length = kMaxStoredPayload + 1;
  CHECK(Mentions(decode(bad).status(), fmt::format("payload_length {} is above the maximum", kMaxStoredPayload + 1)));
  bad = h;
  bad.logical_length = kMaxExtentPayload + 1;  // v4: what a reader would decode into
  bad.extent_payload_length = 1000;
  bad.chain_stamp = "z@1";
  CHECK(Mentions(decode(bad).status(), fmt::format("logical_length {} is above the maximum", kMaxExtentPayload + 1)));
  bad = h;
  bad.extent_payload_length = UINT64_MAX;  // v3: what cairn recover would size the whole payload by
  CHECK(Mentions(decode(bad).status(), "extent_payload_length 18446744073709551615 is above the maximum"));
  bad = h;
  bad.redundancy.idr_scramble = 200;
  CHECK(Mentions(decode(bad).status(), "idr_scramble 200"));
  bad = h;
  bad.redundancy = Redundancy{Redundancy::Scheme::kMirror, 1, 9};
  CHECK(Mentions(decode(bad).status(), "parity_chunks 9 is out of range (1..7 for mirror)"));
}

TEST_CASE("Superblock: a data_start outside the disk or off a block boundary is Corruption") {
  Superblock sb;
  sb.disk_size = 1ull << 30;
  for (uint64_t bad : {uint64_t{0}, uint64_t{100}, uint64_t{4097}, uint64_t{(1ull << 30) + 4096}, uint64_t{UINT64_MAX}}) {
    sb.data_start = bad;
    auto decoded = DecodeSuperblock(EncodeSuperblock(sb), "disk-001.img");
    INFO(bad);
    REQUIRE_FALSE(decoded.ok());
    CHECK(decoded.status().IsCorruption());
    CHECK(Mentions(decoded.status(), fmt::format("disk-001.img: superblock data_start {} is not a block", bad)));
  }
  sb.data_start = 8192;
  CHECK(DecodeSuperblock(EncodeSuperblock(sb), "disk-001.img").ok());
}
