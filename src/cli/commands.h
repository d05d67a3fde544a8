// The cairn command-line subcommands. Each takes its own arguments (after the
// subcommand name) and returns the process exit code: 0 ok, 1 failure, 2 usage.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "archive/archive.h"
#include "cairn/status.h"
#include "util/control_request.h"

namespace cairn {

using Args = std::vector<std::string>;

int CmdMkfs(const Args& args);
int CmdMount(const Args& args);
int CmdUmount(const Args& args);
int CmdStatus(const Args& args);
int CmdFsck(const Args& args);
int CmdInspect(const Args& args);
int CmdPersist(const Args& args);
int CmdEvict(const Args& args);
int CmdPolicy(const Args& args);
int CmdRules(const Args& args);
int CmdDisk(const Args& args);
int CmdRebuild(const Args& args);
int CmdScrub(const Args& args);
int CmdRecover(const Args& args);
int CmdGroup(const Args& args);
int CmdPlugins(const Args& args);
int CmdKey(const Args& args);

// "a,b,c" as {"a", "b", "c"} (empty items dropped).
std::vector<std::string> SplitList(const std::string& text);

// Sends one control request to the daemon serving `archive_dir`. Reply lines before the
// final "ok" go to `on_line` and into *reply. An "error: ..." reply, or failing to reach the
// daemon, is the returned status.
Status ExchangeControl(const std::string& archive_dir, const ControlRequest& request, std::string* reply = nullptr,
                       const std::function<void(const std::string&)>& on_line = {});
// ExchangeControl, its failure printed. Returns the exit code.
int SendControl(const std::string& archive_dir, const ControlRequest& request, std::string* reply = nullptr,
                const std::function<void(const std::string&)>& on_line = {});

// Where a path on a mounted archive is: the archive directory (the mount's source), the
// mountpoint, and the path inside the archive ("/a/b").
struct MountedPath {
  std::string archive;
  std::string mountpoint;
  std::string inside;
};
Result<MountedPath> LocateInMount(const std::string& path);
// The archive directory of `target`: an archive, or the mount point of a mounted one.
Result<std::string> ArchiveDir(const std::string& target);
// Loads the plugins the archive in `dir` uses (those of the default directory for ""), so the
// values they make valid (compress=zstd) are checked as its daemon would.
Status LoadPluginsOf(const std::string& dir);

// Prints "cairn: <line>" to stderr: progress and notes, kept apart from a command's output.
void Tell(const std::string& line);
// Tells `message` and returns `code`.
int Fail(int code, const std::string& message);
// Whether `flag` comes up for the first time (recorded in `seen`): a flag that takes one
// value is refused when given twice, not silently overridden by its last value.
inline bool FirstTime(std::set<std::string>& seen, const std::string& flag) { return seen.insert(flag).second; }
inline std::string GivenTwice(const std::string& flag) { return fmt::format("{} is given twice", flag); }

// Opens an archive to look at it, mounted or not: read-only, without its lock, missing disks
// shown as missing.
Result<std::unique_ptr<Archive>> OpenToLook(const std::string& dir, bool check_only = false);

}  // namespace cairn
