// The plugin loader and the built-in compress plugins, loaded from the build tree with dlopen.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "codec/plugin_loader.h"
#include "codec/transform_chain.h"
#include "codec/transform_registry.h"
#include "policy/write_plan.h"
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
  CHECK_FALSE(IsTransformRegistered("test-old-abi"));
  CHECK(LoadPlugins("/nonexistent/plugins").status().IsNotFound());
}
