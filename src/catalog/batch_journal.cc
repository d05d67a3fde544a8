#include "catalog/batch_journal.h"

namespace cairn {
namespace {

enum Tag : char { kInt = 'i', kBlob = 'b', kNull = 'n' };

void AppendVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

bool ReadVarint(std::string_view& in, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    auto byte = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    *v |= uint64_t{byte & 0x7fu} << shift;
    if (byte < 0x80) return true;
  }
  return false;
}

}  // namespace

void BatchJournal::Record(Statement* statement, sqlite3_stmt* stmt, std::string values) {
  if (sqlite3_get_autocommit(sqlite3_db_handle(stmt))) return;  // not inside a batch
  (in_operation_ ? operation_ : batch_).push_back({statement, std::move(values)});
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

void BatchJournal::AppendInt(std::string& out, int64_t v) {
  out.push_back(kInt);
  AppendVarint(out, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));  // zigzag
}

void BatchJournal::AppendBlob(std::string& out, std::span<const uint8_t> v) {
  out.push_back(kBlob);
  AppendVarint(out, v.size());
  out.append(reinterpret_cast<const char*>(v.data()), v.size());
}

void BatchJournal::AppendNull(std::string& out) { out.push_back(kNull); }

Status BatchJournal::ForEachValue(std::string_view values, const std::function<Status(const Value&)>& visit) {
  while (!values.empty()) {
    char tag = values.front();
    values.remove_prefix(1);
    Value value{Value::Kind::kNull};
    uint64_t n = 0;
    if (tag == kInt) {
      if (!ReadVarint(values, &n)) return Status::Corruption("batch journal: truncated integer");
      value = {Value::Kind::kInt, static_cast<int64_t>((n >> 1) ^ (~(n & 1) + 1)), {}};
    } else if (tag == kBlob) {
      if (!ReadVarint(values, &n) || n > values.size()) return Status::Corruption("batch journal: truncated blob");
      value = {Value::Kind::kBlob, 0, {reinterpret_cast<const uint8_t*>(values.data()), static_cast<size_t>(n)}};
      values.remove_prefix(n);
    } else if (tag != kNull) {
      return Status::Corruption("batch journal: unknown value tag");
    }
    CAIRN_RETURN_IF_ERROR(visit(value));
  }
  return Status::OK();
}

}  // namespace cairn
