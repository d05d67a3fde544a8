#include <algorithm>
#include <numeric>

#include "group/placer.h"

namespace cairn {

std::vector<size_t> FillBalancedPlacer::Place(const PlacementRequest& request,
                                              std::span<const PlacementCandidate> candidates,
                                              const std::function<bool(size_t)>& reserve) const {
  std::vector<size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return candidates[x].free_bytes > candidates[y].free_bytes; });
  std::set<std::string> used = request.avoid_domains;
  std::vector<size_t> chosen;
  for (size_t i : order) {
    if (chosen.size() == request.chunks) break;
    if (used.contains(candidates[i].domain) || !reserve(i)) continue;  // a fragmented disk falls through
    used.insert(candidates[i].domain);
    chosen.push_back(i);
  }
  return chosen;
}

}  // namespace cairn
