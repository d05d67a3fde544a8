// The plugin loader and the built-in compress plugins, loaded from the build tree with dlopen.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "codec/incompressible.h"
#include "codec/plugin_loader.h"
#include "codec/transform_chain.h"
#include "codec/transform_registry.h"
#include "policy/write_plan.h"
#include <filesystem>

#include <fmt/format.h>

#include "test_util.h"

using namespace cairn;
using cairn::test::RandomBytes;

namespace {

void LoadBuiltIns() {
  auto modules = LoadPlugins(CAIRN_BUILD_PLUGIN_DIR);
  REQUIRE(modules.ok());
  for (const PluginModule& m : *modules) {
    INFO(m.path << ": " << m.status.ToString());
    CHECK(m.status.ok());
  }
}

// Real text: cairn's own sources, repeated up to n bytes.
std::vector<uint8_t> TextBytes(size_t n) {
  std::ifstream in(std::string(CAIRN_SOURCE_DIR) + "/src/array/lonestar_array.cc", std::ios::binary);
  std::vector<uint8_t> source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(!source.empty());
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; i++) out[i] = source[i % source.size()];
  return out;
}

}  // namespace

TEST_CASE("Plugins: zstd, lz4 and auto round-trip random and real data of every size", "[plugin]") {
  LoadBuiltIns();
  for (const char* value : {"lz4", "zstd", "zstd-1", "zstd-19", "auto"}) {
    auto stage = CompressionStage(value);
    REQUIRE(stage.ok());
    auto chain = TransformChain::ForWriting({*stage});
    REQUIRE(chain.ok());
    CHECK(chain->Stamp().starts_with(stage->name + "@1"));
    for (size_t n : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{65537}, size_t{4} << 20}) {
      for (bool text : {false, true}) {
        INFO("compress=" << value << ", " << n << " bytes of " << (text ? "text" : "random data"));
        std::vector<uint8_t> logical = text ? TextBytes(n) : RandomBytes(n, static_cast<uint32_t>(n + 1));
        auto stored = chain->Encode(logical);
        REQUIRE(stored.ok());
        if (text && n >= 65537) CHECK(stored->size() < n / 2);
        if (!text) CHECK(stored->size() == n + 1);  // random data is stored raw, behind one byte
        auto read = TransformChain::FromStamp(chain->Stamp());
        REQUIRE(read.ok());
        auto back = read->Decode(*stored, n);
        REQUIRE(back.ok());
        CHECK(*back == logical);
        if (stored->size() > 9) {  // a damaged frame is an error, never other bytes
          std::vector<uint8_t> cut(stored->begin(), stored->end() - 5);
          CHECK_FALSE(read->Decode(cut, n).ok());
        }
      }
    }
  }
}

TEST_CASE("Plugins: a bad parameter, a missing plugin and a wrong stage are refused by name", "[plugin]") {
  LoadBuiltIns();
  auto bad_level = TransformForWriting("zstd", "level=99");
  CHECK(bad_level.status().message().find("level is 1..") != std::string::npos);
  auto lz4_params = TransformForWriting("lz4", "fast=1");
  CHECK(lz4_params.status().message().find("lz4 takes no parameters") != std::string::npos);
  auto missing = TransformChain::FromStamp("gone@1");
  CHECK(missing.status().code() == Status::Code::kNotSupported);
  CHECK(missing.status().message().find("'gone' is not installed") != std::string::npos);
  CHECK(*StageOfTransform("zstd") == TransformStage::kCompress);
  // A damaged frame that claims a huge length is refused, without making room for it.
  auto chain = TransformChain::FromStamp("zstd@1:level=3");
  REQUIRE(chain.ok());
  std::vector<uint8_t> claims(64, 0xab);
  claims[0] = 1;
  for (int i = 0; i < 8; i++) claims[1 + i] = static_cast<uint8_t>((uint64_t{1} << 40) >> (8 * i));
  auto refused = chain->Decode(claims, 4096);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("would decode 1099511627776 bytes, at most 4096") != std::string::npos);
  claims[0] = 7;  // no frame type it writes
  CHECK(chain->Decode(claims, 4096).status().message().find("frame type 7") != std::string::npos);
}

TEST_CASE("Plugins: a module of another ABI version or with a name already loaded is refused", "[plugin]") {
  LoadBuiltIns();  // lz4 first
  auto modules = LoadPlugins(CAIRN_REFUSED_PLUGIN_DIR);
  REQUIRE(modules.ok());
  REQUIRE(modules->size() == 2);
  int refused_abi = 0, refused_duplicate = 0;
  for (const PluginModule& m : *modules) {
    INFO(m.path << ": " << m.status.ToString());
    CHECK_FALSE(m.status.ok());
    if (m.status.message().find("speaks plugin ABI version 0, this cairn speaks 1") != std::string::npos) refused_abi++;
    if (m.status.message().find("a plugin named 'lz4' is loaded already") != std::string::npos) refused_duplicate++;
    CHECK(m.status.message().find(m.path) != std::string::npos);
  }
  CHECK(refused_abi == 1);
  CHECK(refused_duplicate == 1);
  CHECK_FALSE(StageOfTransform("test-old-abi").ok());
  CHECK(LoadPlugins("/nonexistent/plugins").status().IsNotFound());
}

TEST_CASE("Plugins: a directory or module that others may write is not loaded", "[plugin]") {
  test::TempDir tmp;
  std::filesystem::path open_dir = std::filesystem::path(tmp.path()) / "open";
  std::filesystem::create_directory(open_dir);
  std::filesystem::permissions(open_dir, std::filesystem::perms::all);  // 0777
  auto refused = LoadPlugins(open_dir.string());
  CHECK(refused.status().message().find("is not loaded: others may write it (mode 0777)") != std::string::npos);

  std::filesystem::path dir = std::filesystem::path(tmp.path()) / "plugins";
  std::filesystem::create_directory(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                        std::filesystem::perms::group_exec);
  std::filesystem::path module = dir / "cairn-lz4.so";
  std::filesystem::copy_file(std::string(CAIRN_BUILD_PLUGIN_DIR) + "/lz4/cairn-lz4.so", module);
  std::filesystem::permissions(module, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                           std::filesystem::perms::others_write);
  auto modules = LoadPlugins(dir.string());
  REQUIRE(modules.ok());
  REQUIRE(modules->size() == 1);
  CHECK((*modules)[0].status.message() == fmt::format("plugin {}: refused: others may write it (mode 0602)",
                                                     module.string()));
}

namespace {

// A seal for segment version `version` of file `file` in archive `archive`, under `key`.
SealContext Seal(const std::vector<uint8_t>& key, uint64_t file, uint64_t version, uint8_t archive = 0xa5) {
  SealContext seal;
  seal.archive_id.fill(archive);
  seal.file_id = file;
  seal.version = version;
  seal.key = key;
  return seal;
}

bool Contains(const std::vector<uint8_t>& haystack, const std::vector<uint8_t>& needle) {
  return std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end()) != haystack.end();
}

}  // namespace

TEST_CASE("Plugins: aes-256-gcm round-trips random and real data of every size, alone and after zstd",
          "[plugin][encrypt]") {
  LoadBuiltIns();
  const std::vector<uint8_t> key = RandomBytes(32, 7);
  for (const auto& stages : std::vector<std::vector<TransformChain::Stage>>{{{"aes-256-gcm", ""}},
                                                                           {{"zstd", "level=3"}, {"aes-256-gcm", ""}}}) {
    auto chain = TransformChain::ForWriting(stages);
    REQUIRE(chain.ok());
    CHECK(chain->needs_key());
    CHECK(chain->Stamp().ends_with("aes-256-gcm@1"));
    for (size_t n : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{65537}, size_t{4} << 20}) {
      for (bool text : {false, true}) {
        INFO(chain->Stamp() << ", " << n << " bytes of " << (text ? "text" : "random data"));
        std::vector<uint8_t> logical = text ? TextBytes(n) : RandomBytes(n, static_cast<uint32_t>(n + 3));
        auto stored = chain->Encode(logical, Seal(key, 42, 9));
        REQUIRE(stored.ok());
        if (stages.size() == 1) CHECK(stored->size() == n + 28);  // nonce and tag
        if (n >= 64) CHECK(!Contains(*stored, std::vector<uint8_t>(logical.begin(), logical.begin() + 64)));
        auto again = chain->Encode(logical, Seal(key, 42, 9));
        REQUIRE(again.ok());
        CHECK(*again != *stored);  // a fresh nonce every time, even for the same bytes and place
        auto decoded = chain->Decode(*stored, n, Seal(key, 42, 9));
        REQUIRE(decoded.ok());
        CHECK(*decoded == logical);
      }
    }
  }
}

TEST_CASE("Plugins: aes-256-gcm refuses a wrong key, a flipped bit, a swapped or replayed extent, another file or "
          "archive, and no key",
          "[plugin][encrypt]") {
  LoadBuiltIns();
  auto chain = TransformChain::ForWriting({{"aes-256-gcm", ""}});
  REQUIRE(chain.ok());
  const std::vector<uint8_t> key = RandomBytes(32, 1);
  const std::vector<uint8_t> segment_a = TextBytes(100000), segment_b = RandomBytes(100000, 2);
  // File 5: segment A written as extent 7, rewritten as extent 10; segment B is extent 11.
  auto old_a = chain->Encode(segment_a, Seal(key, 5, 7));
  auto a = chain->Encode(segment_a, Seal(key, 5, 10));
  auto b = chain->Encode(segment_b, Seal(key, 5, 11));
  REQUIRE((old_a.ok() && a.ok() && b.ok()));
  REQUIRE(chain->Decode(*a, a->size() - 28, Seal(key, 5, 10)).ok());
  auto refused = [&](const std::vector<uint8_t>& stored, const SealContext& seal) {
    auto decoded = chain->Decode(stored, segment_a.size(), seal);
    INFO(decoded.status().ToString());
    return !decoded.ok() && decoded.status().IsCorruption();
  };
  CHECK(refused(*a, Seal(RandomBytes(32, 99), 5, 10)));  // wrong key
  for (size_t bit : {size_t{0}, size_t{12 * 8 + 3}, size_t{50000 * 8}, (a->size() - 1) * 8 + 7}) {
    std::vector<uint8_t> flipped = *a;  // nonce, first ciphertext byte, middle, tag
    flipped[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    INFO("bit " << bit);
    CHECK(refused(flipped, Seal(key, 5, 10)));
  }
  CHECK(refused(*b, Seal(key, 5, 10)));      // B's bytes where the catalog expects A (swapped)
  CHECK(refused(*old_a, Seal(key, 5, 10)));  // A's older version replayed in its place
  CHECK(refused(*a, Seal(key, 6, 10)));      // another file's
  CHECK(refused(*a, Seal(key, 5, 10, 0x5a)));  // another archive's
  std::vector<uint8_t> truncated(a->begin(), a->begin() + 20);
  CHECK(refused(truncated, Seal(key, 5, 10)));
  auto no_key = chain->Decode(*a, segment_a.size(), Seal({}, 5, 10));
  CHECK(no_key.status().message().find("needs the file's data key") != std::string::npos);
  CHECK(!chain->Encode(segment_a, Seal({}, 5, 10)).ok());
}

TEST_CASE("compress=auto: payloads that look incompressible skip the compressor", "[plugin]") {
  LoadBuiltIns();
  // The guess: order-0 entropy of samples over the payload.
  CHECK(LooksIncompressible(RandomBytes(4 << 20, 1)));
  CHECK(LooksIncompressible(RandomBytes(16 << 10, 2)));
  CHECK_FALSE(LooksIncompressible({}));                      // nothing to tell from
  CHECK_FALSE(LooksIncompressible(RandomBytes(12 << 10, 3)));  // too little to tell
  CHECK_FALSE(LooksIncompressible(TextBytes(4 << 20)));
  CHECK_FALSE(LooksIncompressible(std::vector<uint8_t>(4 << 20, 0)));
  std::vector<uint8_t> hex = RandomBytes(1 << 20, 4);  // random, but 4 bits a byte
  for (uint8_t& byte : hex) byte = "0123456789abcdef"[byte & 15];
  CHECK_FALSE(LooksIncompressible(hex));
  std::vector<uint8_t> mostly_text = TextBytes(4 << 20);  // a random tail does not decide for all
  auto noise = RandomBytes(1 << 20, 5);
  std::copy(noise.begin(), noise.end(), mostly_text.end() - noise.size());
  CHECK_FALSE(LooksIncompressible(mostly_text));

  // The plan: compress=auto keeps the rest of the chain for such payloads.
  ResolvedPolicy policy;
  for (PolicyKey key : kAllPolicyKeys) policy.fields.push_back({key, DefaultPolicyValue(key, 4 << 20), "default"});
  policy.fields[static_cast<size_t>(PolicyKey::kCompress)].value = "auto";
  auto plan = PlanWrite(policy);
  REQUIRE(plan.ok());
  CHECK((*plan)->chain.Stamp() == "zstd@1:level=3,probe");
  REQUIRE((*plan)->chain_if_incompressible);
  CHECK((*plan)->chain_if_incompressible->empty());
  policy.fields[static_cast<size_t>(PolicyKey::kEncrypt)].value = "aes-256-gcm";  // encrypted all the same
  policy.fields[static_cast<size_t>(PolicyKey::kKey)].value = "k1";
  plan = PlanWrite(policy);
  REQUIRE(plan.ok());
  REQUIRE((*plan)->chain_if_incompressible);
  CHECK((*plan)->chain_if_incompressible->Stamp() == "aes-256-gcm@1");
  CHECK((*plan)->chain_if_incompressible->needs_key());
  policy.fields[static_cast<size_t>(PolicyKey::kCompress)].value = "zstd";
  plan = PlanWrite(policy);
  REQUIRE(plan.ok());
  CHECK_FALSE((*plan)->chain_if_incompressible);
}
