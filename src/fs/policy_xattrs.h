// PolicyXattrs answers for cairn's policy attributes: it checks a user.cairn.* or
// trusted.cairn.* value before it is stored (key, value, named policy, admin locks) and
// computes the read-only user.cairn.effective, .effective.source, .state and .location.
// REQUIRES: catalog mutex held for every call.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "archive/archive.h"
#include "pipeline/file_state.h"

namespace cairn {

class PolicyXattrs {
 public:
  PolicyXattrs(Archive& archive, const FileState& state) : archive_(archive), state_(state) {}

  // Validates a user.cairn.* or trusted.cairn.* value set on `ino`: key, value, named
  // policy (defined; selectable by users), admin locks. Returns the canonical spelling,
  // or EINVAL/EPERM with the reason (also logged).
  Result<std::string> Check(uint64_t ino, const std::string& name, std::span<const uint8_t> value);
  // user.cairn.<suffix> for the computed suffixes (effective, effective.source, state,
  // location); ENODATA for the computed keys this build does not compute yet.
  Result<std::string> Computed(uint64_t ino, const std::string& suffix);

 private:
  Archive& archive_;
  const FileState& state_;
};

}  // namespace cairn
