#include "group/disk_group.h"

#include <algorithm>

#include <fmt/format.h>

#include "util/log.h"

namespace cairn {

std::optional<GroupType> GroupTypeNamed(std::string_view name) {
  if (name == "pool") return GroupType::kPool;
  if (name == "lonestar") return GroupType::kLoneStar;
  return std::nullopt;
}

Status CheckSchemeFitsGroup(const Redundancy& redundancy, GroupType type, const std::string& group) {
  bool lonestar = type == GroupType::kLoneStar;
  if (redundancy.scheme == Redundancy::Scheme::kTwoDimensional && !lonestar) {
    return Status::InvalidArgument(fmt::format("raid=2d keeps each extent whole on one bucket of a lonestar group; "
                                               "group {} is a pool (set placement=group=<a lonestar group>)",
                                               group));
  }
  if (redundancy.scheme == Redundancy::Scheme::kReedSolomon && lonestar) {
    return Status::InvalidArgument(fmt::format("raid=rs-{}-{} stripes extents across disks; lonestar group {} keeps "
                                               "each whole on one bucket under its parity grid (use raid=2d, or "
                                               "mirror-N for copies on N buckets)",
                                               redundancy.data_chunks, redundancy.parity_chunks, group));
  }
  return Status::OK();
}

DiskGroup::DiskGroup(std::string name, GroupType type, std::vector<Member> members, std::unique_ptr<Placer> placer,
                     std::vector<uint32_t> parity_disks)
    : name_(std::move(name)),
      type_(type),
      members_(std::move(members)),
      placer_(std::move(placer)),
      parity_disks_(std::move(parity_disks)) {}

bool DiskGroup::Contains(uint32_t disk) const {
  return std::any_of(members_.begin(), members_.end(), [&](const Member& m) { return m.disk == disk; });
}

Result<std::vector<ReservedChunk>> DiskGroup::Reserve(const PlacementRequest& request, uint64_t chunk_length,
                                                      uint8_t idr_scramble,
                                                      const std::function<bool(uint32_t)>& in_service) const {
  const size_t chunks = request.chunks;
  std::vector<const Member*> available;
  std::vector<PlacementCandidate> candidates;
  for (const Member& m : members_) {
    if (!in_service(m.disk)) continue;
    available.push_back(&m);
    candidates.push_back({m.domain, m.store->free_bytes(), m.disk});
  }
  std::vector<ReservedChunk> reserved;
  std::vector<ChunkStore*> reserved_on;
  auto reserve = [&](size_t i) {
    auto locator = available[i]->store->Reserve(chunk_length, idr_scramble);
    if (!locator) return false;
    reserved.push_back({available[i]->disk, *locator});
    reserved_on.push_back(available[i]->store);
    return true;
  };
  placer_->Place(request, candidates, reserve);
  if (reserved.size() == chunks) return reserved;
  for (size_t i = 0; i < reserved.size(); i++) {
    Status released = reserved_on[i]->Release(reserved[i].locator);
    // A refusal (double free) keeps the room out of use rather than risk handing it out
    // twice; it is free again when the next open rebuilds the space maps.
    if (!released.ok()) LogError("{}: {}", reserved_on[i]->name(), released.message());
  }
  return Status::NoSpace(fmt::format("{} chunk(s) of {} bytes need as many disks with room, in distinct failure "
                                     "domains; only {} found among the {} disks{}",
                                     chunks, chunk_length, reserved.size(),
                                     members_.size(), name_ == kDefaultGroupName ? "" : " of group " + name_));
}

uint64_t DiskGroup::free_bytes() const {
  uint64_t total = 0;
  for (const Member& m : members_) total += m.store->free_bytes();
  return total;
}

bool DiskGroup::HasRoomFor(uint64_t bytes, uint64_t allocation) const {
  uint64_t free = 0;
  uint64_t at_most_lost = 0;  // each free range loses less than one chunk
  for (const Member& m : members_) {
    free += m.store->free_bytes();
    at_most_lost += m.store->free_ranges() * allocation;
  }
  if (free < bytes) return false;
  if (free - bytes >= at_most_lost) return true;  // the common case: no range to walk
  uint64_t usable = 0;
  for (const Member& m : members_) usable += m.store->free_bytes_in(allocation);
  return usable >= bytes;
}

uint64_t DiskGroup::capacity() const {
  uint64_t total = 0;
  for (const Member& m : members_) total += m.store->capacity();
  return total;
}

}  // namespace cairn
