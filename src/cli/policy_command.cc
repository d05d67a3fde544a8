// cairn policy explain PATH: the effective policy of a file in a mounted archive, one
// field per line with where it came from (reads the computed user.cairn.* keys).
// cairn policy apply PATH [--progress]: re-encodes its out-of-policy files now.
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "cairn/status.h"
#include "cli/commands.h"
#include "util/clock.h"
#include "util/size.h"

namespace cairn {
namespace {

Result<std::string> ReadXattr(const std::string& path, const std::string& name) {
  std::string value(4096, '\0');
  ssize_t n;
  // Past 4 KiB (the sources of a policy set on directories with long paths): asked its size,
  // and again if it grew meanwhile.
  while ((n = ::getxattr(path.c_str(), name.c_str(), value.data(), value.size())) < 0 && errno == ERANGE) {
    ssize_t size = ::getxattr(path.c_str(), name.c_str(), nullptr, 0);
    if (size < 0) break;
    value.assign(static_cast<size_t>(size) + 1, '\0');
  }
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

// "dir:/logs" -> "inherited from directory /logs", and so on (see resolver.h).
std::string DescribeSource(const std::string& source) {
  size_t at = source.starts_with("policy:") ? source.find('@') : std::string::npos;
  if (at != std::string::npos) {
    return fmt::format("policy '{}', {}", source.substr(7, at - 7), DescribeSource(source.substr(at + 1)));
  }
  if (source == "file") return "set on the file";
  if (source.starts_with("dir:")) return fmt::format("inherited from directory {}", source.substr(4));
  if (source.starts_with("pin:")) return fmt::format("pinned by the admin at {} (trusted.cairn.*)", source.substr(4));
  if (source == "rule:default") return "the rules' default";
  if (source.starts_with("rule:")) return fmt::format("admin rule '{}'", source.substr(5));
  if (source == "default:compress") return "archive default for compressed files (compressed_segment_size)";
  if (source == "default:lonestar") return "the default of a lonestar group";
  return "archive default";
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
    fmt::print("  {:<13} {:<22} {}\n", key, values[key], DescribeSource(from[key]));
  }
  return 0;
}

int Apply(const std::string& path, bool progress) {
  auto where = LocateInMount(path);
  if (!where.ok()) return Fail(1, where.status().message());
  bool tty = ::isatty(STDERR_FILENO);
  uint64_t files_done = 0, files_total = 0, busy = 0, failed = 0, in_policy = 0;
  int64_t start = NowNs();
  int64_t last_print = 0;
  ControlRequest request{.verb = ControlVerb::kApply, .path = where->inside};
  int rc = SendControl(where->archive, request, nullptr, [&](const std::string& line) {
    uint64_t bytes_done = 0, bytes_total = 0;
    // (a daemon from before the last number sends six)
    if (std::sscanf(line.c_str(), "progress %lu %lu %lu %lu %lu %lu %lu", &files_done, &files_total, &bytes_done,
                    &bytes_total, &busy, &failed, &in_policy) < 6 ||
        !progress) {
      return;
    }
    // At most a few updates a second on a terminal, one a second into a log.
    int64_t now = NowNs();
    bool last = files_done + busy + failed + in_policy == files_total;
    if (!last && now - last_print < (tty ? 100'000'000 : 1'000'000'000)) return;
    last_print = now;
    double seconds = std::max(1e-3, (NowNs() - start) / 1e9);
    fmt::print(stderr, "{}re-encoded {}/{} files, {} of {} ({:.1f} MiB/s){}", tty ? "\r" : "", files_done,
               files_total, FormatSize(bytes_done), FormatSize(bytes_total), bytes_done / seconds / (1 << 20),
               tty ? "   " : "\n");
  });
  if (progress && tty) fmt::print(stderr, "\n");
  if (rc != 0) return rc;
  fmt::print("{}: {} out-of-policy file(s), {} re-encoded{}{}{}\n", path, files_total, files_done,
             in_policy ? fmt::format(", {} in policy by their turn (re-encoded in the background meanwhile, or "
                                     "their policy changed back)",
                                     in_policy)
                       : "",
             busy ? fmt::format(", {} being written (left queued for the background)", busy) : "",
             failed ? fmt::format(", {} left as they are (unreadable, or their policy cannot be met there; see "
                                  "{}/cairn.log)",
                                  failed, where->archive)
                    : "");
  return failed ? 1 : 0;
}

}  // namespace

int CmdPolicy(const Args& args) {
  if (args.size() == 2 && args[0] == "explain") return Explain(args[1]);
  if ((args.size() == 2 || (args.size() == 3 && args[2] == "--progress")) && args[0] == "apply") {
    return Apply(args[1], args.size() == 3);
  }
  return Fail(2, "usage: cairn policy explain PATH\n       cairn policy apply PATH [--progress]");
}

}  // namespace cairn
