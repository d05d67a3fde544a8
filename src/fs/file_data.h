// FileData moves the contents of files: open and release, reads (the staging cache first,
// persisted segments from the disks), writes into the staging cache, fsync, and truncation,
// fetching evicted segments back into the cache where a write or a truncate needs them.
// Thread-safe: a file's data lock, then the catalog mutex (pipeline/file_state.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "archive/archive.h"
#include "fs/cache_manager.h"
#include "fs/fs_types.h"
#include "fs/namespace.h"
#include "fs/read_reply.h"
#include "pipeline/file_state.h"
#include "pipeline/segment_store.h"

namespace cairn {

class FileData {
 public:
  FileData(Archive& archive, FileState& state, SegmentStore& store, Namespace& names, CacheManager& cache)
      : archive_(archive), state_(state), store_(store), names_(names), cache_(cache) {}

  Result<FileHandle*> Open(uint64_t ino, int flags);
  // Up to `size` bytes at `offset` (fewer at the end of the file) into `reply`.
  Status Read(FileHandle* fh, uint64_t offset, size_t size, ReadReply& reply);
  Result<size_t> Write(FileHandle* fh, uint64_t offset, std::span<const uint8_t> src);
  // Makes the file's data and attributes durable (cache file + catalog) and queues it.
  Status Fsync(FileHandle* fh);
  // Makes every metadata change so far durable (fsync of a directory).
  Status SyncMetadata() { return archive_.CommitDurably(); }
  void Release(FileHandle* fh);
  // setattr with a size: cuts or extends the file (segment map, dirty state, cache file)
  // and sets the request's other attributes in the same transaction.
  // `keys` as for Namespace::SetAttr.
  Result<InodeRecord> Truncate(uint64_t ino, const SetAttrRequest& request, KeyCheck* keys);

 private:
  // Brings persisted segments [first, last] of `ino` back into the staging cache.
  // REQUIRES: the file's data lock held (exclusive), catalog mutex NOT held.
  Status FetchSegments(uint64_t ino, int fd, uint64_t first, uint64_t last);

  Archive& archive_;
  FileState& state_;
  SegmentStore& store_;
  Namespace& names_;
  CacheManager& cache_;
};

}  // namespace cairn
