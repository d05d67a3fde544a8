// The write statements of the catalog's open batch, as SQL text with their values inlined:
// SQLite rolls a whole transaction back when its COMMIT fails (disk full, I/O error), and
// the journal lets the catalog put the acknowledged operations back instead of losing them.
#pragma once

#include <sqlite3.h>

#include <string>
#include <vector>

#include "cairn/status.h"

namespace cairn {

class BatchJournal {
 public:
  // Records `stmt`, which just ran to completion, if it changed the database inside a
  // transaction. Inside an operation it is kept apart until the operation ends.
  Status Record(sqlite3_stmt* stmt);
  void BeginOperation() { in_operation_ = true; }
  // The operation's statements join the batch (`keep`) or are dropped (rolled back).
  void EndOperation(bool keep);
  // The batch committed: nothing left to replay.
  void Clear();
  // The batch's statements, oldest first (the operation in progress excluded).
  const std::vector<std::string>& batch() const { return batch_; }
  bool empty() const { return batch_.empty(); }

 private:
  bool in_operation_ = false;
  std::vector<std::string> batch_;
  std::vector<std::string> operation_;
};

}  // namespace cairn
