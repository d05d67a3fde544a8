// TreeWalk visits an inode and everything below it, depth first, each inode once (hard
// links), in steps of a bounded number of inodes, so that its caller can let go of the
// catalog between steps and a walk of a big tree never holds up metadata operations for
// long. Inodes made, moved or removed between steps may or may not be visited.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_set>
#include <vector>

#include "catalog/catalog.h"

namespace cairn {

class TreeWalk {
 public:
  explicit TreeWalk(uint64_t root) : pending_{root} {}

  // Visits up to about `limit` more inodes (directory entries listed count too). Returns
  // whether there is more to visit: false once the tree is done or `visit` returned false.
  // A failing query is its error. REQUIRES: the catalog's users serialized (its mutex).
  Result<bool> Step(Catalog& catalog, size_t limit, const std::function<bool(const InodeRecord&)>& visit);

 private:
  struct Listing {
    uint64_t dir;
    uint64_t after;  // cookie of the last entry listed
  };
  std::vector<uint64_t> pending_;  // inodes to visit next, last first
  std::vector<Listing> listings_;  // directories whose entries are being listed, innermost last
  std::unordered_set<uint64_t> seen_;
};

}  // namespace cairn
