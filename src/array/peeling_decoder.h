// The peeling decoder plans how a LoneStar grid rebuilds failed disks: any parity group with exactly
// one lost member rebuilds it from the others (XOR), until none is left or the rest is stuck.
// It only plans; the caller reads the listed disks and XORs them into the rebuilt one.
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <vector>

#include "array/grid_geometry.h"
#include "cairn/status.h"

namespace cairn {

enum class ParityGroupKind : uint8_t {
  kHorizontal = 0,  // an hPG: hn data disks and their hP (hpg_size() disks)
  kVertical = 1,    // a vPG: one column, vP included (vpg_size() disks)
};

// One rebuild: disk = XOR of every other member of the group, i.e. of the disks in
// RecoveryPlan::reads(step).
struct RecoveryStep {
  uint32_t disk = 0;   // the disk rebuilt
  ParityGroupKind kind = ParityGroupKind::kHorizontal;
  uint32_t group = 0;  // hPG index, or vPG index (= column)
  // Steps of one wave read only disks that were intact or rebuilt before the wave began, so they
  // may run in parallel. Waves count from 0.
  uint32_t wave = 0;
  uint32_t reads_begin = 0;  // where reads(step) starts in the plan's read list
  uint32_t reads_count = 0;  // group size - 1
};

// The outcome of planning: ordered steps for every disk that can be rebuilt, and the disks that
// cannot. A plan with lost() disks is still worth running: it rebuilds all the rest.
class RecoveryPlan {
 public:
  // True when every failed disk is rebuilt by the steps.
  bool recoverable() const { return lost_.empty(); }
  // The steps in the order they must run (wave by wave; within a wave in disk order).
  const std::vector<RecoveryStep>& steps() const { return steps_; }
  // The disks `step` reads, in group member order. REQUIRES: step is one of steps().
  std::span<const uint32_t> reads(const RecoveryStep& step) const {
    return std::span<const uint32_t>(reads_).subspan(step.reads_begin, step.reads_count);
  }
  // Failed disks no group can rebuild, ascending. Empty when recoverable().
  const std::vector<uint32_t>& lost() const { return lost_; }

 private:
  friend class PeelingDecoder;

  std::vector<RecoveryStep> steps_;
  std::vector<uint32_t> reads_;  // every step's reads back to back
  std::vector<uint32_t> lost_;
};

// Plans recoveries for one geometry, keeping its scratch state between calls so that planning
// many failure sets allocates nothing once the plan's vectors have grown. Not thread-safe: use one
// decoder per thread.
//
// Rules:
//   - Wave after wave, every lost disk that is the only lost member of its hPG or of its vPG is
//     rebuilt from that group; the disks rebuilt count as intact from the next wave on.
//   - When both of a disk's groups could rebuild it, the smaller group is used (fewer disks to
//     spin up and read: hpg_size() against vpg_size()); on a tie, the hPG.
//   - Planning stops when a wave rebuilds nothing. Whatever is then still lost stays lost: each of
//     its groups has at least two lost members (seed-lonestar.md §2.3: EP1/EP2 for four disks).
// The plan does not depend on the order or duplicates of `failed`.
class PeelingDecoder {
 public:
  explicit PeelingDecoder(GridGeometry geometry);

  const GridGeometry& geometry() const { return geometry_; }

  // Fills *plan (its previous contents are replaced) for the failed disks. InvalidArgument when a
  // disk is not in the grid; *plan is then empty and recoverable.
  Status Plan(std::span<const uint32_t> failed, RecoveryPlan* plan);

 private:
  // The group that rebuilds `disk` now, if one has it as its only lost member.
  bool ChooseGroup(uint32_t disk, ParityGroupKind* kind, uint32_t* group) const;
  void AddStep(uint32_t disk, ParityGroupKind kind, uint32_t group, uint32_t wave, RecoveryPlan* plan) const;

  GridGeometry geometry_;
  std::vector<uint8_t> lost_;          // per disk: 1 while lost
  std::vector<uint32_t> hpg_lost_;     // per hPG: lost members
  std::vector<uint32_t> vpg_lost_;     // per vPG: lost members
  std::vector<uint32_t> pending_;      // the lost disks, ascending
  std::vector<uint32_t> still_lost_;   // scratch for the next wave's pending_
};

// Convenience for one-off plans: PeelingDecoder(geometry).Plan(failed, &plan).
Result<RecoveryPlan> PlanRecovery(const GridGeometry& geometry, const std::set<uint32_t>& failed);

}  // namespace cairn
