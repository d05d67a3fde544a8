// The LoneStar grids the array tests run on (seed-lonestar.md §2.3), and a helper to build them.
#pragma once

#include <catch2/catch.hpp>

#include <array>
#include <string_view>

#include "array/grid_geometry.h"

namespace cairn::test {

// Small grids whose failure sets can be enumerated: hPGs wrapping across rows (4x4, 6x3, 8x4, 8x6)
// and aligned to them (8x5); hPG smaller than the vPG (4x4, 8x5, 8x6) and larger (6x3, 8x4).
constexpr std::array<std::string_view, 5> kTestGrids = {"4x4:2+1", "6x3:3+1", "8x4:5+1", "8x5:3+1", "8x6:4+1"};

// The geometry of a valid text form; fails the test otherwise.
inline GridGeometry TestGrid(std::string_view text) {
  Result<GridGeometry> geometry = GridGeometry::Parse(text);
  INFO(text << ": " << geometry.status().ToString());
  REQUIRE(geometry.ok());
  return *geometry;
}

}  // namespace cairn::test
