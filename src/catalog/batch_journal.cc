#include "catalog/batch_journal.h"

#include <fmt/format.h>

namespace cairn {

Status BatchJournal::Record(sqlite3_stmt* stmt) {
  if (sqlite3_stmt_readonly(stmt) || sqlite3_get_autocommit(sqlite3_db_handle(stmt))) return Status::OK();
  char* sql = sqlite3_expanded_sql(stmt);
  if (!sql) return Status::IOError(fmt::format("catalog: cannot journal '{}': out of memory", sqlite3_sql(stmt)));
  (in_operation_ ? operation_ : batch_).emplace_back(sql);
  sqlite3_free(sql);
  return Status::OK();
}

void BatchJournal::EndOperation(bool keep) {
  if (keep) batch_.insert(batch_.end(), std::make_move_iterator(operation_.begin()),
                          std::make_move_iterator(operation_.end()));
  operation_.clear();
  in_operation_ = false;
}

void BatchJournal::Clear() {
  batch_.clear();
  operation_.clear();
}

}  // namespace cairn
