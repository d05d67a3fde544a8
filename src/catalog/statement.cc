#include "catalog/statement.h"

#include <utility>

#include <fmt/format.h>

#include "catalog/batch_journal.h"

namespace cairn {

Statement::Statement(sqlite3* db, std::string_view sql, BatchJournal* journal) : db_(db), journal_(journal) {
  int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt_,
                              nullptr);
  if (rc != SQLITE_OK) {
    status_ = Status::IOError(fmt::format("catalog: cannot prepare '{}': {}", sql, sqlite3_errmsg(db)));
    stmt_ = nullptr;
  }
  // A statement that changes nothing has nothing to replay: its binds are not recorded.
  if (stmt_ && sqlite3_stmt_readonly(stmt_)) journal_ = nullptr;
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

void Statement::Reset() {
  if (!stmt_) return;  // keeps the prepare error in status_
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  status_ = Status::OK();
  bound_.clear();
}

void Statement::CheckBind(int rc, int index) {
  if (rc != SQLITE_OK && status_.ok()) {
    status_ = Status::IOError(
        fmt::format("catalog: cannot bind value {} of '{}': {}", index, sqlite3_sql(stmt_), sqlite3_errstr(rc)));
  }
}

void Statement::BindInt(int index, int64_t v) {
  CheckBind(sqlite3_bind_int64(stmt_, index, v), index);
  if (journal_) BatchJournal::AppendInt(bound_, v);
}

void Statement::BindBlob(int index, std::span<const uint8_t> v) {
  CheckBind(v.empty() ? sqlite3_bind_zeroblob(stmt_, index, 0)
                      : sqlite3_bind_blob64(stmt_, index, v.data(), v.size(), SQLITE_TRANSIENT),
            index);
  if (journal_) BatchJournal::AppendBlob(bound_, v);
}

void Statement::BindNull(int index) {
  CheckBind(sqlite3_bind_null(stmt_, index), index);
  if (journal_) BatchJournal::AppendNull(bound_);
}

bool Statement::Step() {
  if (!stmt_ || !status_.ok()) return false;  // a failed bind is not run
  if (!refused_.ok()) {
    status_ = refused_;
    return false;
  }
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) {
    status_ = Status::IOError(fmt::format("catalog: {} (code {}, in '{}')", sqlite3_errmsg(db_),
                                          sqlite3_extended_errcode(db_), sqlite3_sql(stmt_)));
  }
  return false;
}

Status Statement::Execute() {
  while (Step()) {
  }
  if (stmt_) sqlite3_reset(stmt_);
  return status_;
}

Status Statement::Run() {
  Status result = Execute();
  if (result.ok() && journal_) journal_->Record(this, stmt_, std::move(bound_));
  return result;
}

Status Statement::Replay(std::string_view values) {
  Reset();
  if (!stmt_) return status_;
  refused_ = Status::OK();
  BatchJournal* journal = std::exchange(journal_, nullptr);  // the values are recorded already
  int index = 1;
  Status bound = BatchJournal::ForEachValue(values, [&](const BatchJournal::Value& v) {
    switch (v.kind) {
      case BatchJournal::Value::Kind::kInt: BindInt(index++, v.integer); break;
      case BatchJournal::Value::Kind::kBlob: BindBlob(index++, v.blob); break;
      case BatchJournal::Value::Kind::kNull: BindNull(index++); break;
    }
    return status_;
  });
  journal_ = journal;
  CAIRN_RETURN_IF_ERROR(bound);
  return Execute();
}

std::string Statement::Text(int column) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  int size = sqlite3_column_bytes(stmt_, column);
  return data ? std::string(static_cast<const char*>(data), static_cast<size_t>(size)) : std::string();
}

std::vector<uint8_t> Statement::Blob(int column) const {
  const auto* data = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, column));
  int size = sqlite3_column_bytes(stmt_, column);
  return data ? std::vector<uint8_t>(data, data + size) : std::vector<uint8_t>();
}

}  // namespace cairn
