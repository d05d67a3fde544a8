#include "util/printable.h"

#include <fmt/format.h>

namespace cairn {
namespace {

// Length of the valid UTF-8 sequence at text[i] for a code point >= U+00A0, or 0.
size_t PrintableUtf8Length(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char lead = byte(i);
  size_t length = lead >= 0xf0 && lead <= 0xf4 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 ? 2 : 0;
  if (length == 0 || lead > 0xf4 || i + length > text.size()) return 0;
  uint32_t code = lead & (0x7f >> length);
  for (size_t k = 1; k < length; k++) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    code = code << 6 | (byte(i + k) & 0x3f);
  }
  static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  bool valid = code >= kSmallest[length] && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff);
  return valid && code >= 0xa0 ? length : 0;
}

// `text` with printable ASCII kept (a backslash put before those in `quoted`), valid
// printable UTF-8 kept, and every other byte written as `other` makes it.
template <typename Other>
std::string Transcribed(std::string_view text, std::string_view quoted, Other other) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      if (quoted.find(static_cast<char>(c)) != std::string_view::npos) out += '\\';
      out += static_cast<char>(c);
      i++;
    } else if (size_t length = c >= 0x80 ? PrintableUtf8Length(text, i) : 0; length > 0) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out += other(c);
      i++;
    }
  }
  return out;
}

}  // namespace

std::string Abbreviated(std::string_view text, size_t limit) {
  if (text.size() <= limit) return std::string(text);
  return fmt::format("{}…({} bytes)", text.substr(0, limit), text.size());
}

std::string Escaped(std::string_view text) {
  return Transcribed(text, "\\", [](unsigned char c) -> std::string {
    return c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : fmt::format("\\x{:02x}", c);
  });
}

std::string ControlsEscaped(std::string_view text) {
  return Transcribed(text, "", [](unsigned char c) { return fmt::format("\\x{:02x}", c); });
}

std::string JsonString(std::string_view text) {
  return "\"" + Transcribed(text, "\"\\", [](unsigned char c) { return fmt::format("\\u{:04x}", c); }) + "\"";
}

}  // namespace cairn
