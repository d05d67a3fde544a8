#include <catch2/catch.hpp>

#include "pipeline/member_metadata.h"

using namespace cairn;

TEST_CASE("MemberTableOf: holes become ascending runs beside the segments") {
  DescribedInodes described;
  described.nodes[7].ino = 7;
  described.nodes[7].paths = {"f"};
  described.nodes[9].ino = 9;
  described.nodes[9].paths = {"g"};
  described.ancestors[7] = {};
  described.ancestors[9] = {};
  std::set<uint64_t> listed;
  // out of order, one given twice, a file deleted before it was described (8)
  MemberTable table = MemberTableOf(described, {{7, {4, 0, 10}}},
                                    {{7, 3}, {7, 1}, {7, 2}, {9, 0}, {7, 6}, {7, 2}, {8, 1}}, listed);
  REQUIRE(table.nodes.size() == 2);
  CHECK(table.nodes[0].ino == 7);
  CHECK(table.nodes[0].segments == std::vector<MemberSegment>{{4, 0, 10}});
  CHECK(table.nodes[0].holes == std::vector<MemberHoleRun>{{1, 3}, {6, 1}});
  CHECK(table.nodes[1].ino == 9);
  CHECK(table.nodes[1].segments.empty());
  CHECK(table.nodes[1].holes == std::vector<MemberHoleRun>{{0, 1}});
}
