// SyncDirectory makes the names in a directory durable: after a file is created in it or
// renamed into it, fsync of the file alone does not promise its name survives a power loss.
#pragma once

#include <string>

#include "cairn/status.h"

namespace cairn {

// fsync of directory `dir` ("" is the working directory); IOError naming it.
Status SyncDirectory(const std::string& dir);
// SyncDirectory of the directory holding `path`.
Status SyncDirectoryOf(const std::string& path);

}  // namespace cairn
