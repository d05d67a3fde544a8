// Reconciler re-encodes persisted files whose extents no longer match their effective
// policy (user.cairn.state = out-of-policy) after a setfattr, a rename or a rules change.
// Its to-do list is the catalog's policy_queue, so work survives a restart. It runs in
// the background (throttled to reconcile_rate, idle while the filesystem is busy) and on
// demand (cairn policy apply). Old extents stay readable until the new ones commit.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "archive/archive.h"
#include "pipeline/file_state.h"
#include "pipeline/segment_store.h"
#include "pipeline/segment_writer.h"

namespace cairn {

class Reconciler {
 public:
  struct Progress {
    uint64_t files_total = 0;  // out-of-policy files found
    uint64_t bytes_total = 0;
    uint64_t files_done = 0;   // re-encoded and committed
    uint64_t bytes_done = 0;   // written so far
    uint64_t files_busy = 0;   // being written: left queued for later
    uint64_t files_failed = 0; // unreadable, damaged or their policy cannot be met: left as they are (logged)
    uint64_t files_in_policy = 0;  // in policy by their turn: re-encoded in the background meanwhile, or
                                   // their policy changed back
  };
  // Called after every commit and every chunk written; returning false cancels the run
  // (what is not committed yet is dropped).
  using ProgressFn = std::function<bool(const Progress&)>;

  Reconciler(Archive& archive, FileState& state, SegmentStore& store);
  ~Reconciler();

  void Start();
  void Stop();
  // Re-encodes every out-of-policy file at or below `ino` now, unthrottled. Cancelling
  // leaves finished files finished and the rest queued for the background.
  Status Apply(uint64_t ino, const ProgressFn& report);

 private:
  void Run();
  // Rules on mtime or atime change their answer as time passes: with such rules the whole
  // tree is queued for a check once a day (the last time is kept in the catalog).
  void QueueAgeScan();
  // Works through up to `limit` queue entries above *after: directories are replaced by
  // their children, files in policy leave the queue, the rest are re-encoded (sorted by
  // disk, so a batch wakes each disk once). One that fails is logged and stays queued.
  // Moves *after to the last entry looked at; returns how many it looked at (0: the end
  // of the queue). Entries that stay queued (busy, failing) are passed over, so they
  // cannot keep the rest of the queue waiting.
  Result<size_t> RunQueue(uint64_t* after, size_t limit);
  // Queues the entries of a queued directory (what is below may have a new policy) and
  // takes the directory off the queue: a page of entries per hold of the catalog mutex
  // (an entry renamed meanwhile may be queued twice: harmless).
  Status QueueChildren(uint64_t dir);
  // The out-of-policy files at or below `ino` with their sizes, and the directories.
  // Takes the catalog mutex step by step.
  Status CollectOutOfPolicy(uint64_t ino, std::vector<std::pair<uint64_t, uint64_t>>* files,
                            std::vector<uint64_t>* dirs);
  // Whether a persisted file is laid out as its policy says; the policy goes to *resolved
  // when given. REQUIRES: catalog mutex.
  Result<bool> InPolicy(const InodeRecord& inode, ResolvedPolicy* resolved = nullptr);
  struct Job;
  struct Batch;
  // Rewrites `inos` with their effective policies, small files packed together, and
  // swaps the catalog over to the new extents in commits of a bounded size. A file that
  // is being written, or changes meanwhile, is left queued. `report` (may be empty) sees
  // the progress and may cancel.
  Status Reencode(const std::vector<uint64_t>& inos, bool throttle, Progress* progress, const ProgressFn& report);
  // Reads a file's state and plans its new layout; false when there is nothing to do, it
  // is busy (counted in *progress) or, in the background, it failed lately.
  // REQUIRES: catalog mutex, run_mutex_.
  bool Plan(uint64_t ino, bool background, Job* job, Progress* progress);
  // Reads segment `index` of the new layout from the old extents.
  Status ReadNewSegment(const Job& job, uint64_t index, std::vector<uint8_t>* data);
  // Whether `job`'s file is still as it was planned: size, mtime, layout, not dirty, the same
  // segments. A failing query counts as a change (logged): the file stays queued.
  // REQUIRES: catalog mutex held.
  bool Unchanged(const Job& job);
  // Writes the pending pieces of `batch` as extents (WriteSegments) and frees their data.
  Status WritePending(Batch& batch);
  // Swaps the files of `batch` that did not change; releases what nobody uses.
  Status Commit(Batch& batch, Progress* progress);
  // Sleeps as long as needed to keep the background rate at reconcile_rate.
  void Throttle(uint64_t bytes);

  Archive& archive_;
  FileState& state_;
  SegmentStore& store_;
  std::mutex run_mutex_;  // one re-encode at a time
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::atomic<bool> cancel_{false};
  std::map<uint64_t, int64_t> retry_after_;  // unreadable files: ino -> when to try again (run_mutex_)
  int64_t throttle_start_ns_ = 0;
  uint64_t throttle_bytes_ = 0;
  std::thread thread_;
};

}  // namespace cairn
