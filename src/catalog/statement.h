// A prepared SQLite statement with typed bind/column helpers. Not thread-safe: the
// Catalog that owns it serializes access.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/status.h"

namespace cairn {

class BatchJournal;

class Statement {
 public:
  // With a `journal`, Run() records the changes it makes inside a transaction there.
  Statement(sqlite3* db, std::string_view sql, BatchJournal* journal = nullptr);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  bool prepared() const { return stmt_ != nullptr; }

  // Binds parameters 1..n in order; resets the statement first.
  template <typename... Args>
  Statement& Bind(const Args&... args) {
    Reset();
    if (!stmt_) return *this;
    int index = 1;
    (BindOne(index++, args), ...);
    return *this;
  }

  // Advances to the next row: true when a row is available, false when done.
  // Errors are remembered and returned by status().
  bool Step();
  // Runs to completion, ignoring rows.
  Status Run();
  Status status() const { return status_; }

  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  uint64_t UInt(int column) const { return static_cast<uint64_t>(sqlite3_column_int64(stmt_, column)); }
  std::string Text(int column) const;
  std::vector<uint8_t> Blob(int column) const;

 private:
  void Reset();
  void BindOne(int index, int64_t v) { sqlite3_bind_int64(stmt_, index, v); }
  void BindOne(int index, uint64_t v) { sqlite3_bind_int64(stmt_, index, static_cast<int64_t>(v)); }
  void BindOne(int index, int v) { sqlite3_bind_int64(stmt_, index, v); }
  void BindOne(int index, unsigned v) { sqlite3_bind_int64(stmt_, index, v); }
  void BindOne(int index, bool v) { sqlite3_bind_int64(stmt_, index, v ? 1 : 0); }
  void BindOne(int index, std::string_view v) {
    sqlite3_bind_blob(stmt_, index, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void BindOne(int index, const std::string& v) { BindOne(index, std::string_view(v)); }
  void BindOne(int index, const char* v) { BindOne(index, std::string_view(v)); }
  void BindOne(int index, std::span<const uint8_t> v) {
    if (v.empty()) {
      sqlite3_bind_zeroblob(stmt_, index, 0);  // an empty value, not NULL
    } else {
      sqlite3_bind_blob(stmt_, index, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    }
  }
  void BindOne(int index, const std::vector<uint8_t>& v) { BindOne(index, std::span<const uint8_t>(v)); }
  void BindOne(int index, std::nullptr_t) { sqlite3_bind_null(stmt_, index); }

  sqlite3* db_;
  BatchJournal* journal_;
  sqlite3_stmt* stmt_ = nullptr;
  Status status_;
};

}  // namespace cairn
