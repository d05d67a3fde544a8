#include "cairn/status.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace cairn {

Status Status::FromErrno(std::string_view what, int err) {
  return Status(Code::kIOError, fmt::format("{}: {}", what, std::strerror(err)), err);
}

Status Status::Posix(int err, std::string_view what) {
  Code code = Code::kIOError;
  switch (err) {
    case ENOENT: code = Code::kNotFound; break;
    case EEXIST: code = Code::kExists; break;
    case EINVAL: code = Code::kInvalidArgument; break;
    case EPERM:
    case EACCES: code = Code::kPermission; break;
    case ENOSPC: code = Code::kNoSpace; break;
    case EBUSY: code = Code::kBusy; break;
    case EOPNOTSUPP: code = Code::kNotSupported; break;
    default: break;
  }
  return Status(code, what, err);
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  const char* name = "error";
  switch (code()) {
    case Code::kOk: name = "OK"; break;
    case Code::kNotFound: name = "not found"; break;
    case Code::kCorruption: name = "corruption"; break;
    case Code::kIOError: name = "I/O error"; break;
    case Code::kInvalidArgument: name = "invalid argument"; break;
    case Code::kNotSupported: name = "not supported"; break;
    case Code::kNoSpace: name = "no space"; break;
    case Code::kExists: name = "exists"; break;
    case Code::kBusy: name = "busy"; break;
    case Code::kPermission: name = "permission denied"; break;
  }
  return fmt::format("{}: {}", name, state_->message);
}

}  // namespace cairn
