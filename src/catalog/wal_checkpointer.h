// Checkpoints the catalog's WAL from a thread and a connection of its own, so no commit
// (made under the catalog mutex) ever does it: passive checkpoints while the catalog
// changes, a truncating one once it is idle. This keeps the WAL bounded under churn.
#pragma once

#include <sqlite3.h>

#include <condition_variable>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cairn/status.h"

namespace cairn {

class WalCheckpointer {
 public:
  // Opens its own connection to the catalog at `path` and starts checkpointing every
  // `interval`.
  static Result<std::unique_ptr<WalCheckpointer>> Start(const std::string& path, std::chrono::milliseconds interval);
  ~WalCheckpointer();  // stops the thread and closes the connection
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

 private:
  WalCheckpointer(sqlite3* db, std::chrono::milliseconds interval) : db_(db), interval_(interval) {}
  void Run();
  // Passive, or truncating when no frame was added since the last round. BUSY (a writer
  // or reader in the way) is no error: the next round tries again.
  Status CheckpointOnce();

  sqlite3* db_;
  const std::chrono::milliseconds interval_;
  int last_frames_ = -1;  // frames in the WAL after the last round
  bool failing_ = false;  // the last round failed (logged once, until one works again)
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace cairn
