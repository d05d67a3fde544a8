// PeelingDecoder: wave-by-wave peeling over the hPGs and vPGs of a grid, smaller group first.
#include "array/peeling_decoder.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace cairn {

PeelingDecoder::PeelingDecoder(GridGeometry geometry)
    : geometry_(std::move(geometry)),
      lost_(geometry_.disk_count(), 0),
      hpg_lost_(geometry_.hpg_count(), 0),
      vpg_lost_(geometry_.vpg_count(), 0) {}

Status PeelingDecoder::Plan(std::span<const uint32_t> failed, RecoveryPlan* plan) {
  plan->steps_.clear();
  plan->reads_.clear();
  plan->lost_.clear();
  for (uint32_t disk : failed) {
    if (disk >= geometry_.disk_count()) {
      return Status::InvalidArgument(fmt::format("disk {} is not in lonestar grid {} (disks 0..{})", disk,
                                                 geometry_.ToString(), geometry_.disk_count() - 1));
    }
  }

  pending_.clear();
  for (uint32_t disk : failed) {
    if (lost_[disk]) continue;  // a duplicate
    lost_[disk] = 1;
    pending_.push_back(disk);
    if (auto h = geometry_.hpg(disk)) hpg_lost_[*h]++;
    vpg_lost_[geometry_.vpg(disk)]++;
  }
  std::sort(pending_.begin(), pending_.end());

  for (uint32_t wave = 0; !pending_.empty(); wave++) {
    // Choose against the counts as they were when the wave began, then apply the wave.
    size_t first = plan->steps_.size();
    still_lost_.clear();
    for (uint32_t disk : pending_) {
      ParityGroupKind kind;
      uint32_t group;
      if (ChooseGroup(disk, &kind, &group)) {
        AddStep(disk, kind, group, wave, plan);
      } else {
        still_lost_.push_back(disk);
      }
    }
    if (plan->steps_.size() == first) break;  // stuck: every group left has two lost members or more
    for (size_t i = first; i < plan->steps_.size(); i++) {
      uint32_t disk = plan->steps_[i].disk;
      lost_[disk] = 0;
      if (auto h = geometry_.hpg(disk)) hpg_lost_[*h]--;
      vpg_lost_[geometry_.vpg(disk)]--;
    }
    std::swap(pending_, still_lost_);
  }

  // What is left is lost; clear its scratch state for the next call.
  plan->lost_.assign(pending_.begin(), pending_.end());
  for (uint32_t disk : pending_) {
    lost_[disk] = 0;
    if (auto h = geometry_.hpg(disk)) hpg_lost_[*h] = 0;
    vpg_lost_[geometry_.vpg(disk)] = 0;
  }
  return Status::OK();
}

bool PeelingDecoder::ChooseGroup(uint32_t disk, ParityGroupKind* kind, uint32_t* group) const {
  std::optional<uint32_t> h = geometry_.hpg(disk);
  uint32_t v = geometry_.vpg(disk);
  bool by_hpg = h && hpg_lost_[*h] == 1;
  bool by_vpg = vpg_lost_[v] == 1;
  if (by_hpg && (!by_vpg || geometry_.hpg_size() <= geometry_.vpg_size())) {
    *kind = ParityGroupKind::kHorizontal;
    *group = *h;
    return true;
  }
  if (by_vpg) {
    *kind = ParityGroupKind::kVertical;
    *group = v;
    return true;
  }
  return false;
}

void PeelingDecoder::AddStep(uint32_t disk, ParityGroupKind kind, uint32_t group, uint32_t wave,
                             RecoveryPlan* plan) const {
  std::span<const uint32_t> members =
      kind == ParityGroupKind::kHorizontal ? geometry_.HpgMembers(group) : geometry_.VpgMembers(group);
  RecoveryStep step{disk, kind, group, wave, static_cast<uint32_t>(plan->reads_.size()), 0};
  for (uint32_t member : members) {
    if (member != disk) plan->reads_.push_back(member);
  }
  step.reads_count = static_cast<uint32_t>(members.size() - 1);
  plan->steps_.push_back(step);
}

Result<RecoveryPlan> PlanRecovery(const GridGeometry& geometry, const std::set<uint32_t>& failed) {
  std::vector<uint32_t> disks(failed.begin(), failed.end());
  RecoveryPlan plan;
  CAIRN_RETURN_IF_ERROR(PeelingDecoder(geometry).Plan(disks, &plan));
  return plan;
}

}  // namespace cairn
