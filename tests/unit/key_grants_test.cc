// "A user can neither encrypt with nor read through a master key they were not granted",
// through Filesystem: changes of the attributes that decide encryption, opens of files not
// persisted yet, and what a crypto-erase leaves readable.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "archive_fixture.h"
#include "codec/plugin_loader.h"
#include "keys/keystore.h"
#include "policy/vocabulary.h"

using namespace cairn;

namespace {

constexpr uint32_t kGranted = 1000;  // on k1's allow line
constexpr uint32_t kOther = 2000;    // on none but k2's ("*")

Caller As(uint32_t uid) {
  Caller caller;
  caller.uid = uid;
  caller.gid = uid;
  return caller;
}

std::span<const uint8_t> Bytes(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

// An archive with master keys k1 (root and uid 1000) and k2 (everyone), and selectable
// policies that turn encryption off or encrypt under either.
struct KeyArchive : test::ArchiveFixture {
  KeyArchive() {
    auto plugins = LoadPlugins(CAIRN_BUILD_PLUGIN_DIR);  // aes-256-gcm
    REQUIRE(plugins.ok());
    Keystore store(dir + "/keystore");
    REQUIRE(store.AddVersion(*NewInlineMasterKey("k1")).ok());
    REQUIRE(store.AddVersion(*NewInlineMasterKey("k2")).ok());
    REQUIRE(store.SetGrants("k1", {fmt::format("uid:{}", kGranted)}).ok());
    REQUIRE(store.SetGrants("k2", {"*"}).ok());
    REQUIRE(store.Save().ok());
    std::ofstream(dir + "/rules") << "policy plain selectable\n    set encrypt=off\n"
                                     "policy sealed1 selectable\n    set encrypt=aes-256-gcm key=k1\n"
                                     "policy sealed2 selectable\n    set encrypt=aes-256-gcm key=k2\n"
                                     "default\n";
    REQUIRE(fs->ReloadRules().ok());
  }

  uint64_t MakeDir(const std::string& name, uint64_t parent = kRootInode, const Caller& caller = Caller{}) {
    auto node = fs->MakeNode(parent, name, S_IFDIR | 0777, 0, caller);
    REQUIRE(node.ok());
    return node->ino;
  }
  Status Set(uint64_t ino, const std::string& name, std::string_view value, const Caller& caller = Caller{}) {
    return fs->SetXattr(ino, name, Bytes(value), 0, caller);
  }
  // A directory whose files are encrypted under `key`.
  uint64_t EncryptedDir(const std::string& name, const std::string& key) {
    uint64_t ino = MakeDir(name);
    REQUIRE(Set(ino, "user.cairn.encrypt", "aes-256-gcm").ok());
    REQUIRE(Set(ino, "user.cairn.key", key).ok());
    return ino;
  }
  std::string Effective(uint64_t ino) {
    auto value = fs->GetXattr(ino, "user.cairn.effective");
    REQUIRE(value.ok());
    return std::string(value->begin(), value->end());
  }
  std::optional<std::string> KeyRow(uint64_t ino) {
    auto key = archive->file_keys().KeyNameOf(ino);
    REQUIRE(key.ok());
    return *key;
  }
};

// EACCES naming the key and the caller.
void CheckRefused(const Status& st, const std::string& key, uint32_t uid) {
  INFO(st.ToString());
  CHECK(st.sys_errno() == EACCES);
  CHECK(st.message().find(fmt::format("key {}: uid {} ", key, uid)) != std::string::npos);
}

}  // namespace

TEST_CASE("KeyGrants: the attributes that decide encryption are the user's and admin's encrypt, key and policy",
          "[keys]") {
  for (const char* name : {"user.cairn.encrypt", "user.cairn.key", "user.cairn.policy", "trusted.cairn.encrypt",
                           "trusted.cairn.key", "trusted.cairn.policy", "trusted.cairn.lock"}) {
    CHECK(DecidesEncryption(name));
  }
  for (const char* name : {"user.cairn.compress", "user.cairn.plugins", "user.cairn.lock", "user.comment",
                           "trusted.cairn.raid", "user.cairn.encryptx", "security.cairn.key"}) {
    CHECK_FALSE(DecidesEncryption(name));
  }
}

TEST_CASE("KeyGrants: turning encryption off or choosing another key needs the grant of the key in effect",
          "[keys]") {
  KeyArchive a;
  const Caller other = As(kOther), granted = As(kGranted);
  uint64_t dir = a.EncryptedDir("d", "k1");
  uint64_t file = a.WriteFile("f", test::RandomBytes(100 << 10, 1), dir);
  REQUIRE(a.fs->PersistAll().ok());
  REQUIRE(a.KeyRow(file) == "k1");

  // On the file: its data key is wrapped by k1, and its directory's policy names k1.
  CheckRefused(a.Set(file, "user.cairn.encrypt", "off", other), "k1", kOther);
  CheckRefused(a.Set(file, "user.cairn.key", "k2", other), "k1", kOther);  // k2 is theirs, k1 is not
  CheckRefused(a.Set(file, "user.cairn.policy", "plain", other), "k1", kOther);
  CheckRefused(a.Set(file, "user.cairn.policy", "sealed2", other), "k1", kOther);
  // On the directory its files inherit from.
  CheckRefused(a.Set(dir, "user.cairn.encrypt", "off", other), "k1", kOther);
  CheckRefused(a.fs->RemoveXattr(dir, "user.cairn.encrypt", other), "k1", kOther);
  CheckRefused(a.fs->RemoveXattr(dir, "user.cairn.key", other), "k1", kOther);
  CheckRefused(a.Set(dir, "user.cairn.policy", "plain", other), "k1", kOther);
  // Refused, nothing changed.
  CHECK(a.Effective(file).find("encrypt=aes-256-gcm key=k1") != std::string::npos);
  CHECK(a.fs->GetXattr(file, "user.cairn.encrypt").status().sys_errno() == ENODATA);
  CHECK(a.fs->GetXattr(dir, "user.cairn.key").ok());
  // Attributes that do not decide encryption stay theirs to change.
  CHECK(a.Set(file, "user.cairn.compress", "lz4", other).ok());
  CHECK(a.Set(file, "user.comment", "mine too", other).ok());
  CHECK(a.fs->RemoveXattr(file, "user.comment", other).ok());

  // A granted user may; the file keeps its data key (wrapped by k1) until it is rewritten,
  // and that alone still guards it.
  REQUIRE(a.Set(file, "user.cairn.encrypt", "off", granted).ok());
  CHECK(a.Effective(file).find("encrypt=off") != std::string::npos);
  CheckRefused(a.fs->RemoveXattr(file, "user.cairn.encrypt", other), "k1", kOther);
  CheckRefused(a.Set(file, "user.cairn.key", "k2", other), "k1", kOther);
  // Rewritten in clear, no key guards it any more.
  REQUIRE(a.fs->ApplyPolicy("/d/f", [](const Reconciler::Progress&) { return true; }).ok());
  CHECK_FALSE(a.KeyRow(file));
  CHECK(a.Set(file, "user.cairn.key", "k2", other).ok());
}

TEST_CASE("KeyGrants: encrypting under a key, inherited or through a named policy, needs its grant", "[keys]") {
  KeyArchive a;
  const Caller other = As(kOther), granted = As(kGranted);
  uint64_t shared = a.MakeDir("shared");
  REQUIRE(a.Set(shared, "user.cairn.key", "k1").ok());  // not encrypting yet
  uint64_t mine = a.MakeDir("mine", shared, other);
  CheckRefused(a.Set(mine, "user.cairn.encrypt", "aes-256-gcm", other), "k1", kOther);
  CheckRefused(a.Set(mine, "user.cairn.policy", "sealed1", other), "k1", kOther);
  CHECK(a.Effective(mine).find("encrypt=off") != std::string::npos);
  CHECK(a.Set(mine, "user.cairn.policy", "sealed2", other).ok());  // k2 allows everyone
  CHECK(a.Effective(mine).find("encrypt=aes-256-gcm key=k2") != std::string::npos);
  uint64_t theirs = a.MakeDir("theirs", shared, granted);
  CHECK(a.Set(theirs, "user.cairn.encrypt", "aes-256-gcm", granted).ok());
}

TEST_CASE("KeyGrants: a file not persisted yet is guarded by the key its policy names", "[keys]") {
  KeyArchive a;
  const Caller other = As(kOther), granted = As(kGranted);
  uint64_t dir = a.EncryptedDir("d", "k1");
  uint64_t file = a.WriteFile("f", test::RandomBytes(100 << 10, 2), dir);
  REQUIRE_FALSE(a.KeyRow(file));  // its plaintext is in the staging cache only

  CheckRefused(a.fs->Open(file, O_RDONLY, other).status(), "k1", kOther);
  auto opened = a.fs->Open(file, O_RDONLY, granted);
  REQUIRE(opened.ok());
  a.fs->Release(*opened);
  // Nor may they write what would be sealed under it.
  InodeRecord attr;
  CheckRefused(a.fs->Create(dir, "new", 0644, O_RDWR, other, &attr).status(), "k1", kOther);
  CHECK(a.fs->Lookup(dir, "new").status().sys_errno() == ENOENT);
  auto created = a.fs->Create(dir, "granted", 0644, O_RDWR, granted, &attr);
  REQUIRE(created.ok());
  a.fs->Release(*created);
}

TEST_CASE("KeyGrants: a crypto-erase leaves no plaintext to read, and nothing unpersisted goes out in clear",
          "[keys]") {
  KeyArchive a;
  const Caller other = As(kOther);
  uint64_t dir = a.EncryptedDir("d", "k1");
  const auto data = test::RandomBytes(200 << 10, 3);
  uint64_t file = a.WriteFile("f", data, dir);
  REQUIRE(a.fs->PersistAll().ok());
  REQUIRE(a.KeyRow(file) == "k1");
  auto cached = a.Segments(file);
  REQUIRE(std::any_of(cached.begin(), cached.end(), [](const SegmentRecord& s) { return s.cached; }));
  CHECK(a.ReadFile(file, data.size()) == data);  // decoded extents are kept too
  auto held = a.fs->Open(file, O_RDONLY, Caller{});  // open across the erase
  REQUIRE(held.ok());
  const auto dirty = test::RandomBytes(100 << 10, 4);
  uint64_t unpersisted = a.WriteFile("g", dirty, dir);

  auto erased = a.fs->ChangeFileKeys("erase", "k1");
  REQUIRE(erased.ok());
  CHECK(*erased == 1);
  for (const SegmentRecord& segment : a.Segments(file)) CHECK_FALSE(segment.cached);
  // Encrypted extents, no data key: EIO (Corruption), for a handle opened before and after.
  auto read = test::ReadBytes(*a.fs, *held, 0, data.size());
  INFO(read.status().ToString());
  CHECK(read.status().IsCorruption());
  CHECK(read.status().message().find(fmt::format("data key of inode {} is not available", file)) !=
        std::string::npos);
  a.fs->Release(*held);
  auto reopened = a.fs->Open(file, O_RDONLY, Caller{});
  REQUIRE(reopened.ok());
  CHECK(test::ReadBytes(*a.fs, *reopened, 0, data.size()).status().IsCorruption());
  a.fs->Release(*reopened);

  // cairn key delete --erase then drops k1 from the keystore: the data written meanwhile
  // cannot be sealed, and is not written in clear either; it stays in the staging cache.
  Keystore store = *Keystore::Load(a.dir + "/keystore");
  store.Drop("k1");
  REQUIRE(store.Save().ok());
  size_t extents = a.Extents().size();
  Status persisted = a.fs->PersistAll();
  INFO(persisted.ToString());
  CHECK(persisted.message().find("has no key k1") != std::string::npos);
  CHECK(a.Segments(unpersisted).empty());
  CHECK(a.Extents().size() == extents);
  CHECK(a.ReadFile(unpersisted, dirty.size()) == dirty);  // root's
  CheckRefused(a.fs->Open(unpersisted, O_RDONLY, other).status(), "k1", kOther);
  // Or the unmount would fail to persist it. Unlinked, it keeps its policy as long as it lives
  // (it was persisted in clear once); the kernel's reference goes too, and the file with it.
  REQUIRE(a.fs->Unlink(dir, "g", Caller{}).ok());
  CHECK(a.fs->PersistAll().message().find("has no key k1") != std::string::npos);
  a.fs->Forget(unpersisted, 1);
}

TEST_CASE("KeyGrants: a rename, link or unlink that would leave a file under other keys needs their grants",
          "[keys]") {
  KeyArchive a;
  const Caller other = As(kOther), granted = As(kGranted);
  uint64_t sealed = a.EncryptedDir("sealed", "k1");
  uint64_t open_dir = a.MakeDir("open");  // no encryption
  uint64_t also_sealed = a.EncryptedDir("also", "k1");
  const auto data = test::RandomBytes(100 << 10, 5);
  uint64_t persisted = a.WriteFile("p", data, sealed);
  REQUIRE(a.fs->PersistAll().ok());
  REQUIRE(a.KeyRow(persisted) == "k1");
  uint64_t staged = a.WriteFile("s", data, sealed);  // its plaintext in the staging cache only
  REQUIRE_FALSE(a.KeyRow(staged));

  // Out of the encrypted tree, where opening would need no key: refused, nothing moved.
  for (const char* name : {"p", "s"}) {
    CheckRefused(a.fs->Rename(sealed, name, open_dir, name, 0, other), "k1", kOther);
    CHECK(a.fs->Lookup(sealed, name).ok());
    CHECK(a.fs->Lookup(open_dir, name).status().sys_errno() == ENOENT);
  }
  // Nor by a link that comes first (its path sorts before /sealed/s)...
  CheckRefused(a.fs->Link(staged, open_dir, "s", other).status(), "k1", kOther);
  CHECK(a.fs->Lookup(open_dir, "s").status().sys_errno() == ENOENT);
  // ...or a link that does not and the unlink of the name that gives the policy.
  uint64_t later = a.MakeDir("z-open");
  REQUIRE(a.fs->Link(staged, later, "s", other).ok());  // the policy of /sealed/s still applies
  CheckRefused(a.fs->Unlink(sealed, "s", other), "k1", kOther);
  CHECK(a.fs->Lookup(sealed, "s").ok());
  CHECK(a.Effective(staged).find("key=k1") != std::string::npos);
  REQUIRE(a.fs->Unlink(later, "s", other).ok());  // that leaves the policy as it was
  // A directory that inherits its key leaves it behind; one with its own attributes takes it along.
  uint64_t sub = a.MakeDir("sub", sealed);
  CheckRefused(a.fs->Rename(sealed, "sub", open_dir, "sub", 0, other), "k1", kOther);
  CHECK(a.fs->Lookup(sealed, "sub")->ino == sub);
  REQUIRE(a.fs->Rename(kRootInode, "also", open_dir, "also", 0, other).ok());
  CHECK(a.Effective(also_sealed).find("key=k1") != std::string::npos);
  REQUIRE(a.fs->Rename(open_dir, "also", kRootInode, "also", 0, other).ok());
  // Into the encrypted tree: sealing their file under k1 needs k1 too.
  uint64_t theirs = a.WriteFile("t", data, open_dir);
  CheckRefused(a.fs->Rename(open_dir, "t", sealed, "t", 0, other), "k1", kOther);
  CheckRefused(a.fs->Rename(open_dir, "t", sealed, "p", RENAME_EXCHANGE, other), "k1", kOther);
  CHECK(a.fs->Lookup(open_dir, "t")->ino == theirs);

  // Changes that leave the keys as they were need no grant: a new name in the same tree,
  // or another directory under the same key.
  REQUIRE(a.fs->Rename(sealed, "p", sealed, "p2", 0, other).ok());
  REQUIRE(a.fs->Rename(sealed, "p2", also_sealed, "p", 0, other).ok());
  REQUIRE(a.fs->Link(staged, also_sealed, "s-too", other).ok());
  REQUIRE(a.fs->Unlink(also_sealed, "s-too", other).ok());
  // Unlinked while open, a file keeps the policy of its last name: removing it changes no key.
  uint64_t unlinked = a.WriteFile("u", data, sealed);
  auto held = a.fs->Open(unlinked, O_RDONLY, granted);
  REQUIRE(held.ok());
  REQUIRE(a.fs->Unlink(sealed, "u", other).ok());
  CHECK(a.Effective(unlinked).find("key=k1") != std::string::npos);
  a.fs->Release(*held);
  a.fs->Forget(unlinked, 1);
  // A granted user may move it out; root may too.
  REQUIRE(a.fs->Rename(also_sealed, "p", open_dir, "p", 0, granted).ok());
  REQUIRE(a.fs->Rename(sealed, "s", open_dir, "s", 0, Caller{}).ok());
  CHECK(a.ReadFile(persisted, data.size()) == data);
  CHECK(a.ReadFile(staged, data.size()) == data);
}
