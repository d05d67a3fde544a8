#include "catalog/statement.h"

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
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

void Statement::Reset() {
  if (!stmt_) return;  // keeps the prepare error in status_
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  status_ = Status::OK();
}

bool Statement::Step() {
  if (!stmt_) return false;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) {
    status_ = Status::IOError(fmt::format("catalog: {} (in '{}')", sqlite3_errmsg(db_), sqlite3_sql(stmt_)));
  }
  return false;
}

Status Statement::Run() {
  while (Step()) {
  }
  Status result = status_;
  if (result.ok() && journal_) result = journal_->Record(stmt_);
  if (stmt_) sqlite3_reset(stmt_);
  return result;
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
