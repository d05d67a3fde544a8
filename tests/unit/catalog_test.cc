#include <catch2/catch.hpp>

#include "catalog/catalog.h"
#include "test_util.h"

using namespace cairn;

TEST_CASE("Catalog: root, names, links, xattrs") {
  test::TempDir dir;
  auto created = Catalog::Create(dir / "c.db", 0, 0, 1000);
  REQUIRE(created.ok());
  Catalog& c = **created;

  auto root = c.GetInode(kRootInode);
  REQUIRE(root.ok());
  CHECK(root->mode == 040755);
  CHECK(root->nlink == 2);

  InodeRecord file;
  file.mode = 0100644;
  file.nlink = 1;
  file.mtime_ns = 123456789012345678;
  auto ino = c.InsertInode(file);
  REQUIRE(ino.ok());
  CHECK(*ino > kRootInode);
  REQUIRE(c.InsertEntry(kRootInode, "a", *ino).ok());
  CHECK(*c.Lookup(kRootInode, "a") == *ino);
  CHECK(c.Lookup(kRootInode, "b").status().IsNotFound());
  CHECK_FALSE(c.InsertEntry(kRootInode, "a", *ino).ok());  // names are unique per directory
  CHECK(c.GetInode(*ino)->mtime_ns == 123456789012345678);

  REQUIRE(c.InsertEntry(kRootInode, "hard", *ino).ok());
  auto entries = *c.ListEntries(kRootInode, 0, 10);
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].name == "a");
  CHECK(c.ListEntries(kRootInode, entries[0].cookie, 10)->size() == 1);
  REQUIRE(c.MoveEntry(kRootInode, "hard", kRootInode, "renamed").ok());
  CHECK(c.Lookup(kRootInode, "renamed").ok());
  CHECK(c.ListEntries(kRootInode, 0, 10)->at(1).cookie == entries[1].cookie);  // readdir position survives rename

  std::string binary_name("x\xff\x01y", 4);
  REQUIRE(c.InsertEntry(kRootInode, binary_name, *ino).ok());
  CHECK(*c.Lookup(kRootInode, binary_name) == *ino);

  std::vector<uint8_t> value = {0, 1, 2, 0, 255};
  REQUIRE(c.SetXattr(*ino, "user.k", value).ok());
  CHECK(*c.GetXattr(*ino, "user.k") == value);
  CHECK(*c.ListXattrs(*ino) == std::vector<std::string>{"user.k"});
  REQUIRE(c.RemoveXattr(*ino, "user.k").ok());
  CHECK(c.RemoveXattr(*ino, "user.k").IsNotFound());
  CHECK(c.GetXattr(*ino, "user.k").status().IsNotFound());
}

TEST_CASE("Catalog: transactions roll back as a unit") {
  test::TempDir dir;
  auto c = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
  REQUIRE(c->Begin().ok());
  REQUIRE(c->InsertEntry(kRootInode, "x", 99).ok());
  REQUIRE(c->Begin().ok());  // nested
  REQUIRE(c->Commit().ok());
  c->Rollback();
  CHECK(c->Lookup(kRootInode, "x").status().IsNotFound());
}

TEST_CASE("Catalog: segments, extents and totals survive reopen") {
  test::TempDir dir;
  const uint64_t kAlloc = ExtentAllocation(2560, 8);  // a 2500-byte RS slice, padded to 64, with IDR
  {
    auto c = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
    ExtentRecord e{7, 5000, 0xabc, 1, 1, Redundancy{Redundancy::Scheme::kReedSolomon, 2, 1, 8}, {}};
    e.chunks = {{1, 4096, kAlloc, 0x11}, {0, 4096, kAlloc, 0x22}, {3, 65536, kAlloc, 0x33}};
    e.logical_length = 4000;  // what the chain decodes the 5000 stored bytes to
    e.chain_stamp = "squash@2";
    REQUIRE(c->InsertExtent(e).ok());
    REQUIRE(c->PutSegment({5, 0, 7, 0, 5000, true}).ok());
    REQUIRE(c->SetSegmentCached(5, 0, false).ok());
  }
  auto c = std::move(*Catalog::Open(dir / "c.db"));
  auto segment = *c->GetSegment(5, 0);
  REQUIRE(segment);
  CHECK(segment->extent_id == 7);
  CHECK_FALSE(segment->cached);
  auto extent = c->GetExtent(7);
  REQUIRE(extent.ok());
  CHECK(extent->chunks.size() == 3);
  CHECK(extent->chunks[0] == ChunkPlacement{1, 4096, kAlloc, 0x11});
  CHECK(extent->chunks[2] == ChunkPlacement{3, 65536, kAlloc, 0x33});
  CHECK(extent->logical_length == 4000);
  CHECK(extent->chain_stamp == "squash@2");
  CHECK(extent->redundancy == Redundancy{Redundancy::Scheme::kReedSolomon, 2, 1, 8});
  CHECK(extent->payload_crc == 0xabcu);
  REQUIRE(c->SetExtentChunk(7, 1, {2, 12288, kAlloc, 0x22}).ok());
  CHECK(c->GetExtent(7)->chunks[1].disk == 2);
  CHECK(*c->MaxExtentIdEverUsed() == 7);
  CHECK(c->ExtentsAfter(0, 10)->size() == 1);
  CHECK(c->ExtentsAfter(6, 1)->at(0).id == 7);
  CHECK(c->ExtentsAfter(7, 10)->empty());
  REQUIRE(c->DeleteExtent(7).ok());
  CHECK(*c->MaxExtentIdEverUsed() == 7);  // ids are never handed out twice
  auto totals = *c->ComputeTotals();
  CHECK(totals.inodes == 1);
  CHECK(totals.persisted_bytes == 5000);
}

TEST_CASE("Catalog: an extent row whose columns do not fit its fields is Corruption, not a record") {
  test::TempDir dir;
  auto c = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
  ExtentRecord e{7, 5000, 0xabc, 1, 1, Redundancy{}, {{0, 8192, ExtentAllocation(5000), 0x11}}};
  e.logical_length = 5000;
  REQUIRE(c->InsertExtent(e).ok());
  REQUIRE(c->Flush().ok());
  REQUIRE(c->GetExtent(7).ok());
  auto [damage, why] = GENERATE(table<const char*, const char*>({
      {"UPDATE extents SET chunks = chunks || x'00'", "whole 60-byte records"},
      {"UPDATE extents SET kind = 4294967297", "kind 4294967297 is out of range"},
      {"UPDATE extents SET redundancy = redundancy | (1 << 40)", "has bits no field uses"},
      {"UPDATE extents SET payload_crc = 8589934592", "wider than 32 bits"},
  }));
  REQUIRE(sqlite3_exec(c->handle(), damage, nullptr, nullptr, nullptr) == SQLITE_OK);
  auto read = c->GetExtent(7);
  CHECK(read.status().IsCorruption());
  CHECK_THAT(read.status().message(), Catch::Contains(why));
}

TEST_CASE("Catalog: refuses an unknown schema version and a non-catalog file") {
  test::TempDir dir;
  {
    auto c = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
    REQUIRE(c->SetMeta("schema_version", "99").ok());
  }
  auto r = Catalog::Open(dir / "c.db");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("schema version 99") != std::string::npos);
  FILE* f = fopen((dir / "junk.db").c_str(), "w");
  fputs("this is not sqlite", f);
  fclose(f);
  CHECK_FALSE(Catalog::Open(dir / "junk.db").ok());
}
