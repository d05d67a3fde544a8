// Status reports the outcome of an operation: OK, or a code plus a message saying
// what failed and where. Result<T> is a value or a non-OK Status. Both are cheap to move.
#pragma once

#include <cassert>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace cairn {

class [[nodiscard]] Status {
 public:
  enum class Code : int {
    kOk = 0,
    kNotFound = 1,
    kCorruption = 2,
    kIOError = 3,
    kInvalidArgument = 4,
    kNotSupported = 5,
    kNoSpace = 6,
    kExists = 7,
    kBusy = 8,
    kPermission = 9,
  };

  Status() = default;  // OK

  static Status OK() { return Status(); }
  static Status NotFound(std::string_view what) { return Status(Code::kNotFound, what); }
  static Status Corruption(std::string_view what) { return Status(Code::kCorruption, what); }
  static Status IOError(std::string_view what) { return Status(Code::kIOError, what); }
  static Status InvalidArgument(std::string_view what) {
    return Status(Code::kInvalidArgument, what);
  }
  static Status NotSupported(std::string_view what) { return Status(Code::kNotSupported, what); }
  static Status NoSpace(std::string_view what) { return Status(Code::kNoSpace, what); }
  static Status Exists(std::string_view what) { return Status(Code::kExists, what); }
  static Status Busy(std::string_view what) { return Status(Code::kBusy, what); }
  static Status Permission(std::string_view what) { return Status(Code::kPermission, what); }
  // IOError from a failed system call: "<what>: <strerror(err)>".
  static Status FromErrno(std::string_view what, int err);
  // A POSIX-level refusal (ENOTEMPTY, EISDIR, ...) that the FUSE layer answers with `err`.
  static Status Posix(int err, std::string_view what);

  bool ok() const { return state_ == nullptr; }
  Code code() const { return state_ ? state_->code : Code::kOk; }
  bool IsNotFound() const { return code() == Code::kNotFound; }
  bool IsCorruption() const { return code() == Code::kCorruption; }
  bool IsBusy() const { return code() == Code::kBusy; }
  bool IsNoSpace() const { return code() == Code::kNoSpace; }
  // The errno of the failed system call, or 0 when the status did not come from one.
  int sys_errno() const { return state_ ? state_->sys_errno : 0; }
  const std::string& message() const;
  std::string ToString() const;

 private:
  struct State {
    Code code;
    int sys_errno;
    std::string message;
  };
  Status(Code code, std::string_view what, int sys_errno = 0)
      : state_(std::make_shared<const State>(State{code, sys_errno, std::string(what)})) {}

  std::shared_ptr<const State> state_;  // null means OK
};

// A value of type T, or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) { assert(!status_.ok()); }  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  // The value. REQUIRES: ok() (asserted in debug builds): check before use.
  T& value() & { return Checked(), *value_; }
  const T& value() const& { return Checked(), *value_; }
  T&& value() && { return Checked(), std::move(*value_); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void Checked() const { assert(ok() && "Result::value() of an error"); }

  Status status_;
  std::optional<T> value_;
};

}  // namespace cairn

// Returns early from the enclosing function when `expr` yields a non-OK Status.
#define CAIRN_RETURN_IF_ERROR(expr)        \
  do {                                     \
    ::cairn::Status _st = (expr);          \
    if (!_st.ok()) return _st;             \
  } while (0)
