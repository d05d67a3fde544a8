#include <catch2/catch.hpp>

#include "catalog/catalog.h"
#include "policy/resolver.h"
#include "policy/vocabulary.h"
#include "test_util.h"

using namespace cairn;

namespace {

Status::Code CodeOf(PolicyKey key, const char* value) { return CanonicalPolicyValue(key, value).status().code(); }

}  // namespace

TEST_CASE("Vocabulary: keys") {
  CHECK(*ParsePolicyKey("raid") == PolicyKey::kRaid);
  CHECK(*ParsePolicyKey("segment_size") == PolicyKey::kSegmentSize);
  auto unknown = ParsePolicyKey("colour");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().message().find("user.cairn.colour is not a cairn policy key") != std::string::npos);
  CHECK(IsComputedPolicyKey("effective"));
  CHECK(IsComputedPolicyKey("effective.source"));
  CHECK(IsComputedPolicyKey("state"));
  CHECK_FALSE(IsComputedPolicyKey("raid"));
  for (PolicyKey key : kAllPolicyKeys) CHECK(*ParsePolicyKey(PolicyKeyName(key)) == key);
}

TEST_CASE("Vocabulary: values available in this build are canonicalized") {
  CHECK(*CanonicalPolicyValue(PolicyKey::kRaid, "none") == "none");
  CHECK(*CanonicalPolicyValue(PolicyKey::kSegmentSize, "64K") == "65536");
  CHECK(*CanonicalPolicyValue(PolicyKey::kSegmentSize, "4M") == "4194304");
  CHECK(*CanonicalPolicyValue(PolicyKey::kSegmentSize, "1G") == "1073741824");
  CHECK(*CanonicalPolicyValue(PolicyKey::kChecksum, "crc32c") == "crc32c");
  CHECK(*CanonicalPolicyValue(PolicyKey::kCompress, "off") == "off");
}

TEST_CASE("Vocabulary: valid values of features not built are NotSupported, saying so") {
  using Code = Status::Code;
  for (const char* v : {"mirror-2", "rs-10-4", "rs-120-24", "2d"}) CHECK(CodeOf(PolicyKey::kRaid, v) == Code::kNotSupported);
  for (const char* v : {"spc-16-1", "spc-16-1-s10"}) CHECK(CodeOf(PolicyKey::kIdr, v) == Code::kNotSupported);
  for (const char* v : {"lz4", "zstd", "zstd-9", "auto"}) CHECK(CodeOf(PolicyKey::kCompress, v) == Code::kNotSupported);
  CHECK(CodeOf(PolicyKey::kEncrypt, "aes-256-gcm") == Code::kNotSupported);
  CHECK(CodeOf(PolicyKey::kChecksum, "blake3") == Code::kNotSupported);
  CHECK(CodeOf(PolicyKey::kPlacement, "group=ssd,pack=climate") == Code::kNotSupported);
  CHECK(CodeOf(PolicyKey::kPolicy, "cold") == Code::kNotSupported);
  auto rs = CanonicalPolicyValue(PolicyKey::kRaid, "rs-10-4");
  CHECK(rs.status().message().find("valid but not available in this build") != std::string::npos);
}

TEST_CASE("Vocabulary: malformed values are InvalidArgument naming key, value and what is allowed") {
  using Code = Status::Code;
  for (const char* v : {"rs-0-4", "rs-129-4", "rs-10-33", "mirror-1", "mirror-9", "raid5", "", "rs-10"}) {
    INFO(v);
    CHECK(CodeOf(PolicyKey::kRaid, v) == Code::kInvalidArgument);
  }
  for (const char* v : {"zstd-0", "zstd-23", "gzip"}) CHECK(CodeOf(PolicyKey::kCompress, v) == Code::kInvalidArgument);
  for (const char* v : {"1K", "2G", "65537", "lots", "-4M"}) {
    INFO(v);
    CHECK(CodeOf(PolicyKey::kSegmentSize, v) == Code::kInvalidArgument);
  }
  CHECK(CodeOf(PolicyKey::kPlacement, "rack=3") == Code::kInvalidArgument);
  CHECK(CodeOf(PolicyKey::kPolicy, "has space") == Code::kInvalidArgument);
  auto bad = CanonicalPolicyValue(PolicyKey::kRaid, "raid5");
  CHECK(bad.status().message() ==
        "user.cairn.raid: 'raid5' is not a valid value (allowed: none, mirror-N (2..8), rs-K-M (K 1..128, M 1..32), 2d)");
}

TEST_CASE("Resolver: file beats nearest directory beats farther directory beats default") {
  test::TempDir dir;
  auto catalog = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
  auto mkdir = [&](uint64_t parent, const char* name) {
    InodeRecord r;
    r.mode = 040755;
    r.nlink = 2;
    uint64_t ino = *catalog->InsertInode(r);
    REQUIRE(catalog->InsertEntry(parent, name, ino).ok());
    return ino;
  };
  auto set = [&](uint64_t ino, const char* key, const std::string& value) {
    REQUIRE(catalog->SetXattr(ino, std::string("user.cairn.") + key, {reinterpret_cast<const uint8_t*>(value.data()), value.size()}).ok());
  };
  uint64_t a = mkdir(kRootInode, "a");
  uint64_t b = mkdir(a, "b");
  uint64_t c = mkdir(b, "c");
  InodeRecord file;
  file.mode = 0100644;
  file.nlink = 1;
  uint64_t f = *catalog->InsertInode(file);
  REQUIRE(catalog->InsertEntry(c, "f", f).ok());

  set(a, "segment_size", "65536");
  set(b, "segment_size", "131072");
  auto p = *ResolvePolicy(*catalog, f, 4 << 20);
  CHECK(p.segment_size() == 131072);
  CHECK(p.Get(PolicyKey::kSegmentSize).source == "dir:/a/b");
  CHECK(p.Get(PolicyKey::kRaid).source == "default");
  set(f, "segment_size", "262144");
  p = *ResolvePolicy(*catalog, f, 4 << 20);
  CHECK(p.segment_size() == 262144);
  CHECK(p.Get(PolicyKey::kSegmentSize).source == "file");
  REQUIRE(catalog->RemoveXattr(b, "user.cairn.segment_size").ok());
  REQUIRE(catalog->RemoveXattr(f, "user.cairn.segment_size").ok());
  p = *ResolvePolicy(*catalog, f, 4 << 20);
  CHECK(p.Get(PolicyKey::kSegmentSize).source == "dir:/a");
  CHECK(p.Effective().find("segment_size=65536") != std::string::npos);
  CHECK(p.Sources().starts_with("raid=default idr=default"));
  REQUIRE(catalog->RemoveXattr(a, "user.cairn.segment_size").ok());
  CHECK(ResolvePolicy(*catalog, f, 4 << 20)->segment_size() == (4u << 20));
}
