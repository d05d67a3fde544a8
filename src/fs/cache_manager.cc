#include "fs/cache_manager.h"

#include <algorithm>
#include <set>

#include "catalog/catalog.h"
#include "fs/catalog_lookups.h"
#include "util/log.h"

namespace cairn {

void CacheManager::TouchCached(const std::vector<uint64_t>& inos) {
  std::vector<uint64_t> bytes;  // stat()s of the cache files, made without the catalog mutex
  for (uint64_t ino : inos) bytes.push_back(archive_.cache().Usage(ino));
  std::lock_guard lock(archive_.catalog_mutex());
  for (size_t i = 0; i < inos.size(); i++) {
    // Still there, clean and closed (a writer may have come since): eviction may take it.
    auto live = state_.live.find(inos[i]);
    bool writing = live != state_.live.end() && live->second.nwriters > 0;
    auto inode = archive_.catalog().GetInode(inos[i]);
    if (!inode.ok() && !inode.status().IsNotFound()) LogError("inode {}: {}", inos[i], inode.status().message());
    if (inode.ok() && !state_.dirty.contains(inos[i]) && !writing) state_.TouchCached(inos[i], bytes[i]);
  }
}

void CacheManager::EvictOverBudget() {
  std::vector<uint64_t> victims;
  std::vector<uint64_t> writing;
  uint64_t budget = archive_.options().cache_size;
  uint64_t writing_bytes = 0;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    for (const auto& [ino, live] : state_.live) {
      if (live.nwriters > 0) writing.push_back(ino);
    }
  }
  for (uint64_t ino : writing) writing_bytes += archive_.cache().Usage(ino);  // stat()s, without the mutex
  {
    std::lock_guard lock(archive_.catalog_mutex());
    uint64_t total = state_.cached_bytes + writing_bytes;
    if (total <= budget) return;
    uint64_t to_free = total - budget * 9 / 10;
    for (const auto& [tick, ino] : state_.lru_by_tick) {
      if (to_free == 0) break;
      uint64_t bytes = state_.cached[ino].second;
      victims.push_back(ino);
      to_free -= std::min(to_free, bytes);
    }
    if (to_free == 0) writing.clear();  // closed files alone bring the cache back under budget
  }
  // Not waiting for busy files: while it waited, the stripes it holds would keep every open,
  // read and write of their files waiting too, for as long as a disk takes to spin up.
  if (Status st = EvictFiles(victims, Busy::kSkip); !st.ok()) LogError("eviction failed: {}", st.message());
  // Files still being written: drop what is already persisted (a 10 GiB copy must not need
  // 10 GiB of cache).
  for (uint64_t ino : writing) {
    Status st = EvictCleanSegments(ino);
    if (!st.ok()) LogError("inode {}: eviction of persisted segments failed: {}", ino, st.message());
  }
}

Status CacheManager::EvictAll() {
  CAIRN_RETURN_IF_ERROR(persister_.PersistAll());
  std::vector<uint64_t> inos;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    for (const auto& [ino, entry] : state_.cached) inos.push_back(ino);
  }
  return EvictFiles(inos);
}

Result<uint64_t> CacheManager::DropPersistedCopies(const std::vector<uint64_t>& inos) {
  CAIRN_RETURN_IF_ERROR(EvictFiles(inos));  // whole files: closed, clean and persisted
  uint64_t changed = 0;
  for (uint64_t ino : inos) {
    CAIRN_RETURN_IF_ERROR(EvictCleanSegments(ino));  // the persisted parts of the rest
    auto dropped = DropChangedPersistedSegments(ino);
    if (!dropped.ok()) return dropped.status();
    changed += *dropped;
  }
  return changed;
}

Result<uint64_t> CacheManager::DropChangedPersistedSegments(uint64_t ino) {
  std::lock_guard batch(persister_.batch_mutex());  // no persist of it under way
  auto data = state_.data_locks.Exclusive(ino);
  std::vector<uint64_t> dropped;  // segment indexes
  uint64_t segment_size = 0;
  bool after_crash = false;  // which segments changed is not known: all that were persisted go
  Archive::PendingSync pending;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    Catalog& catalog = archive_.catalog();
    auto dirty = state_.dirty.find(ino);
    if (dirty == state_.dirty.end()) return 0;
    auto inode = catalog.GetInode(ino);
    if (!inode.ok()) return inode.status().IsNotFound() ? Result<uint64_t>(0) : inode.status();
    if (inode->segment_size == 0) return 0;  // never persisted
    segment_size = inode->segment_size;
    DirtyFile& file = dirty->second;
    after_crash = file.all_cached;
    std::set<uint64_t> persisted;
    CAIRN_RETURN_IF_ERROR(InTransaction(catalog, [&]() -> Status {
      auto segments = catalog.GetSegments(ino);
      if (!segments.ok()) return segments.status();
      for (const SegmentRecord& segment : *segments) {
        if (segment.extent_id == kHoleExtent) continue;
        persisted.insert(segment.index);
        if (!file.all_cached && !file.segments.contains(segment.index)) continue;
        CAIRN_RETURN_IF_ERROR(catalog.SetSegmentCached(ino, segment.index, false));
        dropped.push_back(segment.index);
      }
      return Status::OK();
    }));
    if (file.all_cached) {  // after a crash every segment was suspect: now those never persisted are
      for (uint64_t i = 0; i * segment_size < inode->size; i++) {
        if (!persisted.contains(i)) file.segments.insert(i);
      }
      file.all_cached = false;
    }
    for (uint64_t index : dropped) file.segments.erase(index);
    if (dropped.empty()) return 0;
    CAIRN_RETURN_IF_ERROR(archive_.Commit(Archive::SyncWhen::kAlways, &pending));
  }
  CAIRN_RETURN_IF_ERROR(archive_.MakeDurable(std::move(pending)));
  for (uint64_t index : dropped) {
    CAIRN_RETURN_IF_ERROR(archive_.cache().PunchHole(ino, index * segment_size, segment_size));
  }
  LogWarning("inode {}: {} segment(s) {} since they were persisted are erased with their persisted data (what was "
             "written there since is lost with it)",
             ino, dropped.size(), after_crash ? "that a crash left not known to be unchanged" : "changed");
  return dropped.size();
}

Status CacheManager::EvictFiles(const std::vector<uint64_t>& inos, Busy busy) {
  constexpr size_t kGroup = 256;  // files per durable commit
  std::lock_guard batch(persister_.batch_mutex());
  for (size_t first = 0; first < inos.size(); first += kGroup) {
    std::vector<uint64_t> group(inos.begin() + first, inos.begin() + std::min(inos.size(), first + kGroup));
    auto held = busy == Busy::kWait ? state_.data_locks.Exclusive(group) : state_.data_locks.TryExclusive(&group);
    std::vector<uint64_t> evicted;
    Archive::PendingSync pending;
    {
      std::lock_guard lock(archive_.catalog_mutex());
      Catalog& catalog = archive_.catalog();
      for (uint64_t ino : group) {
        auto live = state_.live.find(ino);
        bool open = live != state_.live.end() && live->second.nopen > 0;
        auto inode = catalog.GetInode(ino);
        if (!inode.ok() && !inode.status().IsNotFound()) return inode.status();
        if (!inode.ok()) state_.DropCached(ino);
        // Dirty in the catalog without being in `dirty`: left unpersisted by Recover (its rows
        // are damaged), the staging cache holds its only copy.
        if (open || state_.dirty.contains(ino) || !inode.ok() || inode->dirty) continue;
        uint64_t segment_size = SegmentSizeOf(archive_, *inode);
        uint64_t count = (inode->size + segment_size - 1) / segment_size;
        auto segments = catalog.GetSegments(ino);
        if (!segments.ok()) return segments.status();
        if (segments->size() != count) continue;  // not fully persisted yet
        CAIRN_RETURN_IF_ERROR(catalog.SetSegmentsCached(ino, false));
        state_.DropCached(ino);
        evicted.push_back(ino);
      }
      if (evicted.empty()) continue;
      CAIRN_RETURN_IF_ERROR(archive_.Commit(Archive::SyncWhen::kAlways, &pending));
    }
    // The catalog must stop pointing at the cache, durably, before the cache copies go (no
    // write may come between). The space others freed in that commit is discarded after the
    // files' locks are dropped: discards may wait for disks.
    std::vector<ExtentRecord> freed = std::move(pending.freed);
    pending.freed.clear();
    CAIRN_RETURN_IF_ERROR(archive_.MakeDurable(std::move(pending)));
    for (uint64_t ino : evicted) CAIRN_RETURN_IF_ERROR(archive_.cache().Remove(ino));
    held.clear();
    archive_.extents().FreeCommitted(freed);
  }
  return Status::OK();
}

Status CacheManager::EvictCleanSegments(uint64_t ino) {
  std::lock_guard batch(persister_.batch_mutex());
  auto data = state_.data_locks.Exclusive(ino);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // offset, length
  Archive::PendingSync pending;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    Catalog& catalog = archive_.catalog();
    auto inode = catalog.GetInode(ino);
    if (!inode.ok()) return inode.status().IsNotFound() ? Status::OK() : inode.status();
    auto dirty = state_.dirty.find(ino);
    if (dirty != state_.dirty.end() && dirty->second.all_cached) return Status::OK();
    if (dirty == state_.dirty.end() && inode->dirty) return Status::OK();  // as in EvictFiles
    uint64_t segment_size = SegmentSizeOf(archive_, *inode);
    CAIRN_RETURN_IF_ERROR(InTransaction(catalog, [&]() -> Status {
      auto segments = catalog.GetSegments(ino);
      if (!segments.ok()) return segments.status();
      for (const SegmentRecord& segment : *segments) {
        if (!segment.cached || (dirty != state_.dirty.end() && dirty->second.segments.contains(segment.index))) {
          continue;
        }
        CAIRN_RETURN_IF_ERROR(catalog.SetSegmentCached(ino, segment.index, false));
        ranges.emplace_back(segment.index * segment_size, segment_size);
      }
      return Status::OK();
    }));
    if (ranges.empty()) return Status::OK();
    CAIRN_RETURN_IF_ERROR(archive_.Commit(Archive::SyncWhen::kAlways, &pending));
  }
  CAIRN_RETURN_IF_ERROR(archive_.MakeDurable(std::move(pending)));
  for (const auto& [offset, length] : ranges) CAIRN_RETURN_IF_ERROR(archive_.cache().PunchHole(ino, offset, length));
  return Status::OK();
}

}  // namespace cairn
