#include "catalog/wal_checkpointer.h"

#include <fmt/format.h>

#include "util/log.h"

namespace cairn {

Result<std::unique_ptr<WalCheckpointer>> WalCheckpointer::Start(const std::string& path,
                                                                 std::chrono::milliseconds interval,
                                                                 BetweenBatches between_batches) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    Status st = Status::IOError(fmt::format("catalog: cannot open {} for checkpoints: {}", path,
                                            db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return st;
  }
  // Short: a truncating checkpoint waits for the daemon's writer, which must not wait long for it.
  sqlite3_busy_timeout(db, kBusyMilliseconds);
  // A connection sees the WAL only once it has read the database; until then checkpoints do nothing.
  char* error = nullptr;
  if (sqlite3_exec(db, "PRAGMA journal_mode=WAL", nullptr, nullptr, &error) != SQLITE_OK) {
    Status st = Status::IOError(fmt::format("catalog: cannot open {} for checkpoints: {}", path, error ? error : "?"));
    sqlite3_free(error);
    sqlite3_close(db);
    return st;
  }
  std::unique_ptr<WalCheckpointer> checkpointer(new WalCheckpointer(db, interval, std::move(between_batches)));
  checkpointer->thread_ = std::thread([c = checkpointer.get()] { c->Run(); });
  return checkpointer;
}

WalCheckpointer::~WalCheckpointer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  sqlite3_close(db_);
}

void WalCheckpointer::Run() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, interval_, [this] { return stopping_; });
      if (stopping_) return;
    }
    Status st = CheckpointOnce();
    if (!st.ok() && !failing_) LogError("{} (the WAL grows until a checkpoint works)", st.message());
    if (st.ok() && failing_) LogInfo("catalog: WAL checkpoints work again");
    failing_ = !st.ok();
  }
}

Status WalCheckpointer::CheckpointOnce() {
  auto checkpoint = [this](int mode, int* frames, int* backfilled) -> Result<bool> {
    int rc = sqlite3_wal_checkpoint_v2(db_, nullptr, mode, frames, backfilled);
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) return false;
    if (rc != SQLITE_OK) return Status::IOError(fmt::format("catalog: WAL checkpoint failed: {}", sqlite3_errmsg(db_)));
    return true;
  };
  int frames = 0;
  int backfilled = 0;
  auto done = checkpoint(SQLITE_CHECKPOINT_PASSIVE, &frames, &backfilled);
  if (!done.ok() || !*done) return done.status();
  bool idle = frames > 0 && frames == last_frames_ && backfilled == frames;
  last_frames_ = frames;
  if (idle) {
    done = checkpoint(SQLITE_CHECKPOINT_TRUNCATE, &frames, &backfilled);
    if (done.ok() && *done) last_frames_ = 0;
    return done.status();
  }
  // SQLite starts the WAL over when a batch begins with every frame copied back, which under
  // steady commits never happens: one has always just committed. So the frames committed
  // since the passive checkpoint (a few) are copied back between two batches, the catalog
  // waiting meanwhile (a short copy and a sync of the database file, once per
  // kRestartFrames), and the next batch starts the WAL over. No busy wait there: a reader in
  // another process (a read-only cairn command) makes it BUSY, and the next round tries again.
  if (frames < kRestartFrames) return Status::OK();
  sqlite3_busy_timeout(db_, 0);
  Status restarted = between_batches_([&] { return checkpoint(SQLITE_CHECKPOINT_RESTART, &frames, &backfilled).status(); });
  sqlite3_busy_timeout(db_, kBusyMilliseconds);
  return restarted;
}

}  // namespace cairn
