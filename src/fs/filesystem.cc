#include "fs/filesystem.h"

#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "catalog/record_checks.h"
#include "fs/key_guards.h"
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

Status Filesystem::CheckKeyGrants(uint64_t ino, const Caller& caller, const char* operation) {
  if (caller.uid == 0) return Status::OK();  // root may use every key
  auto keys = [&] {
    std::lock_guard lock(archive_.catalog_mutex());
    return KeysGuarding(archive_, ino);
  }();
  if (!keys.ok()) return keys.status();
  if (keys->empty()) return Status::OK();  // the caller's groups and the keystore are not read then
  return KeyCheck::For(archive_.file_keys(), caller)->Authorize(ino, *keys, operation);
}

Result<FileHandle*> Filesystem::Open(uint64_t ino, int flags, const Caller& caller) {
  CAIRN_RETURN_IF_ERROR(CheckKeyGrants(ino, caller, "open"));
  return data_.Open(ino, flags);
}

Result<FileHandle*> Filesystem::Create(uint64_t parent, const std::string& name, uint32_t mode, int flags,
                                       const Caller& caller, InodeRecord* attr) {
  auto node = names_.MakeNode(parent, name, S_IFREG | (mode & 07777), 0, caller);
  if (!node.ok()) return node.status();
  *attr = *node;
  // The new file's policy (its directory's, or a rule's) may encrypt under a key the caller
  // may not use: nothing of theirs is to be sealed with it. Refused or not opened, the file
  // goes again: the kernel, told the create failed, keeps the name as absent.
  Status allowed = CheckKeyGrants(node->ino, caller, "create");
  auto handle = allowed.ok() ? data_.Open(node->ino, flags) : Result<FileHandle*>(allowed);
  if (!handle.ok()) {
    names_.Forget(node->ino, 1);
    Status removed = names_.UnlinkIf(parent, name, node->ino);
    if (!removed.ok()) LogWarning("inode {}, not created after all, stays: {}", node->ino, removed.message());
  }
  return handle;
}

Result<uint64_t> Filesystem::ChangeFileKeys(const std::string& action, const std::string& key_name) {
  std::vector<uint64_t> erased;
  auto files = archive_.ChangeFileKeys(action, key_name, &erased);
  if (action != "erase") return files;
  // What the erased keys decrypted must not be served from anywhere else: the kernel's
  // copy goes last, or it could read the staging cache's again.
  store_.ForgetAll();
  auto dropped = cache_.DropPersistedCopies(erased);
  {
    std::lock_guard lock(kernel_cache_mutex_);
    if (drop_kernel_cache_) {
      for (uint64_t ino : erased) drop_kernel_cache_(ino);
    }
  }
  if (!files.ok()) return files;
  if (!dropped.ok()) {
    return Status::IOError(fmt::format("the data keys of {} file(s) under key {} are erased, but the staging cache "
                                       "still holds some of their data: {} (cairn evict drops it once they are "
                                       "closed)", erased.size(), key_name, dropped.status().message()));
  }
  return files;
}

void Filesystem::SetKernelCacheDropper(std::function<void(uint64_t ino)> drop) {
  std::lock_guard lock(kernel_cache_mutex_);
  drop_kernel_cache_ = std::move(drop);
}

Status Filesystem::Recover() {
  Archive::PendingSync pending;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    Catalog& catalog = archive_.catalog();
    // Files unlinked while open when the daemon died (or failed to free them as it
    // stopped): nothing can reach them now.
    CAIRN_RETURN_IF_ERROR(names_.FreeOrphans());
    // Dirty files, and files whose data never reached the disks (their creation was
    // committed but not the dirty mark): the staging cache holds their only copy.
    std::string incomplete = fmt::format(
        "dirty = 1 OR (mode & {} = {} AND size > 0 AND (size + COALESCE(NULLIF(segment_size, 0), {}) - 1) / "
        "COALESCE(NULLIF(segment_size, 0), {}) > (SELECT COUNT(*) FROM segments s WHERE s.ino = inodes.ino))",
        S_IFMT, S_IFREG, archive_.options().segment_size, archive_.options().segment_size);
    // The cache's files of live inodes; a failing query must not remove the copy of a live file.
    std::map<uint64_t, StagingCache::FileInfo> present;
    Status lookup;
    // A cache that cannot be listed: what it was not shown must not count as gone below.
    Status listed = archive_.cache().ForEach([&](const StagingCache::FileInfo& file) {
      auto inode = catalog.GetInode(file.ino);
      if (inode.ok()) {
        present[file.ino] = file;
      } else if (!inode.status().IsNotFound()) {
        if (lookup.ok()) lookup = inode.status();
      } else {
        Status removed = archive_.cache().Remove(file.ino);
        if (!removed.ok()) LogError("staging cache: {}", removed.message());
      }
    });
    CAIRN_RETURN_IF_ERROR(listed);
    CAIRN_RETURN_IF_ERROR(lookup);
    auto unpersisted = catalog.InodesWhere(incomplete.c_str());
    if (!unpersisted.ok()) return unpersisted.status();
    for (uint64_t ino : *unpersisted) {
      auto inode = catalog.GetInode(ino);
      auto segments = catalog.SummarizeSegments(ino);
      Status valid = !inode.ok()      ? inode.status()
                     : !segments.ok() ? segments.status()
                                      : CheckSegmentSummary(*inode, *segments, false);
      if (!valid.ok() && !valid.IsCorruption()) return valid;  // a failing query: not a damaged row
      if (valid.ok() && !inode->dirty && !present.contains(ino)) {  // then its data is nowhere
        valid = Status::Corruption(fmt::format("it is marked clean, its segments do not cover its {} byte(s), and it "
                                               "has no staging cache file",
                                               inode->size));
      }
      if (!valid.ok()) {  // persisting it would loop or allocate by damaged sizes, or write zeros over data
        LogError("inode {} is left unpersisted, its catalog rows are damaged: {} (see cairn fsck)", ino,
                 valid.message());
        continue;
      }
      state_.dirty[ino].all_cached = true;
      state_.persist_queue[ino] = 0;
    }
    std::vector<std::pair<int64_t, std::pair<uint64_t, uint64_t>>> cached;  // mtime -> (ino, bytes)
    for (auto file = present.begin(); file != present.end();) {
      auto [ino, info] = *file;
      auto inode = catalog.GetInode(ino);
      if (!inode.ok()) return inode.status();
      if (state_.dirty.contains(ino) || inode->dirty) {  // the cache's copy is its only one
        ++file;
        continue;
      }
      // A clean file's cached segments have their data on the disks too: a cache file cut
      // short (by a crash of the file system it is on, or by hand) is dropped, and they are
      // read from there, never as zeros from the missing tail.
      auto last = catalog.LastCachedSegment(ino);
      if (!last.ok()) return last.status();
      uint64_t needed = *last ? (*last)->index * inode->segment_size + (*last)->length : 0;
      if (info.length < needed) {
        LogWarning("inode {}: its staging cache file is shorter than the data it holds ({} of {} bytes); it is "
                   "removed and its segments are read from the disks",
                   ino, info.length, needed);
        CAIRN_RETURN_IF_ERROR(catalog.SetSegmentsCached(ino, false));
        CAIRN_RETURN_IF_ERROR(archive_.cache().Remove(ino));
        file = present.erase(file);
        continue;
      }
      cached.push_back({info.mtime_seconds, {ino, info.allocated_bytes}});
      ++file;
    }
    // Segments the catalog finds in the cache while their file's cache file is gone (the
    // directory lost or replaced, a name a crash took): their extents hold their data. Left
    // cached, they would read as zeros, a write would fetch nothing around its bytes, and a
    // persist of a dirty file would commit them as holes, freeing the extents.
    auto with_cached = catalog.InodesWhere("ino IN (SELECT ino FROM segments WHERE cached = 1)");
    if (!with_cached.ok()) return with_cached.status();
    for (uint64_t ino : *with_cached) {
      if (present.contains(ino)) continue;
      LogWarning("inode {}: its staging cache file is gone; its persisted segments are read from the disks", ino);
      CAIRN_RETURN_IF_ERROR(catalog.SetSegmentsCached(ino, false));
    }
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
  persister_.Stop();  // no persist round writes what ForgetAll frees
  if (Status freed = names_.ForgetAll(); !freed.ok()) {
    LogError("cannot free the files unlinked while open (the next mount does): {}", freed.message());
  }
  Status st = persister_.PersistAll();
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
