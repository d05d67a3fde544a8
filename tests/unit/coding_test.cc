#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "util/coding.h"
#include "util/size.h"

using namespace cairn;

namespace {
uint32_t CrcOf(const std::string& s) { return Crc32c({reinterpret_cast<const uint8_t*>(s.data()), s.size()}); }
}  // namespace

TEST_CASE("Crc32c: known vectors") {
  // RFC 3720 (iSCSI) B.4 and the standard check value.
  CHECK(CrcOf("123456789") == 0xE3069283u);
  CHECK(CrcOf("") == 0u);
  std::vector<uint8_t> zeros(32, 0);
  CHECK(Crc32c(zeros) == 0x8A9136AAu);
  std::vector<uint8_t> ones(32, 0xff);
  CHECK(Crc32c(ones) == 0x62A8AB43u);
  std::vector<uint8_t> ascending(32);
  for (int i = 0; i < 32; i++) ascending[i] = static_cast<uint8_t>(i);
  CHECK(Crc32c(ascending) == 0x46DD794Eu);
}

TEST_CASE("Crc32c: continuing a CRC equals one pass") {
  std::string text = "the quick brown fox jumps over the lazy dog";
  auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  uint32_t first = Crc32c({bytes, 10});
  CHECK(Crc32c({bytes + 10, text.size() - 10}, first) == CrcOf(text));
}

TEST_CASE("MaskCrc: round trip and differs from input") {
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xffffffffu}) {
    CHECK(UnmaskCrc(MaskCrc(crc)) == crc);
    CHECK(MaskCrc(crc) != crc);
  }
}

TEST_CASE("Fixed-width little-endian coding") {
  uint8_t buf[8];
  PutFixed64(buf, 0x0102030405060708ull);
  CHECK(buf[0] == 0x08);
  CHECK(buf[7] == 0x01);
  CHECK(GetFixed64(buf) == 0x0102030405060708ull);
  PutFixed32(buf, 0xdeadbeef);
  CHECK(GetFixed32(buf) == 0xdeadbeefu);
  PutFixed16(buf, 0xbeef);
  CHECK(GetFixed16(buf) == 0xbeef);
}

TEST_CASE("ParseDecimal: digits only, within bounds") {
  CHECK(ParseDecimal("4", 1, 10) == 4u);
  CHECK(ParseDecimal("10", 1, 10) == 10u);
  for (const char* bad : {"", " 4", "+4", "-4", "0x4", "4x", "4 ", "11", "0", "99999999999999999999999"}) {
    INFO(bad);
    CHECK_FALSE(ParseDecimal(bad, 1, 10).has_value());
  }
}

TEST_CASE("ParseSize: suffixes and errors") {
  CHECK(*ParseSize("4096") == 4096u);
  CHECK(*ParseSize("4K") == 4096u);
  CHECK(*ParseSize("4M") == 4u << 20);
  CHECK(*ParseSize("2G") == 2ull << 30);
  CHECK(*ParseSize("1T") == 1ull << 40);
  CHECK(*ParseSize("1.5K") == 1536u);
  CHECK(*ParseSize("64kib") == 65536u);
  CHECK_FALSE(ParseSize("").ok());
  CHECK_FALSE(ParseSize("M").ok());
  CHECK_FALSE(ParseSize("4X").ok());
  CHECK_FALSE(ParseSize("0.3").ok());
  CHECK(ParseSize("4Q").status().message().find("unknown size suffix") != std::string::npos);
  // Whole numbers are exact at any size (a double is not past 2^53); past 2^64 they are refused.
  CHECK(*ParseSize("9007199254740993") == 9007199254740993ull);
  CHECK(*ParseSize("18446744073709551615") == 18446744073709551615ull);
  CHECK(*ParseSize("8388607T") == 8388607ull << 40);
  CHECK(ParseSize("18446744073709551616").status().message().find("too large") != std::string::npos);
  CHECK(ParseSize("16777216T").status().message().find("too large") != std::string::npos);
  CHECK(ParseSize("8192.5T").status().message().find("too large for a fraction") != std::string::npos);
  CHECK_FALSE(ParseSize("1.2.3K").ok());
  CHECK(FormatSize(512) == "512 B");
  CHECK(FormatSize(4u << 20) == "4.0 MiB");
}
