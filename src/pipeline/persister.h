// Persister turns dirty files in the staging cache into extents on the disks: one
// extent per large segment, small segments packed together. It runs on a background
// thread (closed files at once, open ones after persist_idle seconds) and on demand,
// in rounds that take a bounded slice of every due file and about one slice's worth per
// owner, so neither one huge file nor one user's many files hold up the others.
// New extents are synced before the catalog commit that points at them; replaced
// extents are freed only after that commit is durable.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "archive/archive.h"
#include "pipeline/file_state.h"
#include "pipeline/segment_store.h"
#include "pipeline/segment_writer.h"

namespace cairn {

class Persister {
 public:
  Persister(Archive& archive, FileState& state, SegmentStore& store);
  ~Persister();

  void Start();
  // Stops the thread, once a round in flight is done; PersistAll persists what is left.
  void Stop();
  // Persists every dirty file now, on the calling thread.
  Status PersistAll();
  // Held while a batch is being persisted. Eviction takes it too: a segment taken out of
  // the dirty set by a snapshot is not clean until its commit, and must not be evicted.
  // Lock order: this, then data locks, then the catalog mutex.
  std::mutex& batch_mutex() { return run_mutex_; }
  // Called after every poll and batch, with no locks held (eviction hook).
  void SetAfterBatch(std::function<void()> fn) { after_batch_ = std::move(fn); }
  // Called after a commit with the files it left clean and closed, with no locks held (they
  // may join the eviction LRU).
  void SetOnClean(std::function<void(const std::vector<uint64_t>&)> fn) { on_clean_ = std::move(fn); }

 private:
  void Run();
  // Persists one slice of each of the given files, as long as their owner has not had
  // about one slice's worth this round; returns those with more to persist. Files that
  // cannot be persisted now (no data key, their cache file or policy failing) are left
  // dirty, queued for a retry and added to *left_out with why; the others go on.
  // Serialized by run_mutex_.
  Result<std::vector<uint64_t>> PersistRound(const std::vector<uint64_t>& inos, std::map<uint64_t, Status>* left_out);
  // Puts the files of `inos` that are still dirty and not queued back in the queue, due
  // after the retry delay: a round that failed took them off it. REQUIRES: catalog mutex.
  void RequeueAfterFailure(const std::vector<uint64_t>& inos);
  // The owner (uid) of each file, 0 for a file that is gone; an error when the catalog fails.
  Result<std::vector<uint32_t>> OwnersOf(const std::vector<uint64_t>& inos);
  // Reads a slice of the dirty segments of `ino` out of the staging cache (moving their
  // dirty marks to DirtyFile::persisting until the commit); holes are found without reading
  // them. Returns whether more are left.
  Result<bool> Snapshot(uint64_t ino, std::vector<SegmentPiece>& pieces);
  // After a failed persist of `ino`: if it was the file's first (no segment size committed
  // yet), its dirty segments were counted in the segment size of a policy that may change
  // before the retry, so the retry counts them anew. REQUIRES: catalog mutex held.
  void RecountIfFirstPersist(uint64_t ino, DirtyFile& dirty);
  // Writes pieces as extents, syncs the disks, commits the catalog; see PersistRound for
  // `left_out`.
  Status WriteAndCommit(std::vector<SegmentPiece>& pieces, std::map<uint64_t, Status>* left_out);
  // Selects queued files that are due. REQUIRES: catalog mutex.
  std::vector<uint64_t> DueFiles(int64_t now_ns);

  Archive& archive_;
  FileState& state_;
  SegmentStore& store_;
  std::function<void()> after_batch_;
  std::function<void(const std::vector<uint64_t>&)> on_clean_;
  std::mutex run_mutex_;  // one batch at a time
  // Why each file left out of its batch was, as last logged: a file that keeps failing the
  // same way is logged once, not at every retry. Guarded by run_mutex_.
  std::map<uint64_t, std::string> left_out_logged_;
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace cairn
