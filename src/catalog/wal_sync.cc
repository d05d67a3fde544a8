#include "catalog/wal_sync.h"

#include <cstdlib>

#include <fmt/format.h>

namespace cairn {

Result<std::unique_ptr<WalSync>> WalSync::Open(sqlite3* db) {
  sqlite3_vfs* vfs = nullptr;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &vfs) != SQLITE_OK || !vfs) {
    return Status::IOError("catalog: cannot find the VFS of the catalog's connection");
  }
  const char* db_path = sqlite3_db_filename(db, "main");
  if (!db_path || !*db_path) return Status::IOError("catalog: the connection has no database file");
  std::string path = std::string(db_path) + "-wal";  // the name SQLite gives the WAL
  auto* file = static_cast<sqlite3_file*>(std::calloc(1, vfs->szOsFile));
  if (!file) return Status::NoSpace("catalog: out of memory for the WAL handle");
  std::unique_ptr<WalSync> sync(new WalSync(std::move(path), file));
  int out_flags = 0;
  int rc = vfs->xOpen(vfs, sync->path_.c_str(), file, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_WAL,
                      &out_flags);
  if (rc != SQLITE_OK) {
    file->pMethods = nullptr;  // nothing to close
    return Status::IOError(fmt::format("catalog: cannot open {} to sync it: {}", sync->path_, sqlite3_errstr(rc)));
  }
  return sync;
}

WalSync::~WalSync() {
  if (file_->pMethods) file_->pMethods->xClose(file_);
  std::free(file_);
}

Status WalSync::SyncThrough(uint64_t sequence) {
  std::lock_guard lock(mutex_);
  if (!failure_.ok()) return failure_;
  if (synced_ >= sequence) return Status::OK();  // an fsync that began after it covered it
  uint64_t through = committed_;  // every commit up to here has written its frames
  if (int rc = file_->pMethods->xSync(file_, SQLITE_SYNC_NORMAL); rc != SQLITE_OK) {
    failure_ = Status::IOError(fmt::format("catalog: fsync of {} failed ({}): commits since the last good one may "
                                           "not survive a power loss; restart the daemon",
                                           path_, sqlite3_errstr(rc)));
    return failure_;
  }
  synced_ = through;
  return Status::OK();
}

}  // namespace cairn
