// GridGeometry: the rules a LoneStar grid must follow, its text form, and the role arithmetic.
#include "array/grid_geometry.h"

#include <cassert>
#include <charconv>
#include <numeric>

#include <fmt/format.h>

namespace cairn {

namespace {

// Takes a decimal number without sign or leading zeros off the front of `text`.
std::optional<uint32_t> TakeNumber(std::string_view& text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') digits++;
  if (digits == 0 || (digits > 1 && text[0] == '0')) return std::nullopt;
  uint32_t n = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, n);
  if (ec != std::errc()) return std::nullopt;  // out of range
  text.remove_prefix(digits);
  return n;
}

// Takes `c` off the front of `text`.
bool TakeChar(std::string_view& text, char c) {
  if (text.empty() || text[0] != c) return false;
  text.remove_prefix(1);
  return true;
}

// Why the numbers cannot make a grid, or "" when they can.
std::string BrokenRule(uint32_t x, uint32_t y, uint32_t hn, uint32_t hk) {
  if (x < 2) return fmt::format("X = {}: a grid needs at least 2 columns (X >= 2)", x);
  if (y < 2) {
    return fmt::format(
        "Y = {}: a grid needs at least 2 rows (Y >= 2): data rows above the row of vertical parity disks", y);
  }
  if (uint64_t{x} * y > kGridMaxDisks) {
    return fmt::format("X*Y = {} disks: a grid has at most {} (X*Y <= {})", uint64_t{x} * y, kGridMaxDisks,
                       kGridMaxDisks);
  }
  if (hk != 1) return fmt::format("hk = {}: a horizontal parity group has exactly one parity disk (hk must be 1)", hk);
  if (hn < 1) return fmt::format("hn = {}: a horizontal parity group needs at least one data disk (hn >= 1)", hn);
  if (uint64_t{hn} + 1 >= x) {
    return fmt::format("hn+1 = {} is not less than X = {} (hn+1 < X), so that no two disks of a horizontal parity "
                       "group share a column",
                       uint64_t{hn} + 1, x);
  }
  if (x * (y - 1) % (hn + 1) != 0) {
    return fmt::format("X*(Y-1) = {} is not divisible by hn+1 = {}: horizontal parity groups must tile the rows "
                       "above the vertical parity row exactly",
                       x * (y - 1), hn + 1);
  }
  return "";
}

}  // namespace

std::string_view DiskRoleName(DiskRole role) {
  switch (role) {
    case DiskRole::kData:
      return "data";
    case DiskRole::kHorizontalParity:
      return "hP";
    case DiskRole::kVerticalParity:
      return "vP";
  }
  return "?";
}

Result<GridGeometry> GridGeometry::Create(uint32_t columns, uint32_t rows, uint32_t hn, uint32_t hk) {
  std::string broken = BrokenRule(columns, rows, hn, hk);
  if (!broken.empty()) {
    return Status::InvalidArgument(fmt::format("lonestar geometry {}x{}:{}+{}: {}", columns, rows, hn, hk, broken));
  }
  return GridGeometry(columns, rows, hn);
}

Result<GridGeometry> GridGeometry::Parse(std::string_view text) {
  std::string_view rest = text;
  std::optional<uint32_t> x, y, hn, hk;
  bool well_formed = (x = TakeNumber(rest)) && TakeChar(rest, 'x') && (y = TakeNumber(rest)) && TakeChar(rest, ':') &&
                     (hn = TakeNumber(rest)) && TakeChar(rest, '+') && (hk = TakeNumber(rest)) && rest.empty();
  if (!well_formed) {
    return Status::InvalidArgument(
        fmt::format("lonestar geometry '{}' is not of the form XxY:HN+1 (e.g. 8x5:3+1)", text));
  }
  return Create(*x, *y, *hn, *hk);
}

std::string GridGeometry::ToString() const { return fmt::format("{}x{}:{}+{}", columns_, rows_, hn_, hk()); }

GridGeometry::GridGeometry(uint32_t columns, uint32_t rows, uint32_t hn)
    : columns_(columns), rows_(rows), hn_(hn), by_row_(disk_count()) {
  std::iota(by_row_.begin(), by_row_.end(), 0u);
  by_column_.reserve(disk_count());
  for (uint32_t c = 0; c < columns_; c++) {
    for (uint32_t r = 0; r < rows_; r++) by_column_.push_back(DiskAt(r, c));
  }
  data_disks_.reserve(data_disk_count());
  for (uint32_t d = 0; d < disk_count(); d++) {
    if (role(d) == DiskRole::kData) data_disks_.push_back(d);
  }
}

DiskRole GridGeometry::role(uint32_t disk) const {
  assert(disk < disk_count());
  if (disk >= columns_ * (rows_ - 1)) return DiskRole::kVerticalParity;
  return disk % hpg_size() == hn_ ? DiskRole::kHorizontalParity : DiskRole::kData;
}

std::optional<uint32_t> GridGeometry::hpg(uint32_t disk) const {
  if (role(disk) == DiskRole::kVerticalParity) return std::nullopt;
  return disk / hpg_size();
}

std::optional<uint32_t> GridGeometry::bucket(uint32_t disk) const {
  if (role(disk) != DiskRole::kData) return std::nullopt;
  return disk / hpg_size() * hn_ + disk % hpg_size();
}

uint32_t GridGeometry::HParity(uint32_t disk) const {
  assert(role(disk) != DiskRole::kVerticalParity);
  return disk / hpg_size() * hpg_size() + hn_;
}

std::array<uint32_t, 4> GridGeometry::WriteSet(uint32_t disk) const {
  assert(role(disk) == DiskRole::kData);
  return {disk, HParity(disk), VParity(disk), VhParity(disk)};
}

std::span<const uint32_t> GridGeometry::HpgMembers(uint32_t hpg) const {
  assert(hpg < hpg_count());
  return std::span<const uint32_t>(by_row_).subspan(size_t{hpg} * hpg_size(), hpg_size());
}

std::span<const uint32_t> GridGeometry::VpgMembers(uint32_t vpg) const {
  assert(vpg < vpg_count());
  return std::span<const uint32_t>(by_column_).subspan(size_t{vpg} * rows_, rows_);
}

}  // namespace cairn
