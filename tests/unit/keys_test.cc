// The keystore (master keys, their sources, who may use them), secret memory, and the file
// data keys the catalog keeps wrapped: made, rotated, bound to their file, erased.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "catalog/catalog.h"
#include "keys/file_keys.h"
#include "keys/keystore.h"
#include "keys/secret_bytes.h"
#include "test_util.h"

using namespace cairn;
using cairn::test::TempDir;

namespace {

void WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}

std::string ReadFile(const std::string& path) {
  std::ostringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

std::string Hex(std::span<const uint8_t> bytes) {
  std::string out;
  for (uint8_t b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

// The VmFlags line of the mapping holding `p` in /proc/self/smaps.
std::string VmFlagsOf(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  auto address = reinterpret_cast<uintptr_t>(p);
  while (std::getline(smaps, line)) {
    uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> start >> dash >> end && dash == '-') inside = start <= address && address < end;
    if (inside && line.starts_with("VmFlags:")) return line;
  }
  return "";
}

// A catalog, and a keystore holding master key k1: what FileKeys works with.
struct KeyedCatalog {
  TempDir dir;
  std::unique_ptr<Catalog> catalog = std::move(*Catalog::Create(dir / "catalog.db", 0, 0, 1));
  std::mutex mutex;
  std::array<uint8_t, 16> archive_id{3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3};
  std::string keystore = dir / "keystore";

  KeyedCatalog() {
    Keystore store(keystore);
    REQUIRE(store.AddVersion(*NewInlineMasterKey("k1")).ok());
    REQUIRE(store.Save().ok());
  }
  std::unique_ptr<FileKeys> Keys() { return std::make_unique<FileKeys>(*catalog, mutex, archive_id, keystore); }
};

}  // namespace

TEST_CASE("Keys: secret memory is left out of core dumps, locked when allowed, and zeroed", "[keys]") {
  SecretBytes secret = SecretBytes::CopyOf(std::vector<uint8_t>(32, 0x42));
  REQUIRE(secret.size() == 32);
  std::string flags = VmFlagsOf(secret.data());
  INFO(flags);
  CHECK(flags.find(" dd") != std::string::npos);  // MADV_DONTDUMP
#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer turns mlock into a no-op
  if (::geteuid() == 0) CHECK(flags.find(" lo") != std::string::npos);  // mlock'ed
#endif
  SecretBytes moved = std::move(secret);
  CHECK(secret.empty());
  CHECK(moved.data()[31] == 0x42);
  auto random = SecretBytes::Random(32);
  REQUIRE(random.ok());
  CHECK(random->bytes().size() == 32);
}

TEST_CASE("Keys: the keystore saves and loads root-only, and refuses a wider mode or a bad line by number",
          "[keys]") {
  TempDir dir;
  std::string path = dir / "keystore";
  Keystore store(path);
  auto k1 = NewInlineMasterKey("k1");
  REQUIRE(k1.ok());
  REQUIRE(store.AddVersion(*k1).ok());
  auto k1b = NewInlineMasterKey("k1");
  REQUIRE(store.AddVersion(*k1b).ok());
  REQUIRE(store.SetGrants("k1", {"uid:1000", "gid:50"}).ok());
  // A file left where the new keystore is written, linked to another: never written through.
  WriteFile(dir / "elsewhere", "untouched", 0644);
  REQUIRE(::link((dir / "elsewhere").c_str(), (path + ".new").c_str()) == 0);
  REQUIRE(store.Save().ok());
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat((dir / "elsewhere").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
  CHECK(st.st_size == 9);

  auto loaded = Keystore::Load(path);
  REQUIRE(loaded.ok());
  REQUIRE(loaded->versions("k1").size() == 2);
  CHECK(loaded->current("k1")->version == 2);
  auto first = MasterKeyOf(*loaded->find("k1", 1));
  REQUIRE(first.ok());
  CHECK(Hex(first->bytes()) == Hex(k1->bytes->bytes()));
  const std::vector<gid_t> primary_1000{1000}, primary_50{50}, primary_2000{2000}, root{0};
  const std::vector<gid_t> supplementary_50{2000, 7, 50};
  CHECK(loaded->Allows("k1", 1000, primary_1000));
  CHECK(loaded->Allows("k1", 2000, primary_50));
  CHECK(loaded->Allows("k1", 2000, supplementary_50));
  CHECK(!loaded->Allows("k1", 2000, primary_2000));
  CHECK(loaded->Allows("k1", 0, root));  // root

  REQUIRE(::chmod(path.c_str(), 0644) == 0);
  auto wide = Keystore::Load(path);
  CHECK(wide.status().message().find("mode is 0644") != std::string::npos);
  CHECK(Keystore::Load(dir / "none").status().IsNotFound());

  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"# fine\nkey k1 1 hex:00\n", "line 2: key k1 version 1: hex: needs 64 hex digits"},
           {"key k1 0 hex:" + std::string(64, 'a') + "\n", "line 1: key k1: the version is not a number"},
           {"key bad/name 1 hex:00\n", "line 1: the key name is not 1..64 letters"},
           {"key k1 1 file:relative\n", "the source is not hex:DIGITS, file:/PATH or command:COMMAND"},
           {"allow k1 uid:x\n", "line 1: key k1: 'uid:x' is not uid:N, gid:N"},
           {"allow k1 uid:01000\n", "line 1: key k1: 'uid:01000' is not uid:N, gid:N"},  // would match no one
           {"allow k1 gid:4294967296\n", "'gid:4294967296' is not uid:N, gid:N"},
           {"secret k1\n", "it starts with neither 'key', 'check' nor 'allow'"},
           {"key k1 " + std::string(64, 'b') + "\n", "the version is not a number"},  // never echoes the digits,
       }) {
    WriteFile(path, text, 0600);
    auto bad = Keystore::Load(path);
    INFO(text << " -> " << bad.status().ToString());
    CHECK(bad.status().message().find(why) != std::string::npos);
    CHECK(bad.status().message().find("bbbbbbbb") == std::string::npos);
  }
}

TEST_CASE("Keys: master keys come from a root-only file or a command, and a failing source is named", "[keys]") {
  TempDir dir;
  std::string hex(64, 'c');
  WriteFile(dir / "master.hex", hex + "\n", 0600);
  WriteFile(dir / "master.raw", std::string(32, '\x11'), 0600);
  WriteFile(dir / "open.hex", hex, 0644);
  MasterKeySource source{"k", 1, MasterKeySource::Kind::kFile, dir / "master.hex", nullptr};
  auto from_hex = MasterKeyOf(source);
  REQUIRE(from_hex.ok());
  CHECK(Hex(from_hex->bytes()) == hex);
  source.location = dir / "master.raw";
  auto from_raw = MasterKeyOf(source);
  REQUIRE(from_raw.ok());
  CHECK(from_raw->data()[0] == 0x11);
  source.location = dir / "open.hex";
  CHECK(MasterKeyOf(source).status().message().find("mode is 0644") != std::string::npos);
  CHECK(MasterKeyOf(source).status().message().find("(chmod 600 " + (dir / "open.hex") + ")") !=
        std::string::npos);

  source.kind = MasterKeySource::Kind::kCommand;
  source.location = "test \"$CAIRN_KEY_NAME\" = k && echo " + hex;
  auto from_command = MasterKeyOf(source);
  REQUIRE(from_command.ok());
  CHECK(Hex(from_command->bytes()) == hex);
  source.location = "exit 3  # --token s3cr3t";  // a command's text stays out of messages: it may hold a secret
  std::string failed = MasterKeyOf(source).status().message();
  CHECK(failed.find("key k version 1: its command: it failed (status 3)") != std::string::npos);
  CHECK(failed.find("s3cr3t") == std::string::npos);
  source.location = "yes " + hex;  // killed by SIGPIPE once cairn stops reading: named for what it did
  CHECK(MasterKeyOf(source).status().message() == "key k version 1: its command: printed too much");
  source.location = "echo not-a-key";
  CHECK(MasterKeyOf(source).status().message().find("gave neither 32 raw bytes nor 64 hex digits") !=
        std::string::npos);
}

TEST_CASE("Keys: a file or command key that gives another key than when it was added is refused", "[keys]") {
  TempDir dir;
  // Known vectors: HMAC-SHA256 of the label under the key, its first 16 bytes.
  CHECK(*MasterKeyCheckValue(SecretBytes(32)) == "f37b1ab4e13d2b9405dee19d31f292af");
  std::string hex(64, 'c');
  auto c = MasterKeyCheckValue(SecretBytes::CopyOf(std::vector<uint8_t>(32, 0xcc)));
  REQUIRE(c.ok());
  CHECK(*c == "2e349c274e4910b3dae0b4cce5648377");

  WriteFile(dir / "master.hex", hex + "\n", 0600);
  MasterKeySource source{"k", 1, MasterKeySource::Kind::kFile, dir / "master.hex", nullptr, *c};
  REQUIRE(MasterKeyOf(source).ok());
  WriteFile(dir / "master.hex", std::string(64, 'd') + "\n", 0600);  // another key where the file was
  std::string refused = MasterKeyOf(source).status().message();
  CHECK(refused ==
        "key k version 1: its file gave another key than the one it gave when the version was added (the check value "
        "in the keystore differs); nothing is read or written with it");
  source.kind = MasterKeySource::Kind::kCommand;
  source.location = "echo " + hex;
  CHECK(MasterKeyOf(source).ok());
  source.location = "echo " + std::string(64, 'e');
  CHECK(MasterKeyOf(source).status().message().starts_with("key k version 1: its command gave another key"));

  // The keystore keeps check values; a key recorded without one is taken as it comes.
  std::string path = dir / "keystore";
  Keystore store(path);
  source.location = "echo " + hex;
  REQUIRE(store.AddVersion(source).ok());
  MasterKeySource old{"old", 0, MasterKeySource::Kind::kFile, dir / "master.hex", nullptr, ""};
  REQUIRE(store.AddVersion(old).ok());
  REQUIRE(store.Save().ok());
  auto loaded = Keystore::Load(path);
  REQUIRE(loaded.ok());
  CHECK(loaded->current("k")->check == *c);
  CHECK(loaded->current("old")->check.empty());
  CHECK(MasterKeyOf(*loaded->current("k")).ok());
  CHECK(MasterKeyOf(*loaded->current("old")).ok());
  std::string upper = *c;  // written by hand or by another tool: hex digits in either case
  std::transform(upper.begin(), upper.end(), upper.begin(), [](char ch) { return std::toupper(ch); });
  WriteFile(path, "key k 1 command:echo " + hex + "\ncheck k 1 " + upper + "\n", 0600);
  auto uppercase = Keystore::Load(path);
  REQUIRE(uppercase.ok());
  CHECK(MasterKeyOf(*uppercase->current("k")).ok());
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"key k 1 file:/x\ncheck k 1 abc\n", "line 2: key k version 1: a check value is 32 hex digits"},
           {"check k 2 " + *c + "\n", "line 1: key k version 2: a check value, but there is no such key"},
           {"key k 1 file:/x\ncheck k 1 " + *c + "\ncheck k 1 " + *c + "\n", "line 3: key k version 1: a check "
                                                                             "value, but it has one already"},
       }) {
    WriteFile(path, text, 0600);
    auto bad = Keystore::Load(path);
    INFO(text << " -> " << bad.status().ToString());
    CHECK(bad.status().message().find(why) != std::string::npos);
  }
}

TEST_CASE("Keys: an inline key whose digits were damaged in the keystore is refused, not used", "[keys]") {
  TempDir dir;
  std::string path = dir / "keystore";
  Keystore store(path);
  auto made = NewInlineMasterKey("k");
  REQUIRE(made.ok());
  auto check = MasterKeyCheckValue(*made->bytes);
  REQUIRE(check.ok());
  CHECK(made->check == *check);
  REQUIRE(store.AddVersion(*made).ok());
  REQUIRE(store.Save().ok());
  std::string text = ReadFile(path);
  CHECK(text.find("check k 1 " + *check + "\n") != std::string::npos);
  auto loaded = Keystore::Load(path);
  REQUIRE(loaded.ok());
  CHECK(MasterKeyOf(*loaded->current("k")).ok());

  size_t digit = text.find("hex:") + 4;  // bit rot or a slip of the hand: one digit changes
  text[digit] = text[digit] == '0' ? '1' : '0';
  WriteFile(path, text, 0600);
  auto damaged = Keystore::Load(path);
  REQUIRE(damaged.ok());
  CHECK(MasterKeyOf(*damaged->current("k")).status().message() ==
        "key k version 1: its digits in the keystore are not those when the version was added (the check value in "
        "the keystore differs); nothing is read or written with it");

  // A keystore from before inline keys had check lines: the key is taken as it is.
  WriteFile(path, "key k 1 hex:" + std::string(64, 'c') + "\n", 0600);
  auto older = Keystore::Load(path);
  REQUIRE(older.ok());
  CHECK(older->current("k")->check.empty());
  CHECK(MasterKeyOf(*older->current("k")).ok());
}

TEST_CASE("Keys: a file's data key is wrapped in the catalog, survives rotation, is bound to its file, and erased",
          "[keys]") {
  KeyedCatalog c;
  auto& catalog = c.catalog;
  auto owned_keys = c.Keys();
  FileKeys& keys = *owned_keys;
  CHECK(keys.ForWriting(7, "k1").status().IsNotFound());  // no such inode: no key is made for it
  InodeRecord file;
  file.mode = 0100644;
  file.nlink = 1;
  for (uint64_t want : {7, 8}) {
    while (true) {
      auto ino = catalog->InsertInode(file);
      REQUIRE(ino.ok());
      if (*ino == want) break;
      REQUIRE(*ino < want);
    }
  }
  auto made = keys.ForWriting(7, "k1");
  REQUIRE(made.ok());
  CHECK((*made)->size() == kDataKeyBytes);
  CHECK(keys.ForWriting(7, "k1")->get() == made->get());  // the same key, not a new one
  auto row = catalog->GetFileKey(7);
  REQUIRE(row.ok());
  CHECK(row->key_name == "k1");
  CHECK(row->master_version == 1);
  CHECK(Hex(row->wrapped).find(Hex((*made)->bytes())) == std::string::npos);  // never in clear
  CHECK(keys.ForWriting(8, "k9").status().message().find("has no key k9") != std::string::npos);
  // Another key= later does not move the file to another master key (nor to its users).
  Keystore two = *Keystore::Load(c.keystore);
  REQUIRE(two.AddVersion(*NewInlineMasterKey("k2")).ok());
  REQUIRE(two.Save().ok());
  CHECK(keys.ForWriting(7, "k2")->get() == made->get());
  CHECK(catalog->GetFileKey(7)->key_name == "k1");

  // Rotation: a new version, every data key re-wrapped, the old version dropped; a fresh
  // reader (nothing cached) still gets the same key.
  auto rotated = Keystore::Load(c.keystore);
  REQUIRE(rotated.ok());
  REQUIRE(rotated->AddVersion(*NewInlineMasterKey("k1")).ok());
  REQUIRE(rotated->Save().ok());
  auto rewrapped = keys.Rewrap("k1");
  REQUIRE(rewrapped.ok());
  CHECK(*rewrapped == 1);
  rotated->DropVersionsBefore("k1", 2);
  REQUIRE(rotated->Save().ok());
  CHECK(catalog->GetFileKey(7)->master_version == 2);
  {
    auto fresh_keys = c.Keys();
    FileKeys& fresh = *fresh_keys;
    auto read = fresh.ForReading(7);
    REQUIRE(read.ok());
    CHECK(Hex((*read)->bytes()) == Hex((*made)->bytes()));
    // The wrapped key of file 7 put on file 8 does not unwrap: it is bound to its file.
    FileKeyRecord moved = *catalog->GetFileKey(7);
    moved.ino = 8;
    REQUIRE(InTransaction(*catalog, [&] { return catalog->PutFileKey(moved); }).ok());
    CHECK(fresh.ForReading(8).status().IsCorruption());
  }

  // Who may use it.
  const std::vector<gid_t> root{0}, user{1000};
  CHECK(keys.Authorize("k1", 0, root).ok());
  Status refused = keys.Authorize("k1", 1000, user);
  CHECK(refused.sys_errno() == EACCES);
  CHECK(keys.CheckSelectable("k3", 0, root).sys_errno() == EINVAL);

  // Crypto-erase: the data keys under k1 are gone, from memory too.
  auto erased = keys.EraseUnder("k1");
  REQUIRE(erased.ok());
  CHECK(*erased == std::vector<uint64_t>{7, 8});
  CHECK(keys.ForReading(7).status().IsNotFound());
  CHECK(catalog->GetFileKey(7).status().IsNotFound());
}

TEST_CASE("Keys: a master key deleted and made again under its name is not served from the daemon's memory",
          "[keys]") {
  KeyedCatalog c;
  auto& catalog = c.catalog;
  InodeRecord file;
  file.mode = 0100644;
  file.nlink = 1;
  auto first = catalog->InsertInode(file);
  auto second = catalog->InsertInode(file);
  REQUIRE((first.ok() && second.ok()));
  auto owned_keys = c.Keys();
  FileKeys& keys = *owned_keys;
  REQUIRE(keys.ForWriting(*first, "k1").ok());  // master k1 version 1 is in memory now
  // cairn key delete k1, then cairn key create k1: version 1 again, other bytes.
  Keystore again = *Keystore::Load(c.keystore);
  again.Drop("k1");
  REQUIRE(again.AddVersion(*NewInlineMasterKey("k1")).ok());
  REQUIRE(again.Save().ok());
  REQUIRE(keys.ForWriting(*second, "k1").ok());
  auto restarted = c.Keys();
  CHECK(restarted->ForReading(*second).ok());  // wrapped by the key the keystore holds
  CHECK(restarted->ForReading(*first).status().IsCorruption());
}

TEST_CASE("Keys: a master key deleted and made again while a command loads it is not used nor kept", "[keys]") {
  KeyedCatalog c;
  InodeRecord file;
  file.mode = 0100644;
  file.nlink = 1;
  auto first = c.catalog->InsertInode(file);
  auto second = c.catalog->InsertInode(file);
  REQUIRE((first.ok() && second.ok()));
  // Version 1 of k1 comes from a slow command (an external KMS).
  WriteFile(c.keystore, "key k1 1 command:sleep 1; echo " + std::string(64, 'a') + "\n", 0600);
  auto owned_keys = c.Keys();
  FileKeys& keys = *owned_keys;
  auto writing = std::async(std::launch::async, [&] { return keys.ForWriting(*first, "k1"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Meanwhile cairn key delete k1, then cairn key create k1: version 1 again, other bytes.
  Keystore again(c.keystore);
  REQUIRE(again.AddVersion(*NewInlineMasterKey("k1")).ok());
  REQUIRE(again.Save().ok());
  REQUIRE(writing.get().ok());
  REQUIRE(keys.ForWriting(*second, "k1").ok());
  // Both wrapped by the key the keystore holds: before, by the old command's, kept in memory.
  auto restarted = c.Keys();
  CHECK(restarted->ForReading(*first).ok());
  CHECK(restarted->ForReading(*second).ok());
}
