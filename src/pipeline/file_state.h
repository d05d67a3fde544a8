// FileState is the in-memory side of the namespace: kernel lookup counts, open handles,
// which segments of which files are dirty in the staging cache, and the LRU of cached
// files that eviction walks. Everything here is guarded by Archive::catalog_mutex(),
// except data_locks, which serialize the data movement of each file (data_locks.h) and are
// taken BEFORE catalog_mutex.
//
// Lock order: Persister::batch_mutex, data locks (several are taken without waiting while
// holding one, DataLocks::Exclusive), ExtentStore's space mutex, catalog_mutex. The
// catalog mutex is what every metadata operation needs: nothing reads, writes, syncs or
// discards a disk, fsyncs the catalog's WAL or the staging cache, or waits for a client
// while holding it (prepare outside, commit inside; durable commits sync after letting
// go, Archive::MakeDurable). Data locks may be held across disk I/O.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "pipeline/data_locks.h"

namespace cairn {

struct LiveInode {
  uint64_t nlookup = 0;  // kernel references (lookup replies minus forgets)
  uint32_t nopen = 0;    // open file handles
  uint32_t nwriters = 0; // open handles that may write
};

struct DirtyFile {
  std::set<uint64_t> segments;  // segment indexes whose cache copy is newer than the disks
  // Taken out of `segments` by a persist that has not committed them yet: the file is not
  // clean before that commit. Truncate takes out those it cuts off, and the commit skips them.
  std::set<uint64_t> persisting;
  bool all_cached = false;      // after a crash: every cache-resident segment is suspect
  // Catalog::policy_changes() when the plan of its first persist was made.
  uint64_t planned_at = 0;
  int64_t last_write_ns = 0;
  // Bytes written since it was last clean, at most its size: the space its persist may need
  // (a byte written twice needs it once).
  uint64_t written_bytes = 0;
  // The disk group they are counted in (the plan's when its first write knew it; "": the
  // archive's first group).
  std::string group;
};

struct FileState {
  std::unordered_map<uint64_t, LiveInode> live;
  std::map<uint64_t, DirtyFile> dirty;
  uint64_t dirty_bytes = 0;  // sum of dirty[*].written_bytes
  std::map<std::string, uint64_t> dirty_bytes_in;  // the same by DirtyFile::group

  // Records a write of `bytes` to `ino`, which is `size` bytes long after it; a file clean
  // until now is counted in `group`.
  DirtyFile& MarkWritten(uint64_t ino, uint64_t bytes, uint64_t size, const std::string& group) {
    DirtyFile& file = dirty[ino];
    if (file.written_bytes == 0) file.group = group;
    uint64_t charged = std::max(file.written_bytes, std::min(file.written_bytes + bytes, size));
    dirty_bytes += charged - file.written_bytes;
    dirty_bytes_in[file.group] += charged - file.written_bytes;
    file.written_bytes = charged;
    return file;
  }
  // Lowers what `ino` is counted for to at most `bytes` (a persist committed part of it).
  void ChargeAtMost(uint64_t ino, uint64_t bytes) {
    auto it = dirty.find(ino);
    if (it == dirty.end() || it->second.written_bytes <= bytes) return;
    uint64_t dropped = it->second.written_bytes - bytes;
    dirty_bytes -= dropped;
    dirty_bytes_in[it->second.group] -= dropped;
    it->second.written_bytes = bytes;
  }
  void EraseDirty(uint64_t ino) {
    ChargeAtMost(ino, 0);
    dirty.erase(ino);
  }
  // Puts back what EraseDirty took (an operation undone).
  void RestoreDirty(uint64_t ino, const DirtyFile& file) {
    EraseDirty(ino);
    dirty[ino] = file;
    dirty_bytes += file.written_bytes;
    dirty_bytes_in[file.group] += file.written_bytes;
  }
  // Files whose dirty data should be persisted at or after the given time.
  std::map<uint64_t, int64_t> persist_queue;
  // Notified when a file's last writable handle is released (waited on with the catalog mutex).
  std::condition_variable_any writers_closed;
  // Last write, create or close: the persister prefers quiet moments.
  int64_t last_activity_ns = 0;
  // The file the reconciler is re-encoding (0: none), for user.cairn.state.
  uint64_t migrating = 0;
  // Files whose cache file reported a write-back error to a sync other than their Fsync
  // (the kernel reports it once per descriptor): their next Fsync fails with it.
  std::set<uint64_t> writeback_failed;

  // Clean files resident in the staging cache: LRU order and bytes.
  uint64_t lru_clock = 0;
  std::map<uint64_t, uint64_t> lru_by_tick;  // tick -> ino
  std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> cached;  // ino -> (tick, bytes)
  uint64_t cached_bytes = 0;

  void TouchCached(uint64_t ino, uint64_t bytes) {
    DropCached(ino);
    uint64_t tick = ++lru_clock;
    lru_by_tick[tick] = ino;
    cached[ino] = {tick, bytes};
    cached_bytes += bytes;
  }
  void DropCached(uint64_t ino) {
    auto it = cached.find(ino);
    if (it == cached.end()) return;
    lru_by_tick.erase(it->second.first);
    cached_bytes -= it->second.second;
    cached.erase(it);
  }

  DataLocks data_locks;  // not guarded by the catalog mutex: a lock of its own per file
};

}  // namespace cairn
