// GridGeometry is the layout of a LoneStar disk group: an X×Y grid of disks whose bottom row holds
// the vertical parity (vP) disks and whose other rows are tiled by horizontal parity groups (hPGs).
// Pure arithmetic on an immutable value; safe to share between threads.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/options.h"
#include "cairn/status.h"

namespace cairn {

// Layout rule (seed-lonestar.md §2.3). Disk index = row * X + col, rows 0..Y-1, cols 0..X-1.
//
//   - Row Y-1 holds the X vP disks. The vertical parity group (vPG) of column c is every disk of
//     that column, the vP last; vPG index = column.
//   - The X*(Y-1) cells above are tiled in row-major order by runs of hn+1 consecutive cells, a run
//     wrapping from the end of one row into the next. Run g is hPG g: hn data disks (buckets), then
//     its hP disk. So hPG g is the disks g*(hn+1) .. g*(hn+1)+hn, the last of them its hP.
//   - hn+1 < X keeps the disks of one hPG in distinct columns (and so in distinct vPGs).
//
// For a data disk D: hP(D) is the parity of D's hPG, vP(D) the vP of D's column and vhP(D) the vP
// of hP(D)'s column. A write to D updates exactly D, hP(D), vP(D) and vhP(D); all four differ.
//
// Example 4x4:2+1 (D data, H hP, V vP):   D D H D / D H D D / H D D H / V V V V
enum class DiskRole : uint8_t {
  kData = 0,              // a bucket: holds files, unstriped
  kHorizontalParity = 1,  // hP: XOR of the data disks of its hPG
  kVerticalParity = 2,    // vP: XOR of every other disk of its column
};

// "data", "hP" or "vP".
std::string_view DiskRoleName(DiskRole role);

// The most disks (X*Y) a grid may have: its disks are disks of the archive.
constexpr uint32_t kGridMaxDisks = kMaxDisks;

class GridGeometry {
 public:
  // Checks the rules and builds the layout. InvalidArgument names the rule broken: X >= 2,
  // Y >= 2, hn >= 1, hk == 1, hn+1 < X, X*(Y-1) divisible by hn+1, X*Y <= kGridMaxDisks.
  static Result<GridGeometry> Create(uint32_t columns, uint32_t rows, uint32_t hn, uint32_t hk = 1);

  // Parses the text form "XxY:HN+HK", e.g. "8x5:3+1": decimal numbers without sign, leading
  // zeros or spaces. Then the rules of Create(). Parse(g.ToString()) gives g back.
  static Result<GridGeometry> Parse(std::string_view text);

  // The canonical text form, e.g. "8x5:3+1".
  std::string ToString() const;

  uint32_t columns() const { return columns_; }  // X
  uint32_t rows() const { return rows_; }        // Y
  uint32_t hn() const { return hn_; }            // data disks per hPG
  uint32_t hk() const { return 1; }              // parity disks per hPG
  uint32_t hpg_size() const { return hn_ + 1; }  // disks per hPG
  uint32_t vpg_size() const { return rows_; }    // disks per vPG (a column, vP included)

  uint32_t disk_count() const { return columns_ * rows_; }
  uint32_t hpg_count() const { return columns_ * (rows_ - 1) / hpg_size(); }
  uint32_t vpg_count() const { return columns_; }
  uint32_t data_disk_count() const { return hpg_count() * hn_; }           // dn
  uint32_t parity_disk_count() const { return hpg_count() + columns_; }  // dk: hP + vP disks
  // dn / (dn + dk): the share of raw capacity that holds data (before intra-disk redundancy).
  double usable_fraction() const { return static_cast<double>(data_disk_count()) / disk_count(); }

  // Per disk. REQUIRES: disk < disk_count().
  DiskRole role(uint32_t disk) const;
  uint32_t row(uint32_t disk) const { return disk / columns_; }
  uint32_t column(uint32_t disk) const { return disk % columns_; }
  // The hPG holding `disk`; nullopt for a vP disk, which is in no hPG.
  std::optional<uint32_t> hpg(uint32_t disk) const;
  // The vPG holding `disk`: its column.
  uint32_t vpg(uint32_t disk) const { return column(disk); }
  // The position of a data disk among data_disks() (its bucket number); nullopt for parity disks.
  std::optional<uint32_t> bucket(uint32_t disk) const;

  // REQUIRES: row < rows(), column < columns().
  uint32_t DiskAt(uint32_t row, uint32_t column) const { return row * columns_ + column; }

  // The parity disks of `disk`. HParity and VhParity REQUIRE role(disk) != kVerticalParity
  // (an hP disk is its own hP). VParity is the vP of the disk's column (a vP disk's is itself).
  uint32_t HParity(uint32_t disk) const;
  uint32_t VParity(uint32_t disk) const { return DiskAt(rows_ - 1, column(disk)); }
  uint32_t VhParity(uint32_t disk) const { return VParity(HParity(disk)); }
  // The disks a write to data disk `disk` touches, in the serialized write order d, hP, vP, vhP.
  // REQUIRES: role(disk) == kData.
  std::array<uint32_t, 4> WriteSet(uint32_t disk) const;

  // Members of hPG `hpg` (< hpg_count()): its hn data disks in index order, then its hP.
  std::span<const uint32_t> HpgMembers(uint32_t hpg) const;
  // Members of vPG `vpg` (< vpg_count()): the disks of column vpg top to bottom, the vP last.
  std::span<const uint32_t> VpgMembers(uint32_t vpg) const;
  // The data disks (buckets) in index order.
  std::span<const uint32_t> data_disks() const { return data_disks_; }

 private:
  GridGeometry(uint32_t columns, uint32_t rows, uint32_t hn);

  uint32_t columns_;
  uint32_t rows_;
  uint32_t hn_;
  std::vector<uint32_t> by_row_;      // 0 .. disk_count()-1: hPG g is a slice of it
  std::vector<uint32_t> by_column_;   // column-major order: vPG c is a slice of it
  std::vector<uint32_t> data_disks_;  // the buckets in index order
};

}  // namespace cairn
