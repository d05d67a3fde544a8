#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "array/grid_geometry.h"
#include "group/lonestar_placer.h"
#include "group/placer.h"

using namespace cairn;

namespace {

// Places with a reserve that succeeds except on `full` candidates, recording every call.
struct Run {
  std::vector<size_t> chosen;
  std::vector<size_t> asked;
};

Run Place(const PlacementRequest& request, const std::vector<PlacementCandidate>& candidates,
          const std::vector<size_t>& full = {}) {
  Run run;
  run.chosen = FillBalancedPlacer().Place(request, candidates, [&](size_t i) {
    run.asked.push_back(i);
    return std::find(full.begin(), full.end(), i) == full.end();
  });
  return run;
}

}  // namespace

TEST_CASE("FillBalancedPlacer: most free space first, ties in candidate order", "[placer]") {
  std::vector<PlacementCandidate> disks = {{"d0", 10}, {"d1", 30}, {"d2", 20}, {"d3", 30}};
  CHECK(Place({1, {}}, disks).chosen == std::vector<size_t>{1});
  CHECK(Place({3, {}}, disks).chosen == std::vector<size_t>{1, 3, 2});
  CHECK(Place({4, {}}, disks).chosen == std::vector<size_t>{1, 3, 2, 0});
  std::vector<PlacementCandidate> even = {{"a", 5}, {"b", 5}, {"c", 5}};
  CHECK(Place({2, {}}, even).chosen == std::vector<size_t>{0, 1});
}

TEST_CASE("FillBalancedPlacer: one chunk per failure domain, avoided domains skipped", "[placer]") {
  std::vector<PlacementCandidate> disks = {{"shelf-a", 40}, {"shelf-a", 30}, {"shelf-b", 20}, {"shelf-c", 10}};
  Run run = Place({3, {}}, disks);
  CHECK(run.chosen == std::vector<size_t>{0, 2, 3});
  CHECK(run.asked == std::vector<size_t>{0, 2, 3});  // disk 1 is never asked: its shelf has a chunk
  // Relocation: the other chunks are on shelf-a and shelf-c.
  CHECK(Place({1, {"shelf-a", "shelf-c"}}, disks).chosen == std::vector<size_t>{2});
  CHECK(Place({1, {"shelf-a", "shelf-b", "shelf-c"}}, disks).chosen.empty());
}

TEST_CASE("FillBalancedPlacer: a disk without room falls through to the next", "[placer]") {
  std::vector<PlacementCandidate> disks = {{"d0", 50}, {"d1", 40}, {"d2", 30}};
  Run run = Place({2, {}}, disks, {0});  // most free bytes, but too fragmented for the chunk
  CHECK(run.chosen == std::vector<size_t>{1, 2});
  CHECK(run.asked == std::vector<size_t>{0, 1, 2});
  // A full domain does not block its other disks.
  std::vector<PlacementCandidate> shelves = {{"a", 50}, {"a", 40}, {"b", 30}};
  CHECK(Place({2, {}}, shelves, {0}).chosen == std::vector<size_t>{1, 2});
}

TEST_CASE("FillBalancedPlacer: fewer than asked when candidates run out", "[placer]") {
  std::vector<PlacementCandidate> disks = {{"a", 50}, {"a", 40}, {"b", 30}};
  CHECK(Place({3, {}}, disks).chosen == std::vector<size_t>{0, 2});
  CHECK(Place({2, {}}, disks, {0, 1, 2}).chosen.empty());
  CHECK(Place({2, {}}, {}).chosen.empty());
  CHECK(Place({0, {}}, disks).asked.empty());
}

TEST_CASE("LoneStarPlacer: mirror copies on buckets of distinct columns, parity groups and failure domains",
          "[placer]") {
  auto geometry = GridGeometry::Parse("4x4:2+1");
  REQUIRE(geometry.ok());
  std::vector<uint32_t> disks(16);
  std::iota(disks.begin(), disks.end(), 0);  // disk n at grid position n
  LoneStarPlacer placer(*geometry, disks);
  // Buckets 0 (column 0, hPG 0) and 6 (column 2, hPG 2) have the most room, on one shelf.
  std::vector<PlacementCandidate> buckets = {{"shelf-a", 100, 0}, {"shelf-a", 90, 6}, {"shelf-b", 10, 3},
                                             {"shelf-c", 5, 9}, {"shelf-d", 80, 1}};
  for (const PlacementCandidate& c : buckets) REQUIRE(geometry->role(c.disk) == DiskRole::kData);
  auto place = [&](const PlacementRequest& request) {
    return placer.Place(request, buckets, [](size_t) { return true; });
  };
  // Bucket 1 shares bucket 0's parity group; bucket 6 its shelf.
  CHECK(place({2, {}}) == std::vector<size_t>{0, 2});
  CHECK(place({3, {}}) == std::vector<size_t>{0, 2, 3});
  CHECK(place({1, {"shelf-a"}}) == std::vector<size_t>{4});
  // A copy moved away from bucket 6 (column 2, hPG 2): not to bucket 9's column nor 7's hPG.
  PlacementRequest moved{1, {"shelf-a"}};
  moved.beside_disks = {6};
  buckets = {{"shelf-b", 100, 10}, {"shelf-c", 90, 7}, {"shelf-d", 10, 3}};
  CHECK(geometry->column(10) == geometry->column(6));
  CHECK(geometry->hpg(7) == geometry->hpg(6));
  CHECK(place(moved) == std::vector<size_t>{2});
}

TEST_CASE("LoneStarPlacer: mirror copies go where all fit, not where the fullest-first pick strands the last",
          "[placer]") {
  auto geometry = GridGeometry::Parse("4x4:2+1");
  REQUIRE(geometry.ok());
  std::vector<uint32_t> disks(16);
  std::iota(disks.begin(), disks.end(), 0);
  LoneStarPlacer placer(*geometry, disks);
  // The 8 buckets (column, hPG): 0 (0,0) 1 (1,0) 3 (3,1) 4 (0,1) 6 (2,2) 7 (3,2) 9 (1,3) 10 (2,3).
  // Only {0,3,6,9} and {1,4,7,10} take 4 copies; 0, 1 and 3 are fuller than the rest, so most
  // room first took 4, 6 and 9 and found no bucket for the fourth copy.
  std::vector<PlacementCandidate> buckets;
  for (uint32_t p : {0u, 1u, 3u, 4u, 6u, 7u, 9u, 10u}) {
    buckets.push_back({"d" + std::to_string(p), p <= 3 ? 50u : 100u, p});
  }
  std::vector<size_t> asked;
  auto chosen = placer.Place({4, {}}, buckets, [&](size_t i) {
    asked.push_back(i);
    return true;
  });
  std::vector<uint32_t> got;
  for (size_t i : chosen) got.push_back(buckets[i].disk);
  CHECK(got == std::vector<uint32_t>{4, 7, 10, 1});
  CHECK(asked == chosen);  // nothing reserved that is not kept
  // Bucket 7 turns out to have no room (its free space in pieces too small): the copy placed
  // on 4 stays, and the others take what they still can beside it, 3 in all (the group then
  // refuses the extent as a whole and lets the room go).
  got.clear();
  std::vector<uint32_t> tried;
  chosen = placer.Place({4, {}}, buckets, [&](size_t i) {
    tried.push_back(buckets[i].disk);
    return buckets[i].disk != 7;
  });
  for (size_t i : chosen) got.push_back(buckets[i].disk);
  CHECK(tried == std::vector<uint32_t>{4, 7, 10, 1});
  CHECK(got == std::vector<uint32_t>{4, 10, 1});
  // Five copies never fit four columns: as many as can be, four.
  CHECK(placer.Place({5, {}}, buckets, [](size_t) { return true; }).size() == 4);
}
