#include "group/disk_health.h"

#include <utility>

namespace cairn {

void DiskHealth::MarkOut(size_t disk, std::string why) {
  std::lock_guard lock(mutex_);
  missing_[disk] = std::move(why);
}

void DiskHealth::SetAwaitingRebuild(std::set<uint32_t> disks) {
  std::lock_guard lock(mutex_);
  awaiting_rebuild_ = std::move(disks);
}

std::map<size_t, std::string> DiskHealth::missing() const {
  std::lock_guard lock(mutex_);
  return missing_;
}

bool DiskHealth::IsOut(size_t disk) const {
  std::lock_guard lock(mutex_);
  return missing_.contains(disk);
}

std::set<uint32_t> DiskHealth::awaiting_rebuild() const {
  std::lock_guard lock(mutex_);
  return awaiting_rebuild_;
}

void DiskHealth::SetRebuiltBelow(std::set<uint32_t> disks) {
  std::lock_guard lock(mutex_);
  rebuilt_below_ = std::move(disks);
}

bool DiskHealth::ServesReads(size_t disk) const {
  std::lock_guard lock(mutex_);
  return rebuilt_below_.contains(static_cast<uint32_t>(disk)) ||
         (!missing_.contains(disk) && !awaiting_rebuild_.contains(static_cast<uint32_t>(disk)));
}

bool DiskHealth::AwaitsRebuild(size_t disk) const {
  std::lock_guard lock(mutex_);
  return awaiting_rebuild_.contains(static_cast<uint32_t>(disk));
}

}  // namespace cairn
