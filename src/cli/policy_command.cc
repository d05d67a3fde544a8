// cairn policy explain PATH: the effective policy of a file in a mounted archive, one
// field per line with where it came from (reads the computed user.cairn.* keys).
#include <sys/xattr.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "cairn/status.h"
#include "cli/commands.h"

namespace cairn {
namespace {

Result<std::string> ReadXattr(const std::string& path, const std::string& name) {
  std::string value(4096, '\0');
  ssize_t n = ::getxattr(path.c_str(), name.c_str(), value.data(), value.size());
  if (n < 0) return Status::FromErrno(fmt::format("{}: {}", path, name), errno);
  value.resize(static_cast<size_t>(n));
  return value;
}

// "a=1 b=2" -> {a: 1, b: 2}, keeping the order of first appearance in `order`.
std::map<std::string, std::string> Fields(const std::string& text, std::vector<std::string>* order) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    size_t eq = word.find('=');
    if (eq == std::string::npos) continue;
    if (order) order->push_back(word.substr(0, eq));
    out[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return out;
}

int Explain(const std::string& path) {
  auto effective = ReadXattr(path, "user.cairn.effective");
  if (!effective.ok()) {
    return Fail(1, fmt::format("{} (is it inside a mounted cairn archive?)", effective.status().message()));
  }
  auto sources = ReadXattr(path, "user.cairn.effective.source");
  auto state = ReadXattr(path, "user.cairn.state");
  if (!sources.ok() || !state.ok()) return Fail(1, (sources.ok() ? state : sources).status().message());
  std::vector<std::string> order;
  auto values = Fields(*effective, &order);
  auto from = Fields(*sources, nullptr);
  fmt::print("{}\n  state: {}\n", path, *state);
  for (const auto& key : order) {
    std::string source = from[key];
    std::string why = source == "file"              ? "set on the file"
                      : source.starts_with("dir:") ? fmt::format("inherited from directory {}", source.substr(4))
                                                   : "archive default";
    fmt::print("  {:<13} {:<22} {}\n", key, values[key], why);
  }
  return 0;
}

}  // namespace

int CmdPolicy(const Args& args) {
  if (args.size() == 2 && args[0] == "explain") return Explain(args[1]);
  return Fail(2, "usage: cairn policy explain PATH");
}

}  // namespace cairn
