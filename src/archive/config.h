// Reading and writing ARCHIVE/cairn.conf ("key = value" lines, '#' comments) and
// applying "-o key=value" mount options on top.
#pragma once

#include <string>
#include <vector>

#include "cairn/options.h"
#include "cairn/status.h"

namespace cairn {

// Parses a config file's text; `where` names it in messages ("cairn.conf:7: ...").
Result<ArchiveOptions> ParseConfig(const std::string& text, const std::string& where);
Result<ArchiveOptions> LoadConfig(const std::string& path);
std::string FormatConfig(const ArchiveOptions& options);
// The archive's disk groups: those cairn.conf names, or the one group "default" of type
// pool holding every disk.
std::vector<ArchiveOptions::Group> EffectiveGroups(const ArchiveOptions& options);

// The keystore of the archive in `dir`: the keystore option, else DIR/keystore.
std::string KeystorePath(const std::string& dir, const ArchiveOptions& options);
// Applies one tunable "key=value" (mount option or config line) to `options`.
Status ApplyOption(ArchiveOptions& options, const std::string& key, const std::string& value);

}  // namespace cairn
