// The one place where a cairn Status becomes the errno a FUSE reply carries.
#pragma once

#include "cairn/status.h"

namespace cairn {

// Maps `status` to a positive errno; logs failures that are not ordinary POSIX answers.
int ErrnoFor(const Status& status, const char* operation);

}  // namespace cairn
