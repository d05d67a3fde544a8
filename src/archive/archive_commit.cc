// Archive's catalog commits and the frees and cache file removals that wait until a commit
// is durable (see "Catalog commits" in archive.h).
#include "archive/archive.h"

#include "util/log.h"

namespace cairn {

void Archive::EndOperation(bool committed) {
  if (committed) {
    freed_.insert(freed_.end(), op_freed_.begin(), op_freed_.end());
    cache_removals_.insert(cache_removals_.end(), op_cache_removals_.begin(), op_cache_removals_.end());
  } else {
    for (uint64_t ino : op_unlinked_) unlinked_policies_.erase(ino);
  }
  op_freed_.clear();
  op_cache_removals_.clear();
  op_unlinked_.clear();
}

Status Archive::Commit(SyncWhen when, PendingSync* pending) {
  CAIRN_RETURN_IF_ERROR(catalog_->Flush());
  bool waiting = !freed_.empty() || !cache_removals_.empty();
  if (when == SyncWhen::kNever || (when == SyncWhen::kIfWaiting && !waiting)) return Status::OK();
  pending->sequence = catalog_->commit_sequence();
  pending->freed.insert(pending->freed.end(), freed_.begin(), freed_.end());
  pending->cache_removals.insert(pending->cache_removals.end(), cache_removals_.begin(), cache_removals_.end());
  freed_.clear();
  cache_removals_.clear();
  return Status::OK();
}

Status Archive::MakeDurable(PendingSync pending) {
  if (pending.sequence == 0) return Status::OK();
  Status synced = catalog_->SyncThrough(pending.sequence);
  if (!synced.ok()) {
    // A power loss could still undo the deletions: their space and cache files stay.
    LogError("{}; {} extent(s) keep their space until the next mount", synced.message(), pending.freed.size());
    return synced;
  }
  for (uint64_t ino : pending.cache_removals) {
    Status st = cache_.Remove(ino);
    if (!st.ok()) LogError("staging cache: {}", st.message());
  }
  extents_->FreeCommitted(pending.freed);
  return Status::OK();
}

Status Archive::CommitDurably() {
  PendingSync pending;
  {
    std::lock_guard lock(catalog_mutex_);
    CAIRN_RETURN_IF_ERROR(Commit(SyncWhen::kAlways, &pending));
  }
  return MakeDurable(std::move(pending));
}

Status Archive::UnrefExtent(uint64_t extent_id) {
  if (extent_id == kHoleExtent) return Status::OK();
  auto extent = catalog_->GetExtent(extent_id);
  if (!extent.ok()) return extent.status();
  if (extent->refs > 1) return catalog_->SetExtentRefs(extent_id, extent->refs - 1);
  // The last reference, says the row: freed only when no other segment uses it (a damaged
  // count must not hand the space of their data out again). The caller's row is still there.
  auto users = catalog_->CountSegmentsIn(extent_id);
  if (!users.ok()) return users.status();
  if (*users > 1) {
    // Kept, its count as it is, for fsck to report; the caller's change goes on without it:
    // refusing it would fail the rewrite or removal, and every batch of files it is in, for
    // as long as the damage lasts.
    LogError("catalog: extent {} says {} reference(s), but {} segments use it: it is kept (run cairn fsck)",
             extent_id, extent->refs, *users);
    return Status::OK();
  }
  CAIRN_RETURN_IF_ERROR(catalog_->DeleteExtent(extent_id));
  FreeAfterDurableCommit(*extent);
  return Status::OK();
}

}  // namespace cairn
