// The cairn command-line subcommands. Each takes its own arguments (after the
// subcommand name) and returns the process exit code: 0 ok, 1 failure, 2 usage.
#pragma once

#include <string>
#include <vector>

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

// Sends one control command to the daemon serving `archive_dir`; prints its reply.
int SendControl(const std::string& archive_dir, const std::string& command, std::string* reply = nullptr);

// Prints "cairn: <message>" to stderr and returns `code`.
int Fail(int code, const std::string& message);

}  // namespace cairn
