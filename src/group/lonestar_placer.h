// LoneStarPlacer places extents on the buckets of a lonestar group: an extent stays whole on
// one bucket (raid=2d), mirror copies go to buckets in distinct columns, distinct horizontal
// parity groups and distinct failure domains, and the extents of one file stay on its bucket while it has room
// (affinity); otherwise the bucket with the most room. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <unordered_map>

#include "array/grid_geometry.h"
#include "group/placer.h"

namespace cairn {

class LoneStarPlacer : public Placer {
 public:
  // `disks`: the archive's disk numbers of the group, by grid position.
  LoneStarPlacer(GridGeometry geometry, std::vector<uint32_t> disks);

  std::vector<size_t> Place(const PlacementRequest& request, std::span<const PlacementCandidate> candidates,
                            const std::function<bool(size_t)>& reserve) const override;

 private:
  // The bucket file `affinity` last went to, if remembered. REQUIRES: mutex_ held.
  std::optional<uint32_t> Remembered(uint64_t affinity) const;
  void Remember(uint64_t affinity, uint32_t disk) const;

  const GridGeometry geometry_;
  std::map<uint32_t, uint32_t> position_of_;  // archive disk -> grid position
  static constexpr size_t kRemembered = 65536;  // files whose bucket is kept in memory
  mutable std::mutex mutex_;
  mutable std::list<std::pair<uint64_t, uint32_t>> recent_;  // guarded: (affinity, disk), newest first
  mutable std::unordered_map<uint64_t, std::list<std::pair<uint64_t, uint32_t>>::iterator> by_affinity_;  // guarded
};

}  // namespace cairn
