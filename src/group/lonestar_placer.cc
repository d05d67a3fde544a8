#include "group/lonestar_placer.h"

#include <algorithm>
#include <functional>
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

namespace {

// The most buckets that can be taken among `buckets` (column, hPG) with no column and no hPG
// twice: a maximum matching of columns to hPGs, by augmenting paths.
size_t MostDistinct(const std::vector<std::pair<uint32_t, uint32_t>>& buckets) {
  std::map<uint32_t, std::vector<uint32_t>> hpgs_of;  // column -> its buckets' hPGs
  for (const auto& [column, hpg] : buckets) hpgs_of[column].push_back(hpg);
  std::map<uint32_t, uint32_t> column_of;  // hPG -> the column matched to it
  std::set<uint32_t> seen;
  std::function<bool(uint32_t)> augment = [&](uint32_t column) {
    for (uint32_t hpg : hpgs_of[column]) {
      if (!seen.insert(hpg).second) continue;
      auto matched = column_of.find(hpg);
      if (matched == column_of.end() || augment(matched->second)) {
        column_of[hpg] = column;
        return true;
      }
    }
    return false;
  };
  size_t matched = 0;
  for (const auto& [column, unused] : hpgs_of) {
    seen.clear();
    matched += augment(column);
  }
  return matched;
}

}  // namespace

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
  // (column, hPG) of candidate i when it may take a copy beside those chosen and `also`.
  auto fits = [&](size_t i, const std::pair<uint32_t, uint32_t>* also) -> std::optional<std::pair<uint32_t, uint32_t>> {
    auto at = position_of_.find(candidates[i].disk);
    if (at == position_of_.end() || domains.contains(candidates[i].domain)) return std::nullopt;
    std::pair<uint32_t, uint32_t> place{geometry_.column(at->second), *geometry_.hpg(at->second)};  // a bucket
    if (columns.contains(place.first) || hpgs.contains(place.second)) return std::nullopt;
    if (also && (place.first == also->first || place.second == also->second)) return std::nullopt;
    return place;
  };
  // How many more the candidates from order[k] on can take beside those chosen and `also`.
  auto room_from = [&](size_t k, const std::pair<uint32_t, uint32_t>* also) {
    std::vector<std::pair<uint32_t, uint32_t>> rest;
    for (; k < order.size(); k++) {
      if (auto place = fits(order[k], also)) rest.push_back(*place);
    }
    return MostDistinct(rest);
  };
  // Taken in order, each one only when the rest can still complete the most copies there
  // can be: most free space first as far as it goes, and no greedy pick that strands the last
  // copy when another set of buckets holds them all. (The look-ahead counts columns and hPGs,
  // not failure domains: with domains shared by buckets it may still come up short.)
  std::vector<size_t> chosen;
  size_t target = request.chunks <= 1 ? request.chunks : std::min(request.chunks, room_from(0, nullptr));
  for (size_t k = 0; k < order.size() && chosen.size() < target; k++) {
    size_t i = order[k];
    auto place = fits(i, nullptr);
    if (!place) continue;
    size_t after = target - chosen.size() - 1;  // copies still to place once this one is
    if (after > 0 && room_from(k + 1, &*place) < after) continue;
    if (!reserve(i)) {  // no room after all: the target is what the others can still take
      target = std::min(target, chosen.size() + room_from(k + 1, nullptr));
      continue;
    }
    columns.insert(place->first);
    hpgs.insert(place->second);
    domains.insert(candidates[i].domain);
    chosen.push_back(i);
  }
  if (request.affinity && !chosen.empty()) Remember(request.affinity, candidates[chosen.front()].disk);
  return chosen;
}

}  // namespace cairn
