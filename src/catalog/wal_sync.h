// WalSync makes catalog commits durable without the connection that made them: it fsyncs
// the WAL through a handle of its own, so a sync never holds the mutex that serializes
// catalog queries. Commits are numbered; one fsync covers every commit made before it
// began (group commit). Thread-safe.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "cairn/status.h"

namespace cairn {

class WalSync {
 public:
  // Opens the WAL of `db` (a connection in WAL mode) through the connection's own VFS, so
  // whatever that VFS does with syncs (a test's power-loss shim) sees these too.
  static Result<std::unique_ptr<WalSync>> Open(sqlite3* db);
  ~WalSync();
  WalSync(const WalSync&) = delete;
  WalSync& operator=(const WalSync&) = delete;

  // Numbers a commit the connection has just made (its frames are in the WAL, not yet
  // synced) and returns its number. Called by the connection's single user.
  uint64_t Committed() { return ++committed_; }
  // The number of the last commit made.
  uint64_t committed() const { return committed_; }
  // Returns once every commit numbered up to `sequence` is on stable storage. After a
  // failed fsync the WAL's state is unknown: that call and every later one fail.
  Status SyncThrough(uint64_t sequence);

 private:
  WalSync(std::string path, sqlite3_file* file) : path_(std::move(path)), file_(file) {}

  const std::string path_;  // outlives file_, which SQLite's VFS may point into
  sqlite3_file* file_;      // allocated with the VFS's szOsFile bytes
  std::atomic<uint64_t> committed_{0};
  std::mutex mutex_;        // one fsync at a time
  uint64_t synced_ = 0;     // guarded by mutex_: commits known durable
  Status failure_;          // guarded by mutex_: the failed fsync, for good
};

}  // namespace cairn
