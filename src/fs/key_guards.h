// The master keys that guard an inode's data, for the checks behind "a user can neither
// encrypt with nor read through a master key they were not granted" (cairn(8), KEYS): open
// and create (Filesystem) and changes of the attributes that decide encryption (Xattrs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "archive/archive.h"

namespace cairn {

// The master keys guarding `ino`, each once: the one its data key is wrapped by (a file
// persisted encrypted) and the one its effective policy encrypts under now (a directory's:
// the key what inherits from it is encrypted under). Not among them: the keys of files
// below a directory that are encrypted under a key of their own. REQUIRES: catalog mutex held.
Result<std::vector<std::string>> KeysGuarding(Archive& archive, uint64_t ino);

}  // namespace cairn
