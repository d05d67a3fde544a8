// cairn plugins [ARCHIVE]: the transform plugins in the plugin directory (the archive's
// plugin_dir, or the default), what each is, and why any was refused.
#include <fmt/format.h>

#include "archive/config.h"
#include "cli/commands.h"
#include "codec/plugin_loader.h"

namespace cairn {

int CmdPlugins(const Args& args) {
  if (args.size() > 1 || (args.size() == 1 && args[0].starts_with("-"))) {
    return Fail(2, "usage: cairn plugins [ARCHIVE]");
  }
  std::string dir = DefaultPluginDir();
  if (args.size() == 1) {
    auto options = LoadConfig(args[0] + "/cairn.conf");
    if (!options.ok()) return Fail(1, options.status().message());
    if (!options->plugin_dir.empty()) dir = options->plugin_dir;
  }
  auto modules = LoadPlugins(dir);
  if (!modules.ok()) return Fail(1, modules.status().message());
  fmt::print("plugin directory {}: {} module(s)\n", dir, modules->size());
  for (const PluginModule& m : *modules) {
    if (!m.status.ok()) {
      fmt::print("  refused  {}\n", m.status.message());
      continue;
    }
    fmt::print("  {:<12} version {:<3} {:<8} {}  ({})\n", m.name, m.version, PluginStageName(m.stage), m.summary,
               m.path);
  }
  return 0;
}

}  // namespace cairn
