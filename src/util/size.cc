#include "util/size.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace cairn {

Result<uint64_t> ParseSize(std::string_view text) {
  std::string_view digits = text;
  size_t end = 0;
  while (end < digits.size() && (std::isdigit(static_cast<unsigned char>(digits[end])) || digits[end] == '.')) end++;
  if (end == 0) {
    return Status::InvalidArgument(fmt::format("'{}' is not a size (expected e.g. 4096, 64K, 4M, 2G)", text));
  }
  std::string suffix;
  for (char c : digits.substr(end)) suffix += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  uint64_t unit = 1;
  if (suffix.empty() || suffix == "B") unit = 1;
  else if (suffix == "K" || suffix == "KB" || suffix == "KIB") unit = 1ull << 10;
  else if (suffix == "M" || suffix == "MB" || suffix == "MIB") unit = 1ull << 20;
  else if (suffix == "G" || suffix == "GB" || suffix == "GIB") unit = 1ull << 30;
  else if (suffix == "T" || suffix == "TB" || suffix == "TIB") unit = 1ull << 40;
  else {
    return Status::InvalidArgument(
        fmt::format("'{}' has an unknown size suffix '{}' (allowed: K, M, G, T)", text, digits.substr(end)));
  }
  const char* first = digits.data();
  const char* last = digits.data() + end;
  auto bad_number = [&] { return Status::InvalidArgument(fmt::format("'{}' is not a size (bad number)", text)); };
  auto too_large = [&] { return Status::InvalidArgument(fmt::format("'{}' is too large", text)); };
  if (digits.substr(0, end).find('.') == std::string_view::npos) {  // whole: exact at any size
    uint64_t number = 0;
    auto [ptr, ec] = std::from_chars(first, last, number);
    if (ec == std::errc::result_out_of_range) return too_large();
    if (ec != std::errc() || ptr != last) return bad_number();
    if (number > std::numeric_limits<uint64_t>::max() / unit) return too_large();
    return number * unit;
  }
  double number = 0;
  auto [ptr, ec] = std::from_chars(first, last, number);
  if (ec != std::errc() || ptr != last) return bad_number();
  double bytes = number * static_cast<double>(unit);
  if (bytes >= 0x1p53) {  // past that a double is no longer exact to the byte
    return Status::InvalidArgument(
        fmt::format("'{}' is too large for a fraction: write it as a whole number (of a smaller unit)", text));
  }
  if (bytes != std::floor(bytes)) {
    return Status::InvalidArgument(fmt::format("'{}' is not a whole number of bytes", text));
  }
  return static_cast<uint64_t>(bytes);
}

std::optional<uint64_t> ParseDecimal(std::string_view text, uint64_t minimum, uint64_t maximum) {
  uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  // (from_chars takes neither a sign nor a space; an empty text fails it)
  if (ec != std::errc() || ptr != text.data() + text.size() || n < minimum || n > maximum) return std::nullopt;
  return n;
}

std::string FormatSize(uint64_t bytes) {
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    unit++;
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

}  // namespace cairn
