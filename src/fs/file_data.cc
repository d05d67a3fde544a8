#include "fs/file_data.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "catalog/record_checks.h"
#include "fs/catalog_lookups.h"
#include "pipeline/segment_map_update.h"
#include "pipeline/segment_writer.h"
#include "util/clock.h"
#include "util/log.h"

namespace cairn {
Result<FileHandle*> FileData::Open(uint64_t ino, int flags) {
  bool writable = (flags & O_ACCMODE) != O_RDONLY;
  // Shared: an eviction (exclusive) is either finished or not begun while the handle
  // counts itself open and opens the cache file.
  auto data = state_.data_locks.Shared(ino);
  {
    std::lock_guard lock(archive_.catalog_mutex());
    auto inode = GetInodeOrENOENT(archive_.catalog(), ino);
    if (!inode.ok()) return inode.status();
    if (IsDir(*inode) && writable) return Status::Posix(EISDIR, "directory opened for writing");
    if (S_ISREG(inode->mode) && inode->segment_size != 0) {
      // A damaged segment map would read as zeros where data is (or loop by a damaged size).
      bool clean = !inode->dirty && !state_.dirty.contains(ino);
      auto segments = archive_.catalog().SummarizeSegments(ino);
      if (!segments.ok()) return segments.status();
      CAIRN_RETURN_IF_ERROR(CheckSegmentSummary(*inode, *segments, clean));
    }
    LiveInode& live = state_.live[ino];
    live.nopen++;
    if (writable) live.nwriters++;
    if (auto it = state_.cached.find(ino); it != state_.cached.end()) state_.TouchCached(ino, it->second.second);
  }
  auto handle = std::make_unique<FileHandle>();
  handle->ino = ino;
  handle->writable = writable;
  // The handle keeps no descriptor (reads and writes take the shared one), but a cache file
  // that cannot be opened fails the open, not a later read. A reader of a file with
  // nothing staged creates no cache file.
  auto file = writable ? archive_.cache().Open(ino) : archive_.cache().OpenExisting(ino);
  if (!file.ok() && !file.status().IsNotFound()) {
    data.unlock();
    Release(handle.release());
    return file.status();
  }
  return handle.release();
}

Status FileData::Read(FileHandle* fh, uint64_t offset, size_t size, ReadReply& reply) {
  // Shared: a segment's cache copy cannot be evicted between the lookup and the read.
  auto data = state_.data_locks.Shared(fh->ino);
  uint64_t segment_size;
  uint64_t length;
  std::vector<std::optional<SegmentRecord>> segments;
  std::vector<SegmentRecord> next;  // persisted segments after the last one read
  bool sequential = false;  // this reader reads on from where its reads got to
  {
    std::lock_guard lock(archive_.catalog_mutex());
    auto inode = GetInodeOrENOENT(archive_.catalog(), fh->ino);
    if (!inode.ok()) return inode.status();
    CAIRN_RETURN_IF_ERROR(CheckInodeRecord(*inode));
    if (offset >= inode->size || size == 0) return Status::OK();
    length = std::min<uint64_t>(size, inode->size - offset);
    segment_size = SegmentSizeOf(archive_, *inode);
    const uint64_t last = (offset + length - 1) / segment_size;
    for (uint64_t i = offset / segment_size; i <= last; i++) {
      auto segment = archive_.catalog().GetSegment(fh->ino, i);
      if (!segment.ok()) return segment.status();
      segments.push_back(std::move(*segment));
      if (segments.back()) CAIRN_RETURN_IF_ERROR(CheckSegmentRecord(*segments.back(), *inode));
    }
    // Only a guess at what comes next: a failure here is the later read's to report. A
    // sequential reader that reads from the disks will likely read the extents after it from
    // there too; a random reader gets none (they would push out the payloads it reuses).
    uint64_t high = fh->read_end.load();
    while (high < offset + length && !fh->read_end.compare_exchange_weak(high, offset + length)) {
    }
    // Behind the furthest read by at most the kernel's read-ahead (its requests run at once
    // and may come in any order), or ahead of it by a segment or a few reads.
    const uint64_t slack = std::max<uint64_t>(segment_size, 4 * length);
    const uint64_t behind = std::max<uint64_t>(slack, archive_.options().read_ahead + length);
    sequential = offset + behind >= high && offset <= high + slack;
    if (!sequential && offset == 0) {  // starts over, as a handle just opened would
      fh->read_end.store(length);
      high = length;
      sequential = true;
    }
    // From the furthest position read on: what a request that came late asks for is behind it.
    const uint64_t first = std::max(last + 1, std::max(high, offset + length) / segment_size);
    const bool from_disks = segments.back() && !segments.back()->cached;
    for (uint64_t i = first; sequential && from_disks && i < first + store_.LoadsAhead() && i * segment_size < inode->size;
         i++) {
      auto after = archive_.catalog().GetSegment(fh->ino, i);
      Status usable = !after.ok() ? after.status()
                      : *after && !(*after)->cached ? CheckSegmentRecord(**after, *inode)
                                                    : Status::NotFound("");
      if (!usable.ok()) {
        if (!usable.IsNotFound()) LogWarning("inode {}: segment {} not read ahead: {}", fh->ino, i, usable.message());
        break;
      }
      next.push_back(**after);
    }
  }
  // A sequential reader wants them next: read and decoded meanwhile.
  for (const SegmentRecord& segment : next) store_.LoadAhead(segment);
  uint64_t done = 0;
  SharedFile file;
  for (size_t k = 0; k < segments.size(); k++) {
    const auto& segment = segments[k];
    uint64_t position = offset + done;
    uint64_t in_segment = position % segment_size;
    uint64_t n = std::min(length - done, segment_size - in_segment);
    if (segment && !segment->cached) {
      auto view = store_.ViewOf(*segment, in_segment, n);
      if (!view.ok() && view.status().IsCorruption()) {  // the log line names the file
        return Status::Corruption(fmt::format("inode {} segment {}: {}", fh->ino, segment->index,
                                              view.status().message()));
      }
      CAIRN_RETURN_IF_ERROR(view.status());
      reply.View(view->bytes, std::move(view->payload));
      std::span<uint8_t> zeros = reply.Own(n - view->bytes.size());  // past its stored bytes
      std::fill(zeros.begin(), zeros.end(), 0);
      // Read to its end by a sequential reader whose next segment is in another extent (not a
      // pack that holds more of it): that reader is done with this one.
      const SegmentRecord* following =
          k + 1 < segments.size()                                     ? (segments[k + 1] ? &*segments[k + 1] : nullptr)
          : !next.empty() && next.front().index == segment->index + 1 ? &next.front()
                                                                      : nullptr;
      if (sequential && in_segment + n == segment_size && following && following->extent_id != segment->extent_id) {
        store_.ReadPast(segment->extent_id);
      }
    } else {  // never-written bytes read as zeros, without a cache file too
      std::span<uint8_t> out = reply.Own(n);
      if (!file) {
        auto opened = archive_.cache().OpenExisting(fh->ino);
        if (!opened.ok() && !opened.status().IsNotFound()) return opened.status();
        file = opened.ok() ? std::move(*opened) : nullptr;
      }
      if (file) {
        CAIRN_RETURN_IF_ERROR(StagingCache::ReadAt(file->fd(), position, out));
      } else {
        std::fill(out.begin(), out.end(), 0);
      }
    }
    done += n;
  }
  return Status::OK();
}

Result<size_t> FileData::Write(FileHandle* fh, uint64_t offset, std::span<const uint8_t> src) {
  if (!fh->writable) return Status::Posix(EBADF, "file not open for writing");
  if (src.empty()) return size_t{0};
  if (offset > kMaxFileSize || src.size() > kMaxFileSize - offset) {
    return Status::Posix(EFBIG, fmt::format("files end at {} bytes", kMaxFileSize));
  }
  auto data = state_.data_locks.Exclusive(fh->ino);
  uint64_t segment_size;
  uint64_t old_size;  // stays while the data lock is held
  std::string group;  // where its bytes are counted until persisted
  {
    std::lock_guard lock(archive_.catalog_mutex());
    auto inode = GetInodeOrENOENT(archive_.catalog(), fh->ino);
    if (!inode.ok()) return inode.status();
    CAIRN_RETURN_IF_ERROR(CheckInodeRecord(*inode));
    segment_size = SegmentSizeOf(archive_, *inode);
    old_size = inode->size;
    // Where its data goes: resolved again once a policy changed (a failure: each time).
    if (!fh->plan || fh->plan_at != archive_.catalog().policy_changes()) {
      auto plan = PlanOfInode(archive_, *inode);
      fh->plan = plan.ok() ? *plan : nullptr;
      fh->plan_at = plan.ok() ? archive_.catalog().policy_changes() : 0;
    }
    group = fh->plan ? fh->plan->group : "";
    // The extents it will be cut into: a file never persisted takes its plan's segment size.
    uint64_t extent_segment = inode->segment_size == 0 && fh->plan ? fh->plan->segment_size : segment_size;
    uint64_t needed = state_.dirty_bytes_in[group] + src.size();
    // Per segment, an extent header block and (format v3) a block for the member table.
    needed += (needed / extent_segment + 2) * 2 * kBlockSize;
    if (!GroupHasRoomFor(archive_, fh->plan.get(), needed, extent_segment)) {
      return Status::Posix(ENOSPC, "its disk group cannot hold more than what already waits to be persisted");
    }
  }
  uint64_t first = offset / segment_size;
  uint64_t last = (offset + src.size() - 1) / segment_size;
  bool pinned = false;  // Release unpins it with the last writable handle
  auto file = archive_.cache().OpenForWriting(fh->ino, &pinned);
  if (!file.ok()) return file.status();
  // Past the end: the cache file may hold bytes there that the file never had (a crash
  // before a write's size was committed, a failed write, a crash inside a truncate); cut,
  // so the gap reads and persists as zeros (as Truncate does before growing).
  if (offset > old_size) CAIRN_RETURN_IF_ERROR(StagingCache::CutTo((*file)->fd(), old_size));
  CAIRN_RETURN_IF_ERROR(FetchSegments(fh->ino, (*file)->fd(), first, last));
  int64_t now = NowNs();
  Archive::PendingSync dirty_mark;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    auto inode = GetInodeOrENOENT(archive_.catalog(), fh->ino);
    if (!inode.ok()) return inode.status();
    // Mark the segments dirty in memory before the cache changes, with the segment size
    // the file has now (a persist may have fixed it since we looked): a commit of the
    // persister in between then keeps the file dirty.
    DirtyFile& dirty =
        state_.MarkWritten(fh->ino, src.size(), std::max<uint64_t>(inode->size, offset + src.size()), group);
    if (inode->segment_size == 0) {
      // Decided by the policy at first persist; until then the whole file is dirty.
      dirty.all_cached = true;
    } else {
      // The segments a write past the end skips are holes now, dirty as after a truncate
      // that grows the file: a clean file has a row for every segment.
      uint64_t old_count = (inode->size + inode->segment_size - 1) / inode->segment_size;
      uint64_t from = std::min(old_count, offset / inode->segment_size);
      for (uint64_t i = from; i <= (offset + src.size() - 1) / inode->segment_size; i++) dirty.segments.insert(i);
    }
    dirty.last_write_ns = now;
    state_.last_activity_ns = now;
    state_.DropCached(fh->ino);
    // Changing a persisted file in the cache: make the dirty mark durable first (synced, out
    // of the lock), or a crash or power loss could leave a changed cache copy that the
    // catalog believes is clean: read until evicted, then the old bytes again.
    if (inode->segment_size != 0 && !inode->dirty) {
      inode->dirty = true;
      CAIRN_RETURN_IF_ERROR(archive_.catalog().UpdateInode(*inode));
      CAIRN_RETURN_IF_ERROR(archive_.Commit(Archive::SyncWhen::kAlways, &dirty_mark));
    }
  }
  CAIRN_RETURN_IF_ERROR(archive_.MakeDurable(std::move(dirty_mark)));
  CAIRN_RETURN_IF_ERROR(StagingCache::WriteAt((*file)->fd(), offset, src));
  if (!pinned && ::fdatasync((*file)->fd()) != 0) {  // its descriptor may be gone by the next fsync
    return Status::FromErrno(fmt::format("staging cache file of inode {}: fdatasync", fh->ino), errno);
  }
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  CAIRN_RETURN_IF_ERROR(InTransaction(catalog, [&]() -> Status {
    auto inode = GetInodeOrENOENT(catalog, fh->ino);
    if (!inode.ok()) return inode.status();
    inode->size = std::max<uint64_t>(inode->size, offset + src.size());
    inode->mtime_ns = inode->ctime_ns = now;
    inode->dirty = true;
    return catalog.UpdateInode(*inode);
  }));
  return src.size();
}

Status FileData::Fsync(FileHandle* fh) {
  // A sync of the same descriptor by a write's fetch or a persist, which may be told an
  // error of this file's instead, holds the data lock until it has noted it for us.
  auto data = state_.data_locks.Shared(fh->ino);
  // While the file is being written, this is the descriptor the writes went through (pinned,
  // or Write synced them): it sees their write-back errors. No cache file: nothing staged.
  auto file = archive_.cache().OpenExisting(fh->ino);
  if (!file.ok() && !file.status().IsNotFound()) return file.status();
  if (file.ok() && ::fdatasync((*file)->fd()) != 0) {
    return Status::FromErrno(fmt::format("staging cache file of inode {}: fdatasync", fh->ino), errno);
  }
  if (file.ok()) CAIRN_RETURN_IF_ERROR(archive_.cache().SyncNames());
  Archive::PendingSync pending;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    if (state_.writeback_failed.erase(fh->ino)) {
      return Status::IOError(fmt::format("staging cache file of inode {}: an earlier write-back failed", fh->ino));
    }
    CAIRN_RETURN_IF_ERROR(archive_.Commit(Archive::SyncWhen::kAlways, &pending));
    if (state_.dirty.contains(fh->ino)) state_.persist_queue.try_emplace(fh->ino, NowNs());  // see Release
  }
  data.unlock();
  return archive_.MakeDurable(std::move(pending));
}

void FileData::Release(FileHandle* fh) {
  std::unique_ptr<FileHandle> handle(fh);
  std::unique_lock lock(archive_.catalog_mutex());
  auto it = state_.live.find(handle->ino);
  if (it == state_.live.end()) return;
  LiveInode& live = it->second;
  live.nopen -= std::min<uint32_t>(1, live.nopen);
  if (handle->writable) {
    live.nwriters -= std::min<uint32_t>(1, live.nwriters);
    if (live.nwriters == 0) {
      archive_.cache().Unpin(handle->ino);
      state_.writers_closed.notify_all();
    }
  }
  if (live.nwriters == 0 && state_.dirty.contains(handle->ino)) {
    // The persister polls (a wakeup per close costs more). Queued since the first close: the
    // closes of readers after it must not keep putting it off.
    state_.persist_queue.try_emplace(handle->ino, NowNs());
    state_.last_activity_ns = NowNs();
  }
  // Persisted while open (idle rule): it is clean now, so it may be evicted.
  bool clean_now = live.nwriters == 0 && handle->writable && !state_.dirty.contains(handle->ino) &&
                   !state_.cached.contains(handle->ino);
  if (live.nopen == 0 && live.nlookup == 0) {
    state_.live.erase(it);
    names_.FreeIfUnreferenced(handle->ino);
  }
  lock.unlock();
  if (clean_now) cache_.TouchCached({handle->ino});
}

Result<InodeRecord> FileData::Truncate(uint64_t ino, const SetAttrRequest& request, KeyCheck* keys) {
  if (*request.size > kMaxFileSize) {
    return Status::Posix(EFBIG, fmt::format("files end at {} bytes", kMaxFileSize));
  }
  auto data = state_.data_locks.Exclusive(ino);
  // Shrinking into a persisted segment that is not cached: bring it back first, so the
  // bytes before the new end survive the copy-on-write re-persist.
  uint64_t boundary = 0;
  bool need_fetch = false;
  uint64_t old_size = 0;  // the data lock keeps it
  {
    std::lock_guard lock(archive_.catalog_mutex());
    auto inode = GetInodeOrENOENT(archive_.catalog(), ino);
    if (!inode.ok()) return inode.status();
    if (IsDir(*inode)) return Status::Posix(EISDIR, "cannot truncate a directory");
    if (!S_ISREG(inode->mode)) return Status::Posix(EINVAL, "cannot truncate a special file");
    CAIRN_RETURN_IF_ERROR(CheckInodeRecord(*inode));
    old_size = inode->size;
    uint64_t segment_size = SegmentSizeOf(archive_, *inode);
    boundary = *request.size / segment_size;
    auto segment = archive_.catalog().GetSegment(ino, boundary);
    if (!segment.ok()) return segment.status();
    need_fetch =
        *request.size < inode->size && *request.size % segment_size != 0 && *segment && !(*segment)->cached;
  }
  if (need_fetch) {
    auto file = archive_.cache().Open(ino);
    if (!file.ok()) return file.status();
    CAIRN_RETURN_IF_ERROR(FetchSegments(ino, (*file)->fd(), boundary, boundary));
  }
  if (*request.size > old_size) {
    // Grown before the new size is committed: the staging cache's file system may end files
    // sooner than cairn does (ext4: 4 KiB before 16 TiB), and its EFBIG must leave the size
    // as it was. Cut first, so bytes a failed or crashed write left past the old end read
    // as zeros, as POSIX wants for the extension; longer than the size, the cache file is
    // harmless should the commit fail (see Write).
    CAIRN_RETURN_IF_ERROR(archive_.cache().Truncate(ino, old_size));
    CAIRN_RETURN_IF_ERROR(archive_.cache().Truncate(ino, *request.size));
  }
  std::unique_lock lock(archive_.catalog_mutex());
  bool resized = false;
  // What the resize below changes in memory, put back if the catalog rolls it back: a segment
  // it took out of `persisting` would be committed by the persist in flight as clean.
  std::optional<DirtyFile> dirty_before;
  if (auto it = state_.dirty.find(ino); it != state_.dirty.end()) dirty_before = it->second;
  bool marked_dirty = false;  // a clean file made dirty
  auto updated = names_.SetAttrLocked(ino, request, [&](InodeRecord& inode, int64_t now) -> Status {
    uint64_t new_size = *request.size;
    uint64_t segment_size = SegmentSizeOf(archive_, inode);
    uint64_t old_count = (old_size + segment_size - 1) / segment_size;
    uint64_t new_count = (new_size + segment_size - 1) / segment_size;
    DirtyFile& dirty = state_.dirty[ino];
    if (new_size < old_size) {
      // A persist in flight must not commit the bytes cut off: the file may grow over them
      // again. A first persist's segment size is not known here: none of it is kept, and
      // all_cached has the whole file persisted again.
      uint64_t kept = inode.segment_size == 0 ? 0 : new_count;
      dirty.persisting.erase(dirty.persisting.lower_bound(kept), dirty.persisting.end());
    }
    if (inode.segment_size == 0) {
      dirty.all_cached = true;  // segment size not decided yet (see Write)
    } else if (new_size < old_size) {
      CAIRN_RETURN_IF_ERROR(DropSegmentsFrom(archive_, ino, new_count));
      dirty.segments.erase(dirty.segments.lower_bound(new_count), dirty.segments.end());
      if (new_size % segment_size != 0) dirty.segments.insert(new_size / segment_size);
    } else {
      for (uint64_t i = old_count; i < new_count; i++) dirty.segments.insert(i);
    }
    // Segments still being persisted keep it dirty, durably: only their commit makes it
    // clean, and a crash before that commit must find their cache copy still wanted.
    if (dirty.segments.empty() && dirty.persisting.empty() && !dirty.all_cached) {
      state_.EraseDirty(ino);
      inode.dirty = false;
    } else {
      marked_dirty = !inode.dirty;
      inode.dirty = true;
      dirty.last_write_ns = now;
      state_.DropCached(ino);
    }
    inode.size = new_size;
    inode.mtime_ns = now;
    resized = true;
    return Status::OK();
  }, keys);
  if (!updated.ok()) {
    state_.EraseDirty(ino);
    if (dirty_before) state_.RestoreDirty(ino, *dirty_before);
    return updated;
  }
  InodeRecord inode = *updated;
  if (!resized) return inode;
  auto live = state_.live.find(ino);
  bool writing = live != state_.live.end() && live->second.nwriters > 0;
  if (!writing && state_.dirty.contains(ino)) state_.persist_queue.try_emplace(ino, NowNs());  // see Release
  // The new size is committed before the cache copy shrinks (the data lock, not the
  // catalog's, is held throughout), durably: a power loss must not bring back the old size
  // over a copy already cut, whose cut bytes may have been the only copy of fsync'd data.
  // So is a dirty mark it set: Write trusts a dirty mark it finds to be synced (see there).
  Archive::PendingSync pending;
  auto when = inode.size < old_size || marked_dirty ? Archive::SyncWhen::kAlways : Archive::SyncWhen::kNever;
  CAIRN_RETURN_IF_ERROR(archive_.Commit(when, &pending));
  lock.unlock();
  CAIRN_RETURN_IF_ERROR(archive_.MakeDurable(std::move(pending)));
  if (inode.size < old_size) CAIRN_RETURN_IF_ERROR(archive_.cache().Truncate(ino, inode.size));  // grown above
  return inode;
}

Status FileData::FetchSegments(uint64_t ino, int fd, uint64_t first, uint64_t last) {
  std::vector<uint64_t> fetched;
  std::vector<uint8_t> buffer;
  for (uint64_t index = first; index <= last; index++) {
    std::optional<SegmentRecord> segment;
    uint64_t segment_size;
    {
      std::lock_guard lock(archive_.catalog_mutex());
      auto found = archive_.catalog().GetSegment(ino, index);
      if (!found.ok()) return found.status();
      segment = std::move(*found);
      auto inode = GetInodeOrENOENT(archive_.catalog(), ino);
      if (!inode.ok()) return inode.status();
      if (segment) CAIRN_RETURN_IF_ERROR(CheckSegmentRecord(*segment, *inode));
      segment_size = SegmentSizeOf(archive_, *inode);
    }
    if (!segment || segment->cached) continue;
    buffer.resize(segment->length);
    CAIRN_RETURN_IF_ERROR(store_.Read(*segment, 0, buffer));
    CAIRN_RETURN_IF_ERROR(StagingCache::WriteAt(fd, index * segment_size, buffer));
    fetched.push_back(index);
  }
  if (fetched.empty()) return Status::OK();
  if (::fdatasync(fd) != 0) {  // it may be about the file's earlier writes, which Fsync vouches for
    int err = errno;
    std::lock_guard lock(archive_.catalog_mutex());
    state_.writeback_failed.insert(ino);
    return Status::FromErrno(fmt::format("staging cache file of inode {}: fdatasync", ino), err);
  }
  // The cache file may be new (the write or truncate that fetches made it): its name must
  // be durable too before the catalog says the segments are in it.
  CAIRN_RETURN_IF_ERROR(archive_.cache().SyncNames());
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  return InTransaction(catalog, [&]() -> Status {
    for (uint64_t index : fetched) CAIRN_RETURN_IF_ERROR(catalog.SetSegmentCached(ino, index, true));
    return Status::OK();
  });
}

}  // namespace cairn
