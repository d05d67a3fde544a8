// Parsing and printing of byte sizes such as "4M" or "1.5G" (powers of 1024).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cairn/status.h"

namespace cairn {

// Accepts a decimal number with an optional K, M, G or T suffix (also KiB/MiB/...).
Result<uint64_t> ParseSize(std::string_view text);
// A count written in decimal digits only (no sign, space or prefix) within [minimum, maximum].
std::optional<uint64_t> ParseDecimal(std::string_view text, uint64_t minimum, uint64_t maximum);
// 4194304 -> "4.0 MiB"; values below 1 KiB print as "N B".
std::string FormatSize(uint64_t bytes);

}  // namespace cairn
