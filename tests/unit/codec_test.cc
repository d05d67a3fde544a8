// The segment codec stage: the transform chain and its registry, and, with a transform
// registered only in this test binary, an archive carrying logical and stored lengths apart
// from user.cairn.plugins through persist, read, fsck and recover.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <cstring>

#include <fmt/format.h>

#include "archive_fixture.h"
#include "codec/transform_chain.h"
#include "codec/transform_registry.h"
#include "maintenance/fsck.h"
#include "policy/vocabulary.h"
#include "maintenance/recover.h"
#include "test_util.h"
#include "util/coding.h"

using namespace cairn;

namespace {

// Test only: XORs every byte with 0x5a and pads to whole 4 KiB blocks behind a u32 length,
// so the stored bytes differ from the logical ones in content and in length.
class XorPad : public Transform {
 public:
  static constexpr const char* kName = "test-xor-pad";
  std::string_view name() const override { return kName; }
  uint32_t version() const override { return 1; }
  Result<std::vector<uint8_t>> Encode(std::span<const uint8_t> input, const SealContext&) const override {
    std::vector<uint8_t> out((4 + input.size() + 4095) / 4096 * 4096, 0);
    PutFixed32(out.data(), static_cast<uint32_t>(input.size()));
    for (size_t i = 0; i < input.size(); i++) out[4 + i] = input[i] ^ 0x5a;
    return out;
  }
  Result<std::vector<uint8_t>> Decode(std::span<const uint8_t> encoded, uint64_t, const SealContext&) const override {
    uint32_t length = encoded.size() >= 4 ? GetFixed32(encoded.data()) : UINT32_MAX;
    if (encoded.size() < 4 || encoded.size() - 4 < length) return Status::Corruption("length prefix too long");
    std::vector<uint8_t> out(length);
    for (size_t i = 0; i < length; i++) out[i] = encoded[4 + i] ^ 0x5a;
    return out;
  }
};

// Test only: breaks the bound every transform keeps.
class Balloon : public Transform {
 public:
  std::string_view name() const override { return "test-balloon"; }
  uint32_t version() const override { return 1; }
  Result<std::vector<uint8_t>> Encode(std::span<const uint8_t> input, const SealContext&) const override {
    return std::vector<uint8_t>(MaxStoredLength(input.size()) + 1);
  }
  Result<std::vector<uint8_t>> Decode(std::span<const uint8_t>, uint64_t, const SealContext&) const override {
    return Status::Corruption("never made anything");
  }
};

void RegisterTestTransforms() {
  static const bool registered = [] {
    REQUIRE(RegisterTransform(XorPad::kName, 1, [](uint32_t, std::string_view) -> Result<std::shared_ptr<const Transform>> {
              return std::shared_ptr<const Transform>(std::make_shared<XorPad>());
            }).ok());
    REQUIRE(RegisterTransform("test-balloon", 1, [](uint32_t, std::string_view) -> Result<std::shared_ptr<const Transform>> {
              return std::shared_ptr<const Transform>(std::make_shared<Balloon>());
            }).ok());
    // A compress-stage transform, as a compression plugin registers itself.
    REQUIRE(RegisterTransform("test-squeeze", 1, [](uint32_t, std::string_view) -> Result<std::shared_ptr<const Transform>> {
              return std::shared_ptr<const Transform>(std::make_shared<XorPad>());
            }, TransformStage::kCompress).ok());
    return true;
  }();
  (void)registered;
}

std::vector<uint8_t> Bytes(std::string_view text) { return {text.begin(), text.end()}; }

using test::kSegment;

// The fixture's archive, read by path.
struct CodedArchive : test::ArchiveFixture {
  std::vector<uint8_t> Read(const std::string& path, size_t size) {
    auto ino = fs->LookupPath(path);
    REQUIRE(ino.ok());
    return ReadFile(*ino, size);
  }
};

}  // namespace

TEST_CASE("TransformChain: stamps, order, and the bound on growth", "[codec]") {
  RegisterTestTransforms();
  TransformChain empty;
  CHECK(empty.Stamp().empty());
  auto same = empty.Encode(Bytes("as it is"));
  REQUIRE(same.ok());
  CHECK(*same == Bytes("as it is"));

  auto twice = TransformChain::ForWriting({{XorPad::kName, ""}, {XorPad::kName, ""}});
  REQUIRE(twice.ok());
  CHECK(twice->Stamp() == "test-xor-pad@1 test-xor-pad@1");
  auto stored = twice->Encode(Bytes("hello"));
  REQUIRE(stored.ok());
  CHECK(stored->size() == 8192);  // 4 + 5 padded to 4096, then 4 + 4096 padded to 8192
  auto read = TransformChain::FromStamp(twice->Stamp());
  REQUIRE(read.ok());
  CHECK(*read->Decode(*stored, 5) == Bytes("hello"));
  CHECK(read->Decode(*stored, 6).status().message() == "transform chain 'test-xor-pad@1 test-xor-pad@1' decoded "
                                                        "5 bytes, 6 expected");

  auto balloon = TransformChain::ForWriting({{"test-balloon", ""}});
  REQUIRE(balloon.ok());
  auto grown = balloon->Encode(Bytes("x"));
  REQUIRE_FALSE(grown.ok());
  CHECK(grown.status().message() == "transform test-balloon@1 made 4098 bytes of 1 (at most 4097)");

  auto missing = TransformChain::ForWriting({{"no-such-transform", ""}});
  CHECK(missing.status().code() == Status::Code::kNotSupported);
  CHECK(missing.status().message() == "transform 'no-such-transform' is not installed");
  CHECK(TransformChain::FromStamp("test-xor-pad@2").status().message() ==
        "transform chain 'test-xor-pad@2': transform 'test-xor-pad' version 2 is newer than this cairn's (1)");
  for (const char* bad : {"test-xor-pad", "@1", "test-xor-pad@", "test-xor-pad@1x", "test-xor-pad@1 ", " x@1"}) {
    INFO(bad);
    CHECK(TransformChain::FromStamp(bad).status().IsCorruption());
  }
  CHECK(RegisterTransform(XorPad::kName, 1, {}).code() == Status::Code::kExists);
  CHECK(RegisterTransform("Bad_Name", 1, {}).code() == Status::Code::kInvalidArgument);
}

TEST_CASE("Codec: plugins= takes custom transforms, each once, never a compress or encrypt plugin", "[codec]") {
  RegisterTestTransforms();
  CHECK(*CanonicalPolicyValue(PolicyKey::kPlugins, fmt::format("{},test-balloon", XorPad::kName)) ==
        fmt::format("{},test-balloon", XorPad::kName));
  // Accepted before, then refused by the write plan at every persist: the file stayed in the
  // staging cache.
  auto refused = CanonicalPolicyValue(PolicyKey::kPlugins, "test-squeeze");
  INFO(refused.status().ToString());
  CHECK(refused.status().code() == Status::Code::kInvalidArgument);
  CHECK(refused.status().message().find("compress or encrypt plugin") != std::string::npos);
  auto twice = CanonicalPolicyValue(PolicyKey::kPlugins, "test-balloon,test-balloon");
  CHECK(twice.status().message().find("named twice") != std::string::npos);
}

TEST_CASE("Codec: logical and stored lengths travel apart through persist, read, fsck and recover", "[codec]") {
  RegisterTestTransforms();
  CodedArchive a;
  auto made = a.fs->MakeNode(kRootInode, "coded", S_IFDIR | 0755, 0, Caller{});
  REQUIRE(made.ok());
  uint64_t coded = made->ino;
  // An unknown plugin is refused (EINVAL), naming it; a registered one is taken.
  Status unknown = a.fs->SetXattr(coded, "user.cairn.plugins", Bytes("test-nothing"), 0, Caller{});
  CHECK(unknown.sys_errno() == EINVAL);
  CHECK(unknown.message().find("no transform plugin 'test-nothing' is installed") != std::string::npos);
  REQUIRE(a.fs->SetXattr(coded, "user.cairn.plugins", Bytes(XorPad::kName), 0, Caller{}).ok());

  auto big = test::RandomBytes(2 * kSegment + 1000, 1);  // two segment extents, the tail packed
  auto small = test::RandomBytes(3000, 2);                 // packed
  auto plain = test::RandomBytes(kSegment, 3);             // outside: no chain
  uint64_t big_ino = a.WriteFile("big", big, coded);
  uint64_t small_ino = a.WriteFile("small", small, coded);
  uint64_t plain_ino = a.WriteFile("plain", plain);
  REQUIRE(a.fs->PersistAll().ok());

  for (uint64_t ino : {big_ino, small_ino}) {
    for (const SegmentRecord& segment : a.Segments(ino)) {
      ExtentRecord e = a.Extent(segment.extent_id);
      INFO("inode " << ino << " segment " << segment.index);
      CHECK(e.chain_stamp == "test-xor-pad@1");
      CHECK(e.payload_length == (4 + e.logical_length + 4095) / 4096 * 4096);  // stored: what XorPad made
      CHECK(segment.extent_offset + segment.length <= e.logical_length);
      // Every chunk's header says so too (format v4), and the disks hold the transformed bytes.
      auto header = a.archive->extents().ReadChunkHeader(e, 0);
      REQUIRE(header.ok());
      CHECK(header->version == 4);
      CHECK(header->logical_length == e.logical_length);
      CHECK(header->extent_payload_length == e.payload_length);
      CHECK(header->chain_stamp == "test-xor-pad@1");
      auto stored = a.archive->extents().ReadExtentPayload(e);
      REQUIRE(stored.ok());
      CHECK(GetFixed32(stored->data()) == e.logical_length);
      const auto& data = ino == big_ino ? big : small;
      uint64_t from = segment.index * kSegment;
      CHECK(std::memcmp(stored->data() + 4 + segment.extent_offset, data.data() + from, segment.length) != 0);
    }
  }
  CHECK(a.Extent(a.Segments(small_ino)[0].extent_id).kind == static_cast<int>(ExtentKind::kPack));
  ExtentRecord plain_extent = a.Extent(a.Segments(plain_ino)[0].extent_id);
  CHECK(plain_extent.chain_stamp.empty());
  CHECK(plain_extent.logical_length == plain_extent.payload_length);

  // Reads decode: evicted, the bytes come from the disks.
  REQUIRE(a.fs->EvictAll().ok());
  CHECK_FALSE(a.Segments(big_ino)[0].cached);
  CHECK(a.Read("/coded/big", big.size()) == big);
  CHECK(a.Read("/coded/small", small.size()) == small);
  CHECK(a.Read("/plain", plain.size()) == plain);

  // fsck decodes every extent and measures segments by the logical length.
  a.Close();
  {
    Archive::OpenOptions check;
    check.check_only = true;
    auto archive = Archive::Open(a.dir, check);
    REQUIRE(archive.ok());
    FsckReport report = CheckArchive(**archive, {});
    CHECK(report.problems.empty());
    CHECK(report.extents == 4);  // two big segments, the pack (big's tail, small), plain
  }

  // recover rebuilds the catalog from the member tables, found behind the chain.
  auto recovered = RecoverCatalog(a.dir, RecoverOptions{.force = true});
  REQUIRE(recovered.ok());
  CHECK(recovered->lost.empty());
  CHECK(recovered->files == 3);
  a.Open();
  CHECK(a.Read("/coded/big", big.size()) == big);
  CHECK(a.Read("/coded/small", small.size()) == small);
  CHECK(a.Read("/plain", plain.size()) == plain);
  CHECK(a.Extent(a.Segments(*a.fs->LookupPath("/coded/big"))[0].extent_id).chain_stamp == "test-xor-pad@1");
}

TEST_CASE("Codec: fsck reports an extent whose chain does not decode to its logical length", "[codec]") {
  RegisterTestTransforms();
  CodedArchive a;
  REQUIRE(a.fs->SetXattr(kRootInode, "user.cairn.plugins", Bytes(XorPad::kName), 0, Caller{}).ok());
  a.WriteFile("f", test::RandomBytes(20000, 4));
  REQUIRE(a.fs->PersistAll().ok());
  uint64_t extent = a.Segments(*a.fs->LookupPath("/f"))[0].extent_id;
  uint64_t logical = a.Extent(extent).logical_length;
  a.Close();
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open((a.dir + "/catalog.db").c_str(), &db) == SQLITE_OK);
  std::string sql = fmt::format("UPDATE extents SET logical_length = {} WHERE id = {}", logical + 1, extent);
  CHECK(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  Archive::OpenOptions check;
  check.check_only = true;
  auto archive = Archive::Open(a.dir, check);
  REQUIRE(archive.ok());
  FsckReport report = CheckArchive(**archive, {});
  REQUIRE(report.problems.size() == 1);
  CHECK(report.problems[0] == fmt::format("extent {}: transform chain 'test-xor-pad@1' decoded {} bytes, {} expected",
                                          extent, logical, logical + 1));
}
