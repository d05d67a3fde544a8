// DiskGroup is a set of an archive's disks that extents are spread over: it holds their
// chunk stores and failure domains, its redundancy scheme (its type) and the Placer that
// decides which of its disks take each chunk. Type `pool`, the only one so far: every
// extent's chunks go to distinct failure domains of the group, as many as the file's
// raid= asks. Thread-safe (the stores are; the group itself does not change once built).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/status.h"
#include "group/placer.h"
#include "redundancy/redundancy.h"
#include "store/chunk_store.h"

namespace cairn {

enum class GroupType {
  kPool,      // plain disks: an extent's chunks on distinct failure domains, as raid= asks
  kLoneStar,  // a 2-D parity grid (array/): each extent whole on one bucket, the grid protects it
};
// The type a cairn.conf group.NAME.type value names ("pool", "lonestar"), if any.
std::optional<GroupType> GroupTypeNamed(std::string_view name);

// InvalidArgument saying why when a group of `type` called `group` cannot keep extents of
// `redundancy`: raid=2d lives on the buckets of a lonestar group, and a lonestar group keeps
// each extent whole on one bucket, so rs-K-M (striped across disks) does not go there.
Status CheckSchemeFitsGroup(const Redundancy& redundancy, GroupType type, const std::string& group);

// The group of an archive whose cairn.conf names none: every disk, type pool.
inline constexpr const char* kDefaultGroupName = "default";

// A chunk reserved on disk `disk` (its index in the archive) of a group.
struct ReservedChunk {
  uint32_t disk = 0;
  ChunkLocator locator;
};

class DiskGroup {
 public:
  struct Member {
    uint32_t disk = 0;   // its index in the archive
    ChunkStore* store;   // owned by the archive, outlives the group
    std::string domain;  // its failure domain
  };
  // `parity_disks`: disks of the group that take no chunks (a lonestar group's parity).
  DiskGroup(std::string name, GroupType type, std::vector<Member> members, std::unique_ptr<Placer> placer,
            std::vector<uint32_t> parity_disks = {});

  const std::string& name() const { return name_; }
  GroupType type() const { return type_; }
  const std::vector<Member>& members() const { return members_; }
  const std::vector<uint32_t>& parity_disks() const { return parity_disks_; }
  bool Contains(uint32_t disk) const;

  // Reserves room for `chunks` chunks of `chunk_length` bytes (intra-disk parity
  // `idr_scramble`) on members in service (`in_service(disk)`), in distinct failure domains
  // none of which is in `avoid_domains`. NoSpace saying how many were found when they do
  // not all fit; then nothing stays reserved. The reservations are the caller's (release
  // them through the stores, or commit them to the catalog).
  Result<std::vector<ReservedChunk>> Reserve(const PlacementRequest& request, uint64_t chunk_length,
                                             uint8_t idr_scramble,
                                             const std::function<bool(uint32_t)>& in_service) const;

  uint64_t free_bytes() const;
  // Whether chunks taking `allocation` bytes each can hold `bytes` in all: what a free range
  // has beyond its last whole chunk counts for nothing.
  bool HasRoomFor(uint64_t bytes, uint64_t allocation) const;
  uint64_t capacity() const;

 private:
  std::string name_;
  GroupType type_;
  std::vector<Member> members_;
  std::unique_ptr<Placer> placer_;
  std::vector<uint32_t> parity_disks_;
};

}  // namespace cairn
