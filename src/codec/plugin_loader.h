// Loads transform plugins (shared objects speaking include/cairn/plugin.h) from a plugin
// directory with dlopen and registers each as a Transform (codec/transform_registry.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cairn/status.h"

namespace cairn {

// One module found in a plugin directory: what it says it is, and whether it was loaded.
struct PluginModule {
  std::string path;
  std::string name;  // "" when it could not be asked
  uint32_t version = 0;
  uint32_t stage = 0;  // enum cairn_plugin_stage
  uint32_t flags = 0;
  std::string summary;
  Status status;  // OK: loaded and registered; otherwise why it was refused
};

// Loads every "*.so" in `dir` and in its subdirectories (one level: a build tree keeps each
// module in plugins/NAME/). A module with another ABI version, a bad description or a name
// already registered is refused, with a warning in the log naming it, and so is one that
// someone other than root or this user owns or may write. Each directory is loaded once per
// process; later calls return the first report. NotFound when `dir` does not exist,
// InvalidArgument when it is not to be trusted.
Result<std::vector<PluginModule>> LoadPlugins(const std::string& dir);

// Loads the plugins an archive uses: from `plugin_dir` (its cairn.conf setting), which must
// exist, or from DefaultPluginDir() when that is "" (where none is fine: no plugins).
Status LoadArchivePlugins(const std::string& plugin_dir);

// The plugin directory when cairn.conf names none: "plugins" beside the cairn executable when
// there is one (a build tree), else the installed LIBDIR/cairn/plugins.
std::string DefaultPluginDir();

// "compress", "encrypt", "custom" for a stage number; "?" for another.
const char* PluginStageName(uint32_t stage);

}  // namespace cairn
