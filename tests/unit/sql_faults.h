// SqlFaults makes chosen catalog queries fail, as a damaged or failing catalog would: while
// armed, a statement whose SQL contains the armed fragment is interrupted by SQLite (its
// step returns SQLITE_INTERRUPT) on every connection opened meanwhile or watched.
// It hooks SQLite's public progress handler, so the code under test is unchanged.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <mutex>
#include <string>

namespace cairn::test {

class SqlFaults {
 public:
  // Installs itself on every connection opened from now on, until destroyed. One at a time.
  SqlFaults() {
    active_ = this;
    sqlite3_auto_extension(reinterpret_cast<void (*)()>(&Install));
  }
  ~SqlFaults() {
    sqlite3_cancel_auto_extension(reinterpret_cast<void (*)()>(&Install));
    Disarm();
    active_ = nullptr;
  }
  SqlFaults(const SqlFaults&) = delete;
  SqlFaults& operator=(const SqlFaults&) = delete;

  // Also fails the statements of `db`, a connection opened before this object.
  void Watch(sqlite3* db) { sqlite3_progress_handler(db, 1, &OnProgress, db); }

  // Fails from now on every statement whose SQL contains `fragment`.
  void Arm(std::string fragment) {
    std::lock_guard lock(mutex_);
    fragment_ = std::move(fragment);
    armed_ = true;
  }
  void Disarm() { armed_ = false; }
  // How many statement steps were made to fail.
  int injected() const { return injected_; }

 private:
  static int Install(sqlite3* db, const char**, const void*) {
    sqlite3_progress_handler(db, 1, &OnProgress, db);
    return SQLITE_OK;
  }

  // Called between SQLite's VM steps: non-zero interrupts the statement being run.
  static int OnProgress(void* connection) {
    SqlFaults* self = active_;
    if (!self || !self->armed_) return 0;
    auto* db = static_cast<sqlite3*>(connection);
    std::lock_guard lock(self->mutex_);
    for (sqlite3_stmt* s = sqlite3_next_stmt(db, nullptr); s; s = sqlite3_next_stmt(db, s)) {
      const char* sql = sqlite3_sql(s);
      if (sqlite3_stmt_busy(s) && sql && std::string(sql).find(self->fragment_) != std::string::npos) {
        self->injected_++;
        return 1;
      }
    }
    return 0;
  }

  static inline std::atomic<SqlFaults*> active_{nullptr};
  std::atomic<bool> armed_{false};
  std::atomic<int> injected_{0};
  std::mutex mutex_;
  std::string fragment_;  // guarded by mutex_
};

}  // namespace cairn::test
