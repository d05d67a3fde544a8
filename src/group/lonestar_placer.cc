#include "group/lonestar_placer.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <string>

namespace cairn {

LoneStarPlacer::LoneStarPlacer(GridGeometry geometry, std::vector<uint32_t> disks) : geometry_(std::move(geometry)) {
  for (uint32_t p = 0; p < disks.size(); p++) position_of_[disks[p]] = p;
}

std::optional<uint32_t> LoneStarPlacer::Remembered(uint64_t affinity) const {
  auto it = by_affinity_.find(affinity);
  if (it == by_affinity_.end()) return std::nullopt;
  recent_.splice(recent_.begin(), recent_, it->second);
  return it->second->second;
}

void LoneStarPlacer::Remember(uint64_t affinity, uint32_t disk) const {
  if (auto it = by_affinity_.find(affinity); it != by_affinity_.end()) {
    it->second->second = disk;
    recent_.splice(recent_.begin(), recent_, it->second);
    return;
  }
  recent_.emplace_front(affinity, disk);
  by_affinity_[affinity] = recent_.begin();
  if (recent_.size() > kRemembered) {
    by_affinity_.erase(recent_.back().first);
    recent_.pop_back();
  }
}

std::vector<size_t> LoneStarPlacer::Place(const PlacementRequest& request,
                                          std::span<const PlacementCandidate> candidates,
                                          const std::function<bool(size_t)>& reserve) const {
  std::lock_guard lock(mutex_);
  std::optional<uint32_t> preferred = request.affinity ? Remembered(request.affinity) : std::nullopt;
  std::vector<size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    bool px = preferred && candidates[x].disk == *preferred;
    bool py = preferred && candidates[y].disk == *preferred;
    if (px != py) return px;
    return candidates[x].free_bytes > candidates[y].free_bytes;
  });
  std::set<uint32_t> columns, hpgs;  // of the copies there are and those chosen
  for (uint32_t disk : request.beside_disks) {
    auto at = position_of_.find(disk);
    if (at == position_of_.end() || !geometry_.hpg(at->second)) continue;  // not a bucket of this group
    columns.insert(geometry_.column(at->second));
    hpgs.insert(*geometry_.hpg(at->second));
  }
  std::set<std::string> domains = request.avoid_domains;  // and those of the copies chosen
  std::vector<size_t> chosen;
  for (size_t i : order) {
    if (chosen.size() == request.chunks) break;
    auto at = position_of_.find(candidates[i].disk);
    if (at == position_of_.end() || domains.contains(candidates[i].domain)) continue;
    uint32_t column = geometry_.column(at->second);
    uint32_t hpg = *geometry_.hpg(at->second);  // candidates are buckets
    if (columns.contains(column) || hpgs.contains(hpg) || !reserve(i)) continue;
    columns.insert(column);
    hpgs.insert(hpg);
    domains.insert(candidates[i].domain);
    chosen.push_back(i);
  }
  if (request.affinity && !chosen.empty()) Remember(request.affinity, candidates[chosen.front()].disk);
  return chosen;
}

}  // namespace cairn
