// CacheManager keeps the staging cache within cache_size: clean files wait in the eviction
// LRU (FileState), and once the cache is over budget the least recently used ones are
// evicted, then the persisted parts of files still being written. Eviction commits durably
// that the catalog no longer points at the cache before the cache copies go.
// Thread-safe: the persister's batch mutex, data locks, then the catalog mutex.
#pragma once

#include <cstdint>
#include <vector>

#include "archive/archive.h"
#include "pipeline/file_state.h"
#include "pipeline/persister.h"

namespace cairn {

class CacheManager {
 public:
  // Holds on to `persister` by reference only: it may be built after this.
  CacheManager(Archive& archive, FileState& state, Persister& persister)
      : archive_(archive), state_(state), persister_(persister) {}

  // Puts clean files into the eviction LRU, unless deleted or written to since. Takes the
  // catalog mutex; sizes them without it.
  void TouchCached(const std::vector<uint64_t>& inos);
  // Evicts least recently used clean files (then persisted parts of files still being
  // written) while the cache is over its budget.
  void EvictOverBudget();
  // Persists everything, then drops all clean files from the staging cache (cairn evict).
  Status EvictAll();
  // Drops the staging cache's copies of the persisted segments of `inos`, open files too
  // (cairn key delete --erase: their extents no longer decrypt, and these copies must not be
  // read instead). A segment changed since it was persisted goes too, with what was written
  // there since (its cache copy holds the persisted plaintext around it): it reads from its
  // extent again. Data that was never persisted stays. Returns how many changed segments went.
  Result<uint64_t> DropPersistedCopies(const std::vector<uint64_t>& inos);

 private:
  // Whether eviction waits for files in use (a read holding a file's data lock may be waiting
  // for a disk to spin up) or leaves them for its next pass.
  enum class Busy { kWait, kSkip };
  // Evicts the clean files among `inos` from the staging cache, a durable commit per group.
  Status EvictFiles(const std::vector<uint64_t>& inos, Busy busy = Busy::kWait);
  // Drops the persisted, unmodified segments of a file that is still open from the cache.
  Status EvictCleanSegments(uint64_t ino);
  // Drops the dirty segments of `ino` that have a persisted extent (DropPersistedCopies);
  // how many.
  Result<uint64_t> DropChangedPersistedSegments(uint64_t ino);

  Archive& archive_;
  FileState& state_;
  Persister& persister_;
};

}  // namespace cairn
