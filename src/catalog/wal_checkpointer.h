// Checkpoints the catalog's WAL from a thread and a connection of its own, so no commit
// (made under the catalog mutex) ever does it: passive checkpoints while the catalog
// changes, a truncating one once it is idle. This keeps the WAL bounded under churn.
#pragma once

#include <sqlite3.h>

#include <condition_variable>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cairn/status.h"

namespace cairn {

class WalCheckpointer {
 public:
  // Runs the given checkpoint at a moment no catalog batch is open and none can begin (the
  // catalog's mutex held, its open batch committed).
  using BetweenBatches = std::function<Status(const std::function<Status()>& checkpoint)>;

  // Opens its own connection to the catalog at `path` and starts checkpointing every
  // `interval`.
  static Result<std::unique_ptr<WalCheckpointer>> Start(const std::string& path, std::chrono::milliseconds interval,
                                                        BetweenBatches between_batches);
  ~WalCheckpointer();  // stops the thread and closes the connection
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

 private:
  WalCheckpointer(sqlite3* db, std::chrono::milliseconds interval, BetweenBatches between_batches)
      : db_(db), interval_(interval), between_batches_(std::move(between_batches)) {}
  void Run();
  // Passive, then truncating when no frame was added since the last round, or restarting
  // between two batches when the WAL holds kRestartFrames or more. BUSY (a writer or reader
  // in the way) is no error: the next round tries again.
  Status CheckpointOnce();

  static constexpr int kRestartFrames = 512;  // 2 MiB of catalog pages
  static constexpr int kBusyMilliseconds = 200;

  sqlite3* db_;
  const std::chrono::milliseconds interval_;
  const BetweenBatches between_batches_;
  int last_frames_ = -1;  // frames in the WAL after the last round
  bool failing_ = false;  // the last round failed (logged once, until one works again)
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace cairn
