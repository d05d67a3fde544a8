// Placer answers "where does this extent go" for a disk group: which of its disks take the
// chunks of an extent, for new writes, rebuild and relocation alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace cairn {

// A disk in service that may take a chunk.
struct PlacementCandidate {
  std::string domain;       // its failure domain
  uint64_t free_bytes = 0;  // room left on it
  uint32_t disk = 0;        // its index in the archive
};

// Where placement=... asks a file's extents to go, besides its group.
struct PlacementHints {
  std::string tier;      // tier=NAME: disks of that tier; "" for any
  std::string pack_tag;  // pack=TAG: small files of one tag are packed together; "" for none
  bool operator==(const PlacementHints&) const = default;
};

struct PlacementRequest {
  size_t chunks = 0;  // chunks to place, each in a failure domain of its own
  // Domains that already hold a chunk of the extent (a relocated or rebuilt chunk).
  std::set<std::string> avoid_domains;
  PlacementHints hints;
  // Extents with the same affinity (the inode of the file they hold; 0: none) belong
  // together: a placer that keeps data together puts them on the same disks while it can.
  uint64_t affinity = 0;
  // The disks those chunks are on: a placer that keeps copies apart in other ways too keeps
  // the new one apart from them the same way.
  std::set<uint32_t> beside_disks;
};

class Placer {
 public:
  virtual ~Placer() = default;
  // Picks up to request.chunks of `candidates`, each in its own failure domain and none in
  // request.avoid_domains. `reserve(i)` takes room for a chunk on candidates[i] and says
  // whether there was any: a candidate without room is passed over. Returns the indices
  // reserved, in chunk order; fewer than asked when the candidates run out.
  virtual std::vector<size_t> Place(const PlacementRequest& request, std::span<const PlacementCandidate> candidates,
                                    const std::function<bool(size_t)>& reserve) const = 0;
};

// Most free space first (ties: the earlier candidate), so the disks fill evenly. Hints and
// affinity do not matter to it.
class FillBalancedPlacer : public Placer {
 public:
  std::vector<size_t> Place(const PlacementRequest& request, std::span<const PlacementCandidate> candidates,
                            const std::function<bool(size_t)>& reserve) const override;
};

}  // namespace cairn
