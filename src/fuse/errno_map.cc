#include "fuse/errno_map.h"

#include <cerrno>

#include "util/log.h"

namespace cairn {

int ErrnoFor(const Status& status, const char* operation) {
  if (status.ok()) return 0;
  if (status.sys_errno() != 0 && status.code() != Status::Code::kIOError) return status.sys_errno();
  int err = EIO;
  switch (status.code()) {
    case Status::Code::kOk: return 0;
    case Status::Code::kNotFound: err = ENOENT; break;
    case Status::Code::kExists: err = EEXIST; break;
    case Status::Code::kInvalidArgument: err = EINVAL; break;
    case Status::Code::kNotSupported: err = EOPNOTSUPP; break;
    case Status::Code::kNoSpace: err = ENOSPC; break;
    case Status::Code::kBusy: err = EBUSY; break;
    case Status::Code::kPermission: err = EPERM; break;
    case Status::Code::kCorruption:
    case Status::Code::kIOError: err = status.sys_errno() ? status.sys_errno() : EIO; break;
  }
  if (err == EIO || err == ENOSPC || status.code() == Status::Code::kCorruption) {
    LogError("{}: {}", operation, status.ToString());
  }
  return err;
}

}  // namespace cairn
