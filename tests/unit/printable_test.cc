#include <catch2/catch.hpp>

#include <string>

#include "util/printable.h"

using namespace cairn;

TEST_CASE("Escaped: control bytes cannot start a new log line") {
  CHECK(Escaped("plain text, 100% ascii") == "plain text, 100% ascii");
  CHECK(Escaped("a\nb\rc\td") == "a\\nb\\rc\\td");
  CHECK(Escaped("fake\n2026-01-01 00:00:00.000 cairn error: x") == "fake\\n2026-01-01 00:00:00.000 cairn error: x");
  CHECK(Escaped(std::string("nul\0end", 7)) == "nul\\x00end");
  CHECK(Escaped("\x1b[2J\x7f") == "\\x1b[2J\\x7f");
  CHECK(Escaped("back\\slash") == "back\\\\slash");  // so "\n" in a name differs from an escaped newline
}

TEST_CASE("Escaped: valid UTF-8 stays, C1 controls and broken sequences are escaped") {
  std::string utf8 = "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x93\xa6";  // café 日本 📦
  CHECK(Escaped(utf8) == utf8);
  CHECK(Escaped("\xc2\x85") == "\\xc2\\x85");            // U+0085 NEXT LINE
  CHECK(Escaped("\xc2\xa0") == "\xc2\xa0");              // U+00A0 is printable
  CHECK(Escaped("\xc3") == "\\xc3");                     // truncated sequence
  CHECK(Escaped("\xc0\xaf") == "\\xc0\\xaf");            // overlong '/'
  CHECK(Escaped("\xed\xa0\x80") == "\\xed\\xa0\\x80");   // UTF-16 surrogate
  CHECK(Escaped("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  CHECK(Escaped("\xff") == "\\xff");
}

TEST_CASE("ControlsEscaped: controls and broken UTF-8 escaped, backslashes and the rest kept") {
  CHECK(ControlsEscaped("a\\b \xe6\x97\xa5") == "a\\b \xe6\x97\xa5");
  CHECK(ControlsEscaped("a\nb\tc\x1b[2J") == "a\\x0ab\\x09c\\x1b[2J");
  CHECK(ControlsEscaped("\x9b" "2J\xff\xc3(") == "\\x9b2J\\xff\\xc3(");
}

TEST_CASE("Abbreviated: long text is cut and says how long it was") {
  CHECK(Abbreviated("short") == "short");
  CHECK(Abbreviated(std::string(200, 'x')) == std::string(200, 'x'));
  CHECK(Abbreviated(std::string(5000, 'x')) == std::string(200, 'x') + "…(5000 bytes)");
  CHECK(Abbreviated("abcdef", 3) == "abc…(6 bytes)");
}

TEST_CASE("JsonString: quotes, backslashes, controls and broken UTF-8 escaped; valid UTF-8 kept") {
  CHECK(JsonString("/t/we\"ird\\x") == "\"/t/we\\\"ird\\\\x\"");
  CHECK(JsonString("a\nb\x01") == "\"a\\u000ab\\u0001\"");
  CHECK(JsonString("caf\xc3\xa9") == "\"caf\xc3\xa9\"");
  CHECK(JsonString("\xff") == "\"\\u00ff\"");
  CHECK(JsonString("") == "\"\"");
}
