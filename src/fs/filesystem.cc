#include "fs/filesystem.h"

#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "catalog/record_checks.h"
#include "util/log.h"

namespace cairn {

Filesystem::Filesystem(Archive& archive)
    : archive_(archive),
      store_(archive, archive.options().read_buffer_segments),
      names_(archive, state_),
      cache_(archive, state_, persister_),
      persister_(archive, state_, store_),
      reconciler_(archive, state_, store_),
      data_(archive, state_, store_, names_, cache_),
      xattrs_(archive, state_),
      admin_(archive, names_, reconciler_) {
  persister_.SetAfterBatch([this] { cache_.EvictOverBudget(); });
  persister_.SetOnClean([this](const std::vector<uint64_t>& inos) { cache_.TouchCached(inos); });
}

Filesystem::~Filesystem() = default;

Result<FileHandle*> Filesystem::Open(uint64_t ino, int flags, const Caller& caller) {
  if (caller.uid != 0) {  // root may use every key
    auto key = archive_.file_keys().KeyNameOf(ino);
    if (!key.ok()) return key.status();
    if (*key) {
      Status allowed = archive_.file_keys().Authorize(**key, caller.uid, caller.groups());
      if (!allowed.ok()) {
        LogWarning("open of inode {} refused: {}", ino, allowed.message());
        return allowed;
      }
    }
  }
  return data_.Open(ino, flags);
}

Status Filesystem::Recover() {
  std::vector<std::pair<int64_t, std::pair<uint64_t, uint64_t>>> cached;  // mtime -> (ino, bytes)
  Archive::PendingSync pending;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    Catalog& catalog = archive_.catalog();
    // Files unlinked while open when the daemon stopped: nothing can reach them now.
    auto orphans = catalog.InodesWhere("nlink = 0 AND ino != 1");
    if (!orphans.ok()) return orphans.status();
    for (uint64_t ino : *orphans) CAIRN_RETURN_IF_ERROR(names_.MaybeDelete(ino));
    // Dirty files, and files whose data never reached the disks (their creation was
    // committed but not the dirty mark): the staging cache holds their only copy.
    std::string incomplete = fmt::format(
        "dirty = 1 OR (mode & {} = {} AND size > 0 AND (size + COALESCE(NULLIF(segment_size, 0), {}) - 1) / "
        "COALESCE(NULLIF(segment_size, 0), {}) > (SELECT COUNT(*) FROM segments s WHERE s.ino = inodes.ino))",
        S_IFMT, S_IFREG, archive_.options().segment_size, archive_.options().segment_size);
    auto unpersisted = catalog.InodesWhere(incomplete.c_str());
    if (!unpersisted.ok()) return unpersisted.status();
    for (uint64_t ino : *unpersisted) {
      auto inode = catalog.GetInode(ino);
      auto segments = catalog.SummarizeSegments(ino);
      Status valid = !inode.ok()      ? inode.status()
                     : !segments.ok() ? segments.status()
                                      : CheckSegmentSummary(*inode, *segments, false);
      if (!valid.ok() && !valid.IsCorruption()) return valid;  // a failing query: not a damaged row
      if (!valid.ok()) {  // persisting it would loop or allocate by damaged sizes, or write zeros over data
        LogError("inode {} is left unpersisted, its catalog rows are damaged: {} (see cairn fsck)", ino,
                 valid.message());
        continue;
      }
      state_.dirty[ino].all_cached = true;
      state_.persist_queue[ino] = 0;
    }
    Status lookup;  // a failing query must not remove the cache's copy of a live file
    archive_.cache().ForEach([&](uint64_t ino, uint64_t bytes, int64_t mtime) {
      auto inode = catalog.GetInode(ino);
      if (!inode.ok() && !inode.status().IsNotFound()) {
        if (lookup.ok()) lookup = inode.status();
      } else if (!inode.ok()) {
        Status removed = archive_.cache().Remove(ino);
        if (!removed.ok()) LogError("staging cache: {}", removed.message());
      } else if (!state_.dirty.contains(ino)) {
        cached.push_back({mtime, {ino, bytes}});
      }
    });
    CAIRN_RETURN_IF_ERROR(lookup);
    std::sort(cached.begin(), cached.end());
    for (const auto& [mtime, entry] : cached) state_.TouchCached(entry.first, entry.second);
    CAIRN_RETURN_IF_ERROR(archive_.Commit(Archive::SyncWhen::kAlways, &pending));
    if (!state_.dirty.empty()) LogInfo("{} file(s) left dirty by the last run will be persisted", state_.dirty.size());
  }
  return archive_.MakeDurable(std::move(pending));
}

Status Filesystem::StartBackground() {
  {
    std::lock_guard lock(archive_.catalog_mutex());
    CAIRN_RETURN_IF_ERROR(archive_.catalog().StartCheckpoints(archive_.catalog_mutex()));
  }
  persister_.Start();
  reconciler_.Start();
  return Status::OK();
}

Status Filesystem::Stop() {
  reconciler_.Stop();
  Status st = persister_.Stop();
  Status durable = archive_.CommitDurably();
  return st.ok() ? durable : st;
}

Result<FsStats> Filesystem::StatFs() {
  std::lock_guard lock(archive_.catalog_mutex());
  FsStats stats;
  stats.total_bytes = archive_.capacity();
  uint64_t free = archive_.free_bytes();  // of every group, as the total is
  stats.free_bytes = free > state_.dirty_bytes ? free - state_.dirty_bytes : 0;
  auto inodes = archive_.catalog().InodeCount();
  if (!inodes.ok()) return inodes.status();
  stats.inodes = *inodes;
  return stats;
}

}  // namespace cairn
