#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "array/grid_geometry.h"
#include "grid_test_geometries.h"

using namespace cairn;
using cairn::test::kTestGrids;
using cairn::test::TestGrid;

namespace {

// The roles row by row, one letter per disk: D data, H hP, V vP.
std::vector<std::string> RoleMap(const GridGeometry& g) {
  std::vector<std::string> rows(g.rows());
  for (uint32_t d = 0; d < g.disk_count(); d++) {
    DiskRole role = g.role(d);
    rows[g.row(d)] += role == DiskRole::kData ? 'D' : role == DiskRole::kHorizontalParity ? 'H' : 'V';
  }
  return rows;
}

std::string Refusal(std::string_view text) {
  Result<GridGeometry> geometry = GridGeometry::Parse(text);
  INFO(text);
  REQUIRE(!geometry.ok());
  CHECK(geometry.status().code() == Status::Code::kInvalidArgument);
  return geometry.status().message();
}

bool Contains(const std::string& message, std::string_view part) { return message.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("GridGeometry: role maps written out", "[array]") {
  // hPGs wrap across rows; the hP is the last disk of each run of hn+1.
  CHECK(RoleMap(TestGrid("4x4:2+1")) == std::vector<std::string>{"DDHD", "DHDD", "HDDH", "VVVV"});
  CHECK(RoleMap(TestGrid("6x3:3+1")) == std::vector<std::string>{"DDDHDD", "DHDDDH", "VVVVVV"});
  CHECK(RoleMap(TestGrid("8x4:5+1")) == std::vector<std::string>{"DDDDDHDD", "DDDHDDDD", "DHDDDDDH", "VVVVVVVV"});
  // Runs of 4 in rows of 8: the hPGs happen to line up with the rows.
  CHECK(RoleMap(TestGrid("8x5:3+1")) ==
        std::vector<std::string>{"DDDHDDDH", "DDDHDDDH", "DDDHDDDH", "DDDHDDDH", "VVVVVVVV"});
  // Fig. 4.2 of the thesis: d=48, dn=32, dk=16.
  CHECK(RoleMap(TestGrid("8x6:4+1")) == std::vector<std::string>{"DDDDHDDD", "DHDDDDHD", "DDDHDDDD", "HDDDDHDD",
                                                                 "DDHDDDDH", "VVVVVVVV"});
}

TEST_CASE("GridGeometry: parity disks of a data disk, by example", "[array]") {
  GridGeometry g = TestGrid("4x4:2+1");
  // Disk 3 (row 0, col 3) starts hPG 1 = {3, 4, 5}; its hP 5 sits at row 1, col 1.
  CHECK(g.hpg(3) == 1u);
  CHECK(g.HParity(3) == 5);
  CHECK(g.VParity(3) == 15);
  CHECK(g.VhParity(3) == 13);
  CHECK(g.WriteSet(3) == std::array<uint32_t, 4>{3, 5, 15, 13});
  CHECK(g.WriteSet(0) == std::array<uint32_t, 4>{0, 2, 12, 14});
  CHECK(std::vector<uint32_t>(g.HpgMembers(1).begin(), g.HpgMembers(1).end()) == std::vector<uint32_t>{3, 4, 5});
  CHECK(std::vector<uint32_t>(g.VpgMembers(1).begin(), g.VpgMembers(1).end()) ==
        std::vector<uint32_t>{1, 5, 9, 13});
  CHECK(std::vector<uint32_t>(g.data_disks().begin(), g.data_disks().end()) ==
        std::vector<uint32_t>{0, 1, 3, 4, 6, 7, 9, 10});
  CHECK(g.bucket(9) == 6u);
  CHECK(g.bucket(2) == std::nullopt);
  CHECK(g.hpg(12) == std::nullopt);
  CHECK(g.VParity(12) == 12);  // a vP disk is its own
  CHECK(g.HParity(8) == 8);    // so is an hP disk
  CHECK(g.VhParity(8) == 12);

  GridGeometry fig42 = TestGrid("8x6:4+1");
  CHECK(fig42.WriteSet(5) == std::array<uint32_t, 4>{5, 9, 45, 41});  // B0: hP B+ = 9 on the next row
  CHECK(fig42.WriteSet(38) == std::array<uint32_t, 4>{38, 39, 46, 47});
}

TEST_CASE("GridGeometry: counts and usable fraction", "[array]") {
  struct Expected {
    std::string_view text;
    uint32_t hpgs, data, parity;
  };
  for (Expected e : {Expected{"4x4:2+1", 4, 8, 8}, Expected{"6x3:3+1", 3, 9, 9}, Expected{"8x4:5+1", 4, 20, 12},
                     Expected{"8x5:3+1", 8, 24, 16}, Expected{"8x6:4+1", 8, 32, 16}, Expected{"8x8:6+1", 8, 48, 16},
                     Expected{"12x6:9+1", 6, 54, 18}}) {
    INFO(e.text);
    GridGeometry g = TestGrid(e.text);
    CHECK(g.ToString() == e.text);
    CHECK(g.hpg_count() == e.hpgs);
    CHECK(g.data_disk_count() == e.data);
    CHECK(g.parity_disk_count() == e.parity);
    CHECK(g.usable_fraction() == Approx(double(e.data) / (e.data + e.parity)));
  }
  // seed-lonestar.md §2.3: 8x8 (6+1) with 16+1 IDR gives 70.6 %.
  CHECK(TestGrid("8x8:6+1").usable_fraction() * 16 / 17 == Approx(0.706).epsilon(0.001));
}

TEST_CASE("GridGeometry: structural invariants of every test grid", "[array]") {
  for (std::string_view text : kTestGrids) {
    INFO(text);
    GridGeometry g = TestGrid(text);
    const uint32_t x = g.columns(), y = g.rows();
    REQUIRE(g.disk_count() == x * y);
    CHECK(g.hpg_count() * g.hpg_size() == x * (y - 1));
    CHECK(g.data_disk_count() + g.parity_disk_count() == g.disk_count());

    std::vector<uint32_t> hpg_seen(g.disk_count(), 0), vpg_seen(g.disk_count(), 0);
    for (uint32_t h = 0; h < g.hpg_count(); h++) {
      std::span<const uint32_t> members = g.HpgMembers(h);
      REQUIRE(members.size() == g.hn() + 1);
      std::set<uint32_t> columns;
      for (size_t i = 0; i < members.size(); i++) {
        uint32_t m = members[i];
        hpg_seen[m]++;
        columns.insert(g.column(m));
        CHECK(g.hpg(m) == h);
        CHECK(m == h * g.hpg_size() + i);  // a run of consecutive cells
        CHECK(g.role(m) == (i + 1 < members.size() ? DiskRole::kData : DiskRole::kHorizontalParity));
      }
      CHECK(columns.size() == members.size());  // hn+1 < X: no two in one column
    }
    for (uint32_t c = 0; c < g.vpg_count(); c++) {
      std::span<const uint32_t> members = g.VpgMembers(c);
      REQUIRE(members.size() == y);
      for (uint32_t r = 0; r < y; r++) {
        vpg_seen[members[r]]++;
        CHECK(members[r] == g.DiskAt(r, c));
        CHECK(g.vpg(members[r]) == c);
      }
      CHECK(g.role(members.back()) == DiskRole::kVerticalParity);
    }

    uint32_t data = 0, hp = 0, vp = 0;
    for (uint32_t d = 0; d < g.disk_count(); d++) {
      CHECK(g.DiskAt(g.row(d), g.column(d)) == d);
      CHECK(vpg_seen[d] == 1);
      DiskRole role = g.role(d);
      CHECK((role == DiskRole::kVerticalParity) == (g.row(d) == y - 1));
      CHECK(hpg_seen[d] == (role == DiskRole::kVerticalParity ? 0u : 1u));
      if (role == DiskRole::kVerticalParity) {
        vp++;
        continue;
      }
      if (role == DiskRole::kHorizontalParity) {
        hp++;
        CHECK(g.HParity(d) == d);
        continue;
      }
      REQUIRE(data < g.data_disks().size());
      CHECK(g.data_disks()[data] == d);
      CHECK(g.bucket(d) == data);
      data++;
      uint32_t h = g.HParity(d), v = g.VParity(d), vh = g.VhParity(d);
      CHECK(g.role(h) == DiskRole::kHorizontalParity);
      CHECK(g.hpg(h) == g.hpg(d));
      CHECK(g.column(h) != g.column(d));
      CHECK(g.role(v) == DiskRole::kVerticalParity);
      CHECK(g.row(v) == y - 1);
      CHECK(g.column(v) == g.column(d));
      CHECK(g.role(vh) == DiskRole::kVerticalParity);
      CHECK(g.column(vh) == g.column(h));
      std::array<uint32_t, 4> writes = g.WriteSet(d);
      CHECK(writes == std::array<uint32_t, 4>{d, h, v, vh});
      CHECK(std::set<uint32_t>(writes.begin(), writes.end()).size() == 4);
    }
    CHECK(data == g.data_disk_count());
    CHECK(g.data_disks().size() == g.data_disk_count());
    CHECK(hp == g.hpg_count());
    CHECK(vp == x);
  }
}

TEST_CASE("GridGeometry: text form round trip", "[array]") {
  for (std::string_view text : kTestGrids) CHECK(TestGrid(text).ToString() == text);
  Result<GridGeometry> created = GridGeometry::Create(8, 5, 3);
  REQUIRE(created.ok());
  CHECK(created->ToString() == "8x5:3+1");
  CHECK(created->hk() == 1);
  CHECK(TestGrid("64x64:15+1").disk_count() == 4096);  // the largest grid allowed
}

TEST_CASE("GridGeometry: refused geometries name the rule they break", "[array]") {
  CHECK(Refusal("1x4:1+1") == "lonestar geometry 1x4:1+1: X = 1: a grid needs at least 2 columns (X >= 2)");
  CHECK(Refusal("4x1:2+1") ==
        "lonestar geometry 4x1:2+1: Y = 1: a grid needs at least 2 rows (Y >= 2): data rows above the row of "
        "vertical parity disks");
  CHECK(Refusal("8x5:3+2") ==
        "lonestar geometry 8x5:3+2: hk = 2: a horizontal parity group has exactly one parity disk (hk must be 1)");
  CHECK(Refusal("8x5:0+1") ==
        "lonestar geometry 8x5:0+1: hn = 0: a horizontal parity group needs at least one data disk (hn >= 1)");
  CHECK(Refusal("8x5:7+1") ==
        "lonestar geometry 8x5:7+1: hn+1 = 8 is not less than X = 8 (hn+1 < X), so that no two disks of a "
        "horizontal parity group share a column");
  CHECK(Refusal("8x6:5+1") ==
        "lonestar geometry 8x6:5+1: X*(Y-1) = 40 is not divisible by hn+1 = 6: horizontal parity groups must tile "
        "the rows above the vertical parity row exactly");
  CHECK(Refusal("65x64:3+1") ==
        "lonestar geometry 65x64:3+1: X*Y = 4160 disks: a grid has at most 4096 (X*Y <= 4096)");
  // Smallest cases of each rule, and numbers near the top of uint32 (no overflow).
  CHECK(Contains(Refusal("0x0:0+0"), "X >= 2"));
  CHECK(Contains(Refusal("2x2:1+1"), "hn+1 < X"));
  CHECK(Contains(Refusal("3x3:2+1"), "hn+1 < X"));
  CHECK(Contains(Refusal("4x3:2+1"), "not divisible by hn+1 = 3"));
  CHECK(Contains(Refusal("4294967295x4294967295:1+1"), "X*Y = 18446744065119617025 disks"));
  CHECK(Contains(Refusal("8x5:4294967295+1"), "hn+1 = 4294967296 is not less than X = 8"));
  CHECK(Contains(Refusal("8x5:3+0"), "hk must be 1"));

  for (std::string_view malformed :
       {"", "8x5", "8x5:3", "8x5:3+", "x5:3+1", "8X5:3+1", "8x5:3+1 ", " 8x5:3+1", "08x5:3+1", "8x05:3+1",
        "8x5:3+01", "+8x5:3+1", "-8x5:3+1", "8x5:-3+1", "8x5(3+1)", "8*5:3+1", "8x5:3+1+1",
        "4294967296x5:3+1", "8\xc3\x97" "5:3+1"}) {
    std::string message = Refusal(malformed);
    CHECK(message == "lonestar geometry '" + std::string(malformed) + "' is not of the form XxY:HN+1 (e.g. 8x5:3+1)");
  }
}
