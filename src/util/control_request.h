// ControlRequest is one request to a running daemon's control socket, and its wire form:
// fields separated by tabs, ended by one newline, with "\\", "\t" and "\n" escaping those
// bytes inside a field. Parsing is strict and pure, so every accepted message is exactly
// what SerializeControlRequest makes of the request it parses to.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cairn/status.h"

namespace cairn {

enum class ControlVerb {
  kPersist,      // persist
  kEvict,        // evict
  kStatus,       // status: the daemon's pid and the options it runs with that status shows
  kRulesReload,  // rules-reload
  kDiskFail,     // disk-fail DISK
  kApply,        // apply PATH
  kDryRun,       // dry-run RULES_NAME RULES_TEXT PATH
  kRepair,       // repair rebuild|scrub BUDGET_NS RATE
  kKeys,         // keys count|rewrap|erase KEY_NAME
};

struct ControlRequest {
  ControlVerb verb = ControlVerb::kStatus;
  uint32_t disk = 0;       // disk-fail: the disk's index
  std::string path;        // apply, dry-run: a path inside the archive, "/" or "/a/b"
  std::string rules_name;  // dry-run: the rules file's name, for its error messages
  std::string rules_text;  // dry-run: the rules themselves (the client read the file)
  bool rebuild = false;    // repair: rebuild, or else scrub
  int64_t budget_ns = 0;   // repair: stop after this long, 0 = no limit
  uint64_t rate = 0;       // repair: bytes per second, 0 = no limit
  std::string key_action;  // keys: count, rewrap or erase the file keys a master key wraps, or
                           // "attributes": name what sets key= to it
  std::string key_name;    // keys: the master key's name

  bool operator==(const ControlRequest&) const = default;
};

// Longest message accepted: a dry-run carries a whole rules file (4 MiB), escaped.
constexpr size_t kMaxControlRequestBytes = (8u << 20) + 16384;
// Longest path or rules file name in a request.
constexpr size_t kMaxControlPathBytes = 4096;

// The wire form of `request`, newline included.
std::string SerializeControlRequest(const ControlRequest& request);
// Parses one whole message (up to and including its newline, nothing after it).
// InvalidArgument names what is wrong: unknown verb, wrong field count, a number with a
// sign, spaces or leading zeros, a path that is not absolute and canonical, a bad escape.
Result<ControlRequest> ParseControlRequest(std::string_view message);

}  // namespace cairn
