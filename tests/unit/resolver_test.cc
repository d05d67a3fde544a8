#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "catalog/catalog.h"
#include "policy/resolver.h"
#include "policy/rules.h"
#include "test_util.h"

using namespace cairn;

namespace {

// A catalog with /a/b/c/f and helpers to set user.* and trusted.* attributes.
struct Tree {
  test::TempDir dir;
  std::unique_ptr<Catalog> catalog = std::move(*Catalog::Create(dir / "c.db", 0, 0, 0));
  uint64_t a = MakeDir(kRootInode, "a");
  uint64_t b = MakeDir(a, "b");
  uint64_t c = MakeDir(b, "c");
  uint64_t f = MakeFile(c, "f.log", 5000);

  uint64_t MakeDir(uint64_t parent, const char* name) {
    InodeRecord r;
    r.mode = 040755;
    r.nlink = 2;
    uint64_t ino = *catalog->InsertInode(r);
    REQUIRE(catalog->InsertEntry(parent, name, ino).ok());
    return ino;
  }
  uint64_t MakeFile(uint64_t parent, const char* name, uint64_t size) {
    InodeRecord r;
    r.mode = 0100644;
    r.nlink = 1;
    r.size = size;
    uint64_t ino = *catalog->InsertInode(r);
    REQUIRE(catalog->InsertEntry(parent, name, ino).ok());
    return ino;
  }
  void Set(uint64_t ino, const std::string& name, const std::string& value) {
    REQUIRE(catalog->SetXattr(ino, name, {reinterpret_cast<const uint8_t*>(value.data()), value.size()}).ok());
  }
  void Remove(uint64_t ino, const std::string& name) { REQUIRE(catalog->RemoveXattr(ino, name).ok()); }
};

PolicyContext WithRules(const char* text) {
  auto rules = RuleSet::Parse(text, "rules");
  REQUIRE(rules.ok());
  return PolicyContext{std::make_shared<const RuleSet>(std::move(*rules)), 4 << 20};
}

const char* kRules = R"(policy cold selectable
    set segment_size=16M
policy archive
    set segment_size=64M
rule logs
    where name *.log
    set segment_size=1M
rule big
    where size > 1G
    set policy=archive
default
    set segment_size=8M
)";

}  // namespace

TEST_CASE("Resolver: file beats nearest directory beats farther directory beats default") {
  Tree t;
  PolicyContext none{nullptr, 4 << 20};
  t.Set(t.a, "user.cairn.segment_size", "65536");
  t.Set(t.b, "user.cairn.segment_size", "131072");
  auto p = *ResolvePolicy(*t.catalog, t.f, none);
  CHECK(p.segment_size() == 131072);
  CHECK(p.Get(PolicyKey::kSegmentSize).source == "dir:/a/b");
  CHECK(p.Get(PolicyKey::kRaid).source == "default");
  t.Set(t.f, "user.cairn.segment_size", "262144");
  p = *ResolvePolicy(*t.catalog, t.f, none);
  CHECK(p.segment_size() == 262144);
  CHECK(p.Get(PolicyKey::kSegmentSize).source == "file");
  t.Remove(t.b, "user.cairn.segment_size");
  t.Remove(t.f, "user.cairn.segment_size");
  p = *ResolvePolicy(*t.catalog, t.f, none);
  CHECK(p.Get(PolicyKey::kSegmentSize).source == "dir:/a");
  CHECK(p.Effective().find("segment_size=65536") != std::string::npos);
  CHECK(p.Sources().starts_with("raid=default idr=default"));
  t.Remove(t.a, "user.cairn.segment_size");
  CHECK(ResolvePolicy(*t.catalog, t.f, none)->segment_size() == (4u << 20));
}

// The precedence table of cairn-policy.7, one row per level, each row removing the
// level above it: file > dir > pin > rule > rules' default > built-in.
TEST_CASE("Resolver: precedence table") {
  Tree t;
  PolicyContext ctx = WithRules(kRules);
  t.Set(t.f, "user.cairn.segment_size", "65536");
  t.Set(t.b, "user.cairn.segment_size", "131072");
  t.Set(t.a, "trusted.cairn.segment_size", "262144");
  struct Row {
    const char* source;
    uint64_t size;
  };
  auto expect = [&](const char* source, uint64_t size) {
    auto p = ResolvePolicy(*t.catalog, t.f, ctx);
    REQUIRE(p.ok());
    CHECK(p->Get(PolicyKey::kSegmentSize).source == source);
    CHECK(p->segment_size() == size);
  };
  expect("file", 65536);
  t.Remove(t.f, "user.cairn.segment_size");
  expect("dir:/a/b", 131072);
  t.Remove(t.b, "user.cairn.segment_size");
  expect("pin:/a", 262144);
  t.Remove(t.a, "trusted.cairn.segment_size");
  expect("rule:logs", 1 << 20);
  uint64_t g = t.MakeFile(t.c, "g.dat", 10);
  auto p = *ResolvePolicy(*t.catalog, g, ctx);
  CHECK(p.Get(PolicyKey::kSegmentSize).source == "rule:default");
  CHECK(p.segment_size() == (8u << 20));
  CHECK(p.matched_rule == "default");
  p = *ResolvePolicy(*t.catalog, g, PolicyContext{std::make_shared<const RuleSet>(RuleSet::BuiltIn()), 4 << 20});
  CHECK(p.Get(PolicyKey::kSegmentSize).source == "default");
}

TEST_CASE("Resolver: a file that is compressed takes the compressed segment size unless one is set") {
  Tree t;
  PolicyContext ctx{nullptr, 4 << 20, 8 << 20};
  auto resolved = [&] { return *ResolvePolicy(*t.catalog, t.f, ctx); };
  CHECK(resolved().segment_size() == (4u << 20));  // compress=off
  t.Set(t.a, "user.cairn.compress", "zstd");
  CHECK(resolved().segment_size() == (8u << 20));
  CHECK(resolved().Get(PolicyKey::kSegmentSize).source == "default:compress");
  CHECK(resolved().Effective().find("segment_size=8388608") != std::string::npos);
  t.Set(t.f, "user.cairn.compress", "lz4");
  CHECK(resolved().segment_size() == (8u << 20));
  t.Set(t.b, "user.cairn.segment_size", "1048576");  // any setting of segment_size wins
  CHECK(resolved().segment_size() == (1u << 20));
  CHECK(resolved().Get(PolicyKey::kSegmentSize).source == "dir:/a/b");
  t.Remove(t.b, "user.cairn.segment_size");
  t.Set(t.f, "user.cairn.compress", "off");
  CHECK(resolved().segment_size() == (4u << 20));
  CHECK(resolved().Get(PolicyKey::kSegmentSize).source == "default");
  t.Set(t.f, "user.cairn.compress", "zstd");
  for (uint64_t same : {0, 4 << 20}) {  // none, or as segment_size: the default
    ctx.compressed_segment_size = same;
    CHECK(resolved().Get(PolicyKey::kSegmentSize).source == "default");
    CHECK(resolved().segment_size() == (4u << 20));
  }
  t.Remove(t.f, "user.cairn.compress");
  ctx = WithRules(kRules);  // the rules' default sets segment_size=8M, and that is not the built-in default
  ctx.compressed_segment_size = 16 << 20;
  CHECK(resolved().Get(PolicyKey::kSegmentSize).source == "rule:logs");
  uint64_t g = t.MakeFile(t.c, "g.dat", 10);
  t.Set(g, "user.cairn.compress", "zstd");
  auto p = *ResolvePolicy(*t.catalog, g, ctx);
  CHECK(p.Get(PolicyKey::kSegmentSize).source == "rule:default");
  CHECK(p.segment_size() == (8u << 20));
}

TEST_CASE("Resolver: named policies supply fields at their level; explicit keys win") {
  Tree t;
  PolicyContext ctx = WithRules(kRules);
  t.Set(t.b, "user.cairn.policy", "cold");
  auto p = *ResolvePolicy(*t.catalog, t.f, ctx);
  CHECK(p.Get(PolicyKey::kSegmentSize).source == "policy:cold@dir:/a/b");
  CHECK(p.segment_size() == (16u << 20));
  CHECK(p.Get(PolicyKey::kPolicy).value == "cold");
  t.Set(t.b, "user.cairn.segment_size", "65536");  // same level, explicit
  CHECK(ResolvePolicy(*t.catalog, t.f, ctx)->segment_size() == 65536);
  // A rule selecting a policy.
  uint64_t big = t.MakeFile(kRootInode, "big.bin", 2ull << 30);
  p = *ResolvePolicy(*t.catalog, big, ctx);
  CHECK(p.Get(PolicyKey::kSegmentSize).source == "policy:archive@rule:big");
  CHECK(p.segment_size() == (64u << 20));
}

TEST_CASE("Resolver: trusted.cairn.lock makes user settings below it ineffective") {
  Tree t;
  PolicyContext ctx = WithRules(kRules);
  t.Set(t.f, "user.cairn.segment_size", "65536");
  t.Set(t.c, "user.cairn.policy", "cold");
  t.Set(t.a, "trusted.cairn.lock", "segment_size");
  auto p = *ResolvePolicy(*t.catalog, t.f, ctx);
  CHECK(p.Get(PolicyKey::kSegmentSize).source == "rule:logs");  // neither the file's nor cold's
  CHECK(p.Get(PolicyKey::kPolicy).source == "dir:/a/b/c");     // not locked
  CHECK(*LockCovering(*t.catalog, t.f, PolicyKey::kSegmentSize) == "/a (trusted.cairn.lock=segment_size)");
  CHECK(LockCovering(*t.catalog, t.f, PolicyKey::kRaid)->empty());
  CHECK(LockCovering(*t.catalog, kRootInode, PolicyKey::kSegmentSize)->empty());
  t.Set(t.a, "trusted.cairn.segment_size", "131072");  // the pin applies under the lock
  CHECK(ResolvePolicy(*t.catalog, t.f, ctx)->Get(PolicyKey::kSegmentSize).source == "pin:/a");
  t.Set(t.a, "trusted.cairn.lock", "all");
  CHECK(ResolvePolicy(*t.catalog, t.f, ctx)->Get(PolicyKey::kPolicy).source == "default");
}

TEST_CASE("Resolver: a lock on policy keeps a user's named policy from supplying the other keys") {
  Tree t;
  PolicyContext ctx = WithRules(kRules);
  uint64_t g = t.MakeFile(t.c, "g.dat", 5000);
  t.Set(t.a, "user.cairn.policy", "cold");  // above the lock: its owner may set it
  t.Set(t.b, "trusted.cairn.lock", "policy");
  auto p = *ResolvePolicy(*t.catalog, g, ctx);
  CHECK(p.Get(PolicyKey::kPolicy).source == "default");
  CHECK(p.Get(PolicyKey::kSegmentSize).source == "rule:default");  // before, policy:cold@dir:/a
  t.Remove(t.b, "trusted.cairn.lock");
  CHECK(ResolvePolicy(*t.catalog, g, ctx)->Get(PolicyKey::kSegmentSize).source == "policy:cold@dir:/a");
}

TEST_CASE("Resolver: locks and pins above any of a file's names apply; the first path wins a disagreement") {
  Tree t;
  PolicyContext none{nullptr, 4 << 20};
  uint64_t home = t.MakeDir(kRootInode, "home");
  uint64_t locked = t.MakeDir(kRootInode, "locked");
  uint64_t z = t.MakeDir(kRootInode, "z");
  uint64_t f = t.MakeFile(home, "f", 10);
  t.Set(f, "user.cairn.raid", "none");
  t.Set(locked, "trusted.cairn.raid", "mirror-2");
  t.Set(locked, "trusted.cairn.lock", "raid");
  CHECK(ResolvePolicy(*t.catalog, f, none)->Get(PolicyKey::kRaid).source == "file");
  REQUIRE(t.catalog->InsertEntry(locked, "f", f).ok());  // the hard link
  auto p = *ResolvePolicy(*t.catalog, f, none);
  CHECK(p.Get(PolicyKey::kRaid).value == "mirror-2");
  CHECK(p.Get(PolicyKey::kRaid).source == "pin:/locked");
  CHECK(*LockCovering(*t.catalog, f, PolicyKey::kRaid) == "/locked (trusted.cairn.lock=raid)");
  // Two names with different pins: /locked/f sorts before /z/f.
  t.Set(z, "trusted.cairn.raid", "mirror-3");
  REQUIRE(t.catalog->InsertEntry(z, "f", f).ok());
  CHECK(ResolvePolicy(*t.catalog, f, none)->Get(PolicyKey::kRaid).source == "pin:/locked");
  REQUIRE(t.catalog->DeleteEntry(locked, "f").ok());
  p = *ResolvePolicy(*t.catalog, f, none);
  CHECK(p.Get(PolicyKey::kRaid).source == "file");  // no lock any more: the user's setting
  t.Set(z, "trusted.cairn.lock", "all");
  CHECK(ResolvePolicy(*t.catalog, f, none)->Get(PolicyKey::kRaid).source == "pin:/z");
  // Directory settings come from the first path only.
  t.Set(home, "user.cairn.segment_size", "65536");
  t.Remove(z, "trusted.cairn.lock");
  CHECK(ResolvePolicy(*t.catalog, f, none)->Get(PolicyKey::kSegmentSize).source == "dir:/home");
}

TEST_CASE("Resolver: a stamp matches when only the policy name differs") {
  Tree t;
  PolicyContext ctx = WithRules(kRules);
  auto p = *ResolvePolicy(*t.catalog, t.f, ctx);
  std::string stamp = p.Effective();
  CHECK(LayoutMatches(stamp, p));
  std::string renamed = stamp.substr(0, stamp.rfind("policy=")) + "policy=old-name";
  CHECK(LayoutMatches(renamed, p));
  t.Set(t.f, "user.cairn.segment_size", "65536");
  CHECK_FALSE(LayoutMatches(stamp, *ResolvePolicy(*t.catalog, t.f, ctx)));
  CHECK_FALSE(LayoutMatches("garbage", p));
}

TEST_CASE("Resolver: a directory cycle is Corruption naming the inode, not a truncated answer") {
  Tree t;
  PolicyContext none{nullptr, 4 << 20};
  REQUIRE(PathOf(*t.catalog, t.f).ok());
  REQUIRE(t.catalog->MoveEntry(kRootInode, "a", t.c, "a").ok());  // damage: a's parent is now its grandchild c
  auto policy = ResolvePolicy(*t.catalog, t.f, none);
  REQUIRE_FALSE(policy.ok());
  CHECK(policy.status().IsCorruption());
  CHECK(policy.status().message().find(fmt::format("inode {}:", t.f)) != std::string::npos);
  CHECK(LockCovering(*t.catalog, t.f, PolicyKey::kRaid).status().IsCorruption());
  auto path = PathOf(*t.catalog, t.f);
  REQUIRE_FALSE(path.ok());
  CHECK(path.status().IsCorruption());
  CHECK(path.status().message().find(fmt::format("inode {}:", t.f)) != std::string::npos);
}

TEST_CASE("Resolver: only a file's oldest names are looked at; with more, user settings do not count") {
  Tree t;
  PolicyContext none{nullptr, 4 << 20};
  uint64_t links = t.MakeDir(kRootInode, "links");
  t.Set(t.f, "user.cairn.segment_size", "65536");
  for (size_t i = 1; i < kMaxPolicyNames; i++) {  // t.f has one name already
    REQUIRE(t.catalog->InsertEntry(links, fmt::format("l{}", i), t.f).ok());
  }
  CHECK(ResolvePolicy(*t.catalog, t.f, none)->Get(PolicyKey::kSegmentSize).source == "file");
  CHECK(LockCovering(*t.catalog, t.f, PolicyKey::kSegmentSize)->empty());
  // One name more, in a directory with a pin: that name is not loaded, so its pin is
  // unseen, and the user's setting no longer counts (a lock there would be unseen too).
  uint64_t pinned = t.MakeDir(kRootInode, "pinned");
  t.Set(pinned, "trusted.cairn.raid", "mirror-2");
  REQUIRE(t.catalog->InsertEntry(pinned, "late", t.f).ok());
  auto p = *ResolvePolicy(*t.catalog, t.f, none);
  CHECK(p.Get(PolicyKey::kSegmentSize).source == "default");
  CHECK(p.Get(PolicyKey::kRaid).source == "default");
  CHECK(LockCovering(*t.catalog, t.f, PolicyKey::kSegmentSize)->find("more than 64 hard links") != std::string::npos);
  REQUIRE(t.catalog->DeleteEntry(links, "l1").ok());  // back to 64 names: the pin is seen, the file's setting counts
  p = *ResolvePolicy(*t.catalog, t.f, none);
  CHECK(p.Get(PolicyKey::kSegmentSize).source == "file");
  CHECK(p.Get(PolicyKey::kRaid).source == "pin:/pinned");
}
