// DiskHealth says which of an archive's disks serve reads and take new chunks: a disk is out
// of service when it was missing at open (-o degraded) or failed since (cairn disk fail),
// and waits for cairn rebuild after cairn disk replace. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace cairn {

class DiskHealth {
 public:
  // Takes disk `disk` out of service for the reason `why`.
  void MarkOut(size_t disk, std::string why);
  // The replaced disks that wait for a rebuild (from cairn.conf at open); none after a
  // complete rebuild.
  void SetAwaitingRebuild(std::set<uint32_t> disks);

  // Disks out of service, by index, with the reason.
  std::map<size_t, std::string> missing() const;
  bool IsOut(size_t disk) const;
  std::set<uint32_t> awaiting_rebuild() const;
  bool AwaitsRebuild(size_t disk) const;
  // Neither out nor awaiting rebuild: takes new chunks and serves reads.
  bool InService(size_t disk) const { return !IsOut(disk) && !AwaitsRebuild(disk); }
  // Disks whose reads the redundancy below them rebuilds when they are out or not rebuilt
  // yet (buckets of a lonestar group): they serve reads whatever their state.
  void SetRebuiltBelow(std::set<uint32_t> disks);
  bool ServesReads(size_t disk) const;

 private:
  mutable std::mutex mutex_;
  std::map<size_t, std::string> missing_;  // guarded by mutex_
  std::set<uint32_t> awaiting_rebuild_;    // guarded by mutex_
  std::set<uint32_t> rebuilt_below_;       // guarded by mutex_
};

}  // namespace cairn
