// The write statements of the catalog's open batch, as the prepared statement and its bound
// values (compactly encoded): SQLite rolls a whole transaction back when its COMMIT fails
// (disk full, I/O error), and the journal lets the catalog put the acknowledged operations
// back instead of losing them.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/status.h"

namespace cairn {

class Statement;

class BatchJournal {
 public:
  // One statement of the batch: run it again with these values (Statement::Replay).
  struct Entry {
    Statement* statement;
    std::string values;  // encoded by the Append* functions below
  };

  // Records `statement`, which just ran to completion with `values` bound, if it changed
  // the database inside a transaction. Inside an operation it is kept apart until the
  // operation ends.
  void Record(Statement* statement, sqlite3_stmt* stmt, std::string values);
  void BeginOperation() { in_operation_ = true; }
  // The operation's statements join the batch (`keep`) or are dropped (rolled back).
  void EndOperation(bool keep);
  // The batch committed: nothing left to replay.
  void Clear();
  // The batch's statements, oldest first (the operation in progress excluded).
  const std::vector<Entry>& batch() const { return batch_; }
  bool empty() const { return batch_.empty(); }

  // The encoding of bound values: a tag byte, then a varint (integers) or a varint length
  // and the bytes (blobs).
  static void AppendInt(std::string& out, int64_t v);
  static void AppendBlob(std::string& out, std::span<const uint8_t> v);
  static void AppendNull(std::string& out);
  struct Value {
    enum class Kind { kInt, kBlob, kNull } kind;
    int64_t integer = 0;
    std::span<const uint8_t> blob;
  };
  // Calls `visit` for each value encoded in `values`, in order; Corruption when they do not decode.
  static Status ForEachValue(std::string_view values, const std::function<Status(const Value&)>& visit);

 private:
  bool in_operation_ = false;
  std::vector<Entry> batch_;
  std::vector<Entry> operation_;
};

}  // namespace cairn
