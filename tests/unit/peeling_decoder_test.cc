#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "array/grid_geometry.h"
#include "array/peeling_decoder.h"
#include "grid_test_geometries.h"

using namespace cairn;
using cairn::test::kTestGrids;
using cairn::test::TestGrid;

namespace {

using Disks = std::vector<uint32_t>;

// The four-disk patterns no peeling can undo (seed-lonestar.md §2.3, thesis Fig. 4.6).
enum class Pattern {
  kNone,
  kEp1,  // a rectangle: two hPGs with two failed disks each, the four in the same two columns
  kEp2,  // two disks of one hPG plus the vP of each one's column
};

// Classifies a 4-set straight from the layout, without the decoder.
Pattern Classify(const GridGeometry& g, const Disks& disks) {
  if (disks.size() != 4) return Pattern::kNone;
  std::vector<uint32_t> columns, hpgs;
  uint32_t vps = 0;
  for (uint32_t d : disks) {
    columns.push_back(g.column(d));
    if (auto h = g.hpg(d)) {
      hpgs.push_back(*h);
    } else {
      vps++;
    }
  }
  auto in_pairs = [](std::vector<uint32_t> v) {  // every value exactly twice
    std::sort(v.begin(), v.end());
    for (size_t i = 0; i < v.size(); i += 2) {
      if (v[i] != v[i + 1] || (i + 2 < v.size() && v[i + 2] == v[i])) return false;
    }
    return true;
  };
  if (!in_pairs(columns) || hpgs.size() % 2 != 0 || !in_pairs(hpgs)) return Pattern::kNone;
  if (vps == 0) return Pattern::kEp1;  // two hPGs of two each, in two columns of two each
  return Pattern::kEp2;                // vps == 2: one hPG pair, and a vP under each of them
}

// True when some four of the disks form EP1 or EP2.
bool HasBadFourSet(const GridGeometry& g, const Disks& disks) {
  for (size_t skip = 0; skip < disks.size(); skip++) {
    Disks four;
    for (size_t i = 0; i < disks.size(); i++) {
      if (i != skip) four.push_back(disks[i]);
    }
    if (Classify(g, four) != Pattern::kNone) return true;
  }
  return false;
}

std::span<const uint32_t> Members(const GridGeometry& g, ParityGroupKind kind, uint32_t group) {
  return kind == ParityGroupKind::kHorizontal ? g.HpgMembers(group) : g.VpgMembers(group);
}

uint32_t LostIn(const GridGeometry& g, const Disks& lost, ParityGroupKind kind, uint32_t group) {
  auto in_group = [&](uint32_t d) {
    return kind == ParityGroupKind::kHorizontal ? g.hpg(d) == group : g.vpg(d) == group;
  };
  return static_cast<uint32_t>(std::count_if(lost.begin(), lost.end(), in_group));
}

// What is wrong with `plan` for `failed` (sorted, distinct), or "" when nothing is. Replays the plan:
// every step rebuilds a lost disk from a group in which it was the only lost member when its wave
// began, reading exactly the group's other members; the smaller such group is used; a wave takes
// every disk it can; what stays lost is stuck (each of its groups has two lost members or more).
std::string PlanProblem(const GridGeometry& g, const Disks& failed, const RecoveryPlan& plan) {
  Disks lost = failed;      // as the steps run
  Disks at_wave = failed;   // as the current wave began
  uint32_t wave = 0;
  size_t wave_steps = 0;
  auto rebuildable = [&](uint32_t d, ParityGroupKind* kind) {
    bool by_h = g.hpg(d) && LostIn(g, at_wave, ParityGroupKind::kHorizontal, *g.hpg(d)) == 1;
    bool by_v = LostIn(g, at_wave, ParityGroupKind::kVertical, g.vpg(d)) == 1;
    *kind = by_h && (!by_v || g.hpg_size() <= g.vpg_size()) ? ParityGroupKind::kHorizontal
                                                             : ParityGroupKind::kVertical;
    return by_h || by_v;
  };
  auto wave_complete = [&]() -> std::string {
    size_t expected = 0;
    for (uint32_t d : at_wave) {
      ParityGroupKind kind;
      expected += rebuildable(d, &kind);
    }
    if (expected == wave_steps) return "";
    return fmt::format("wave {} rebuilt {} of {} rebuildable", wave, wave_steps, expected);
  };
  for (const RecoveryStep& step : plan.steps()) {
    if (step.wave != wave) {
      if (step.wave != wave + 1) return fmt::format("wave {} after {}", step.wave, wave);
      if (std::string problem = wave_complete(); !problem.empty()) return problem;
      wave = step.wave;
      wave_steps = 0;
      at_wave = lost;
    }
    wave_steps++;
    auto where = std::find(lost.begin(), lost.end(), step.disk);
    if (where == lost.end()) return fmt::format("disk {} rebuilt but not lost", step.disk);
    ParityGroupKind expected_kind;
    if (!rebuildable(step.disk, &expected_kind)) return fmt::format("disk {} rebuilt too early", step.disk);
    if (step.kind != expected_kind) return fmt::format("disk {} rebuilt from the larger group", step.disk);
    uint32_t group = step.kind == ParityGroupKind::kHorizontal ? *g.hpg(step.disk) : g.vpg(step.disk);
    if (step.group != group) return fmt::format("disk {} from group {}, not its own {}", step.disk, step.group, group);
    Disks expected_reads;
    for (uint32_t m : Members(g, step.kind, group)) {
      if (m != step.disk) expected_reads.push_back(m);
    }
    std::span<const uint32_t> reads = plan.reads(step);
    if (!std::equal(reads.begin(), reads.end(), expected_reads.begin(), expected_reads.end())) {
      return fmt::format("disk {} reads {} instead of {}", step.disk, reads, expected_reads);
    }
    lost.erase(where);
  }
  if (std::string problem = wave_complete(); !problem.empty()) return problem;
  if (lost != plan.lost()) return fmt::format("left {} lost, plan says {}", lost, plan.lost());
  if (plan.recoverable() != lost.empty()) return "recoverable() disagrees with lost()";
  at_wave = lost;
  for (uint32_t d : lost) {
    ParityGroupKind kind;
    if (rebuildable(d, &kind)) return fmt::format("disk {} left lost but rebuildable", d);
  }
  return "";
}

struct Census {
  uint64_t sets = 0;
  uint64_t unrecoverable = 0;
  uint64_t ep1 = 0;
  uint64_t ep2 = 0;
  uint64_t problems = 0;  // plans PlanProblem() finds fault with, or patterns that disagree
};

// Plans every `k`-disk failure set of `g` and checks each plan. For k = 4, unrecoverable must be
// exactly EP1 or EP2; for k = 5, exactly the supersets of those.
Census Exhaust(const GridGeometry& g, uint32_t k) {
  Census census;
  PeelingDecoder decoder(g);
  RecoveryPlan plan;
  Disks failed(k);
  for (uint32_t i = 0; i < k; i++) failed[i] = i;
  const uint32_t n = g.disk_count();
  while (true) {
    census.sets++;
    if (!decoder.Plan(failed, &plan).ok()) FAIL(fmt::format("{}: refused {}", g.ToString(), failed));
    bool bad = !plan.recoverable();
    census.unrecoverable += bad;
    std::string problem = PlanProblem(g, failed, plan);
    if (k == 4) {
      Pattern pattern = Classify(g, failed);
      census.ep1 += pattern == Pattern::kEp1;
      census.ep2 += pattern == Pattern::kEp2;
      if (bad != (pattern != Pattern::kNone)) problem = "recoverable or not, against the EP1/EP2 patterns";
    } else if (k == 5 && bad != HasBadFourSet(g, failed)) {
      problem = "recoverable or not, against holding an EP1/EP2 4-set";
    } else if (k < 4 && bad) {
      problem = "fewer than 4 disks unrecoverable";
    }
    if (!problem.empty()) {
      census.problems++;
      if (census.problems <= 5) FAIL_CHECK(g.ToString() << " failed " << fmt::format("{}", failed) << ": " << problem);
    }
    // Next k-subset in lexicographic order.
    int32_t i = static_cast<int32_t>(k) - 1;
    while (i >= 0 && failed[i] == n - k + i) i--;
    if (i < 0) break;
    failed[i]++;
    for (uint32_t j = i + 1; j < k; j++) failed[j] = failed[j - 1] + 1;
  }
  return census;
}

// The single plan for `failed`, checked by PlanProblem.
RecoveryPlan Planned(const GridGeometry& g, Disks failed) {
  Result<RecoveryPlan> plan = PlanRecovery(g, std::set<uint32_t>(failed.begin(), failed.end()));
  REQUIRE(plan.ok());
  std::sort(failed.begin(), failed.end());
  CHECK(PlanProblem(g, failed, *plan) == "");
  return std::move(plan).value();
}

Disks Reads(const RecoveryPlan& plan, size_t step) {
  std::span<const uint32_t> reads = plan.reads(plan.steps().at(step));
  return Disks(reads.begin(), reads.end());
}

}  // namespace

TEST_CASE("PeelingDecoder: one lost disk comes from its smaller group", "[array]") {
  // 4x4:2+1: hPG of 3 < vPG of 4.
  GridGeometry g = TestGrid("4x4:2+1");
  RecoveryPlan plan = Planned(g, {0});
  REQUIRE(plan.steps().size() == 1);
  CHECK(plan.recoverable());
  CHECK(plan.steps()[0].disk == 0);
  CHECK(plan.steps()[0].kind == ParityGroupKind::kHorizontal);
  CHECK(plan.steps()[0].group == 0);
  CHECK(Reads(plan, 0) == Disks{1, 2});
  // A vP disk has only its column.
  plan = Planned(g, {13});
  CHECK(plan.steps()[0].kind == ParityGroupKind::kVertical);
  CHECK(Reads(plan, 0) == Disks{1, 5, 9});

  // 6x3:3+1: vPG of 3 < hPG of 4, so even an hP disk comes from its column.
  GridGeometry tall = TestGrid("6x3:3+1");
  plan = Planned(tall, {3});
  CHECK(plan.steps()[0].kind == ParityGroupKind::kVertical);
  CHECK(plan.steps()[0].group == 3);
  CHECK(Reads(plan, 0) == Disks{9, 15});

  // 8x4:3+1: both hold 4 disks; the tie goes to the hPG.
  GridGeometry tie = TestGrid("8x4:3+1");
  plan = Planned(tie, {9});
  CHECK(plan.steps()[0].kind == ParityGroupKind::kHorizontal);
  CHECK(Reads(plan, 0) == Disks{8, 10, 11});

  // Every single disk of every test grid.
  for (std::string_view text : kTestGrids) {
    GridGeometry grid = TestGrid(text);
    for (uint32_t d = 0; d < grid.disk_count(); d++) {
      plan = Planned(grid, {d});
      REQUIRE(plan.steps().size() == 1);
      bool vp = grid.role(d) == DiskRole::kVerticalParity;
      CHECK(plan.steps()[0].kind == (!vp && grid.hpg_size() <= grid.vpg_size() ? ParityGroupKind::kHorizontal
                                                                               : ParityGroupKind::kVertical));
    }
  }
}

TEST_CASE("PeelingDecoder: the larger group when the smaller one lost two", "[array]") {
  GridGeometry g = TestGrid("4x4:2+1");
  RecoveryPlan plan = Planned(g, {0, 1});  // both in hPG 0
  REQUIRE(plan.steps().size() == 2);
  CHECK(plan.steps()[0].kind == ParityGroupKind::kVertical);
  CHECK(Reads(plan, 0) == Disks{4, 8, 12});
  CHECK(Reads(plan, 1) == Disks{5, 9, 13});
  CHECK(plan.steps()[1].wave == 0);  // independent: may run in parallel
}

TEST_CASE("PeelingDecoder: peeling in waves through both dimensions", "[array]") {
  // 4x4:2+1, lost 0, 1 (hPG 0) and 4 (hPG 1, column 0 with disk 0). Disk 0 is stuck until one of
  // its groups has it alone: wave 0 rebuilds 1 (its column) and 4 (its hPG), wave 1 rebuilds 0.
  GridGeometry g = TestGrid("4x4:2+1");
  RecoveryPlan plan = Planned(g, {4, 0, 1});
  REQUIRE(plan.steps().size() == 3);
  CHECK(plan.recoverable());
  const std::vector<RecoveryStep>& s = plan.steps();
  CHECK((s[0].disk == 1 && s[0].wave == 0 && s[0].kind == ParityGroupKind::kVertical));
  CHECK((s[1].disk == 4 && s[1].wave == 0 && s[1].kind == ParityGroupKind::kHorizontal && s[1].group == 1));
  CHECK((s[2].disk == 0 && s[2].wave == 1 && s[2].kind == ParityGroupKind::kHorizontal && s[2].group == 0));
  CHECK(Reads(plan, 0) == Disks{5, 9, 13});
  CHECK(Reads(plan, 1) == Disks{3, 5});
  CHECK(Reads(plan, 2) == Disks{1, 2});
}

TEST_CASE("PeelingDecoder: EP1 and EP2 stay lost, the rest is still rebuilt", "[array]") {
  GridGeometry g = TestGrid("4x4:2+1");
  // EP1: hPG 0 = {0, 1, 2} and hPG 1 = {3, 4, 5} both lost the disks of columns 0 and 1.
  RecoveryPlan plan = Planned(g, {0, 1, 4, 5});
  CHECK(!plan.recoverable());
  CHECK(plan.steps().empty());
  CHECK(plan.lost() == Disks{0, 1, 4, 5});
  CHECK(Classify(g, plan.lost()) == Pattern::kEp1);
  // EP2: two disks of hPG 0 and the vPs under them.
  plan = Planned(g, {0, 1, 12, 13});
  CHECK(plan.lost() == Disks{0, 1, 12, 13});
  CHECK(Classify(g, plan.lost()) == Pattern::kEp2);
  // Fault isolation: with a fifth disk lost elsewhere, that one is rebuilt.
  plan = Planned(g, {0, 1, 4, 5, 10});
  REQUIRE(plan.steps().size() == 1);
  CHECK(plan.steps()[0].disk == 10);
  CHECK(plan.lost() == Disks{0, 1, 4, 5});
}

TEST_CASE("PeelingDecoder: input handling and reuse", "[array]") {
  GridGeometry g = TestGrid("8x5:3+1");
  PeelingDecoder decoder(g);
  RecoveryPlan plan;
  Status refused = decoder.Plan(Disks{3, 40}, &plan);
  CHECK(refused.code() == Status::Code::kInvalidArgument);
  CHECK(refused.message() == "disk 40 is not in lonestar grid 8x5:3+1 (disks 0..39)");
  CHECK((plan.steps().empty() && plan.recoverable()));
  CHECK(!PlanRecovery(g, {1000}).ok());

  // Order and duplicates do not matter; a used decoder plans like a fresh one.
  REQUIRE(decoder.Plan(Disks{0, 1, 8, 9}, &plan).ok());  // EP1 (hPGs 0 and 2 in columns 0 and 1)
  CHECK(plan.lost() == Disks{0, 1, 8, 9});
  REQUIRE(decoder.Plan(Disks{33, 2, 33, 0, 2}, &plan).ok());
  RecoveryPlan fresh = Planned(g, {0, 2, 33});
  REQUIRE(plan.steps().size() == fresh.steps().size());
  for (size_t i = 0; i < plan.steps().size(); i++) {
    CHECK(plan.steps()[i].disk == fresh.steps()[i].disk);
    CHECK(Reads(plan, i) == Reads(fresh, i));
  }
  REQUIRE(decoder.Plan(Disks{}, &plan).ok());
  CHECK((plan.steps().empty() && plan.recoverable()));
}

TEST_CASE("PeelingDecoder: every 1-, 2- and 3-disk failure recovers", "[array]") {
  for (std::string_view text : kTestGrids) {
    GridGeometry g = TestGrid(text);
    for (uint32_t k = 1; k <= 3; k++) {
      INFO(text << ", " << k << " disks");
      Census census = Exhaust(g, k);
      CHECK(census.problems == 0);
      CHECK(census.unrecoverable == 0);
    }
  }
}

TEST_CASE("PeelingDecoder: unrecoverable 4-disk failures are exactly EP1 and EP2", "[array]") {
  struct Expected {
    std::string_view text;
    uint64_t sets, unrecoverable;
  };
  // seed-lonestar.md §2.3.
  for (Expected e : {Expected{"4x4:2+1", 1'820, 18}, Expected{"6x3:3+1", 3'060, 21}, Expected{"8x4:5+1", 35'960, 96},
                     Expected{"8x5:3+1", 91'390, 120}, Expected{"8x6:4+1", 194'580, 164}}) {
    INFO(e.text);
    GridGeometry g = TestGrid(e.text);
    Census census = Exhaust(g, 4);
    CHECK(census.problems == 0);
    CHECK(census.sets == e.sets);
    CHECK(census.unrecoverable == e.unrecoverable);
    // EP2 is every pair of one hPG with the vPs under it; EP1 is the rest.
    uint64_t pairs = uint64_t{g.hpg_size()} * (g.hpg_size() - 1) / 2;
    CHECK(census.ep2 == g.hpg_count() * pairs);
    CHECK(census.ep1 + census.ep2 == e.unrecoverable);
  }
}

TEST_CASE("PeelingDecoder: unrecoverable 5-disk failures contain an EP1 or EP2", "[array]") {
  // C(n, 5) sets; the unrecoverable ones are bad 4-sets plus any fifth disk (seed-lonestar.md §2.3
  // for 8x6: 7,216 = 164 * 44). The others are this decoder's own counts, pinned.
  struct Expected {
    std::string_view text;
    uint64_t sets, unrecoverable;
  };
  for (Expected e : {Expected{"4x4:2+1", 4'368, 18 * 12}, Expected{"6x3:3+1", 8'568, 21 * 14},
                     Expected{"8x4:5+1", 201'376, 96 * 28}}) {
    INFO(e.text);
    Census census = Exhaust(TestGrid(e.text), 5);
    CHECK(census.problems == 0);
    CHECK(census.sets == e.sets);
    CHECK(census.unrecoverable == e.unrecoverable);
  }
}

// Hidden (several seconds): build/tests/unit_tests "[array-slow]". The rest of seed-lonestar.md §2.3's
// table: 5-sets of 8x6:4+1 and 4-sets of the larger grids.
TEST_CASE("PeelingDecoder: larger failure censuses", "[.][array-slow]") {
  Census five = Exhaust(TestGrid("8x6:4+1"), 5);
  CHECK(five.problems == 0);
  CHECK(five.sets == 1'712'304);
  CHECK(five.unrecoverable == 7'216);  // 164 * 44
  struct Expected {
    std::string_view text;
    uint64_t sets, unrecoverable;
  };
  for (Expected e : {Expected{"10x5:7+1", 230'300, 290}, Expected{"8x8:6+1", 635'376, 588},
                     Expected{"12x6:9+1", 1'028'790, 690}}) {
    INFO(e.text);
    GridGeometry g = TestGrid(e.text);
    CHECK(Exhaust(g, 3).unrecoverable == 0);
    Census four = Exhaust(g, 4);
    CHECK(four.problems == 0);
    CHECK(four.sets == e.sets);
    CHECK(four.unrecoverable == e.unrecoverable);
  }
}
