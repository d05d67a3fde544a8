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
  // Whether it may change the database (and so is journaled).
  bool writes() const { return journal_ != nullptr; }

  // Binds parameters 1..n in order; resets the statement first. A failed bind is
  // remembered, and Step()/Run() then return it.
  template <typename... Args>
  Statement& Bind(const Args&... args) {
    Reset();
    if (!stmt_) return *this;
    int index = 1;
    (BindOne(index++, args), ...);
    return *this;
  }

  // Makes its runs fail with `why` until called again with OK (Catalog::MayRun: a change
  // that no batch can take, or any statement while a dropped batch waits to be replayed);
  // Replay is not refused.
  void Refuse(Status why) { refused_ = std::move(why); }

  // Advances to the next row: true when a row is available, false when done.
  // Errors are remembered and returned by status().
  bool Step();
  // Runs to completion, ignoring rows.
  Status Run();
  // Runs it again with `values` recorded by the batch journal (not journaled again).
  Status Replay(std::string_view values);
  Status status() const { return status_; }

  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  uint64_t UInt(int column) const { return static_cast<uint64_t>(sqlite3_column_int64(stmt_, column)); }
  std::string Text(int column) const;
  std::vector<uint8_t> Blob(int column) const;

 private:
  void Reset();
  // Steps to the end and resets; returns the statement's status.
  Status Execute();
  // The three kinds of value the catalog binds; strings and byte vectors are blobs (an
  // empty one is an empty value, not NULL).
  void BindInt(int index, int64_t v);
  void BindBlob(int index, std::span<const uint8_t> v);
  void BindNull(int index);
  void BindOne(int index, int64_t v) { BindInt(index, v); }
  void BindOne(int index, uint64_t v) { BindInt(index, static_cast<int64_t>(v)); }
  void BindOne(int index, int v) { BindInt(index, v); }
  void BindOne(int index, unsigned v) { BindInt(index, v); }
  void BindOne(int index, bool v) { BindInt(index, v ? 1 : 0); }
  void BindOne(int index, std::string_view v) {
    BindBlob(index, {reinterpret_cast<const uint8_t*>(v.data()), v.size()});
  }
  void BindOne(int index, const std::string& v) { BindOne(index, std::string_view(v)); }
  void BindOne(int index, const char* v) { BindOne(index, std::string_view(v)); }
  void BindOne(int index, std::span<const uint8_t> v) { BindBlob(index, v); }
  void BindOne(int index, const std::vector<uint8_t>& v) { BindBlob(index, v); }
  void BindOne(int index, std::nullptr_t) { BindNull(index); }
  void CheckBind(int rc, int index);

  sqlite3* db_;
  BatchJournal* journal_;
  sqlite3_stmt* stmt_ = nullptr;
  Status status_;
  Status refused_;
  std::string bound_;  // the values bound, encoded for the journal (journaled statements only)
};

}  // namespace cairn
