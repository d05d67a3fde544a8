#include "util/control_request.h"

#include <limits>
#include <vector>

#include <fmt/format.h>

namespace cairn {
namespace {

struct VerbName {
  ControlVerb verb;
  std::string_view name;
  size_t arguments;
};
constexpr VerbName kVerbs[] = {
    {ControlVerb::kPersist, "persist", 0},  {ControlVerb::kEvict, "evict", 0},
    {ControlVerb::kStatus, "status", 0},    {ControlVerb::kRulesReload, "rules-reload", 0},
    {ControlVerb::kDiskFail, "disk-fail", 1}, {ControlVerb::kApply, "apply", 1},
    {ControlVerb::kDryRun, "dry-run", 3},   {ControlVerb::kRepair, "repair", 3},
    {ControlVerb::kKeys, "keys", 2},
};

const VerbName& NameOf(ControlVerb verb) {
  for (const VerbName& v : kVerbs) {
    if (v.verb == verb) return v;
  }
  return kVerbs[0];  // unreachable: every verb is listed
}

void AppendEscaped(std::string& out, std::string_view field) {
  for (char c : field) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
}

// Splits the message (without its newline) at tabs and undoes the escapes.
Result<std::vector<std::string>> SplitFields(std::string_view line) {
  std::vector<std::string> fields(1);
  for (size_t i = 0; i < line.size(); i++) {
    char c = line[i];
    if (c == '\t') {
      fields.emplace_back();
    } else if (c != '\\') {
      fields.back() += c;
    } else if (i + 1 == line.size()) {
      return Status::InvalidArgument("control request: a backslash ends the message");
    } else {
      char e = line[++i];
      if (e == '\\') fields.back() += '\\';
      else if (e == 't') fields.back() += '\t';
      else if (e == 'n') fields.back() += '\n';
      else return Status::InvalidArgument(fmt::format("control request: unknown escape \\{:?}", std::string(1, e)));
    }
  }
  return fields;
}

// A decimal number as SerializeControlRequest writes it: digits only, no leading zero.
Result<uint64_t> ParseNumber(const std::string& text, uint64_t max, std::string_view what) {
  auto bad = [&] {
    return Status::InvalidArgument(fmt::format("control request: {} {:?} is not a number from 0 to {} "
                                               "(digits only)",
                                               what, text.substr(0, 40), max));
  };
  if (text.empty() || text.size() > 20 || (text.size() > 1 && text[0] == '0')) return bad();
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return bad();
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (max - digit) / 10) return bad();
    value = value * 10 + digit;
  }
  return value;
}

bool HasNul(const std::string& text) { return text.find('\0') != std::string::npos; }

// "/" or "/a/b": absolute, no empty, "." or ".." component, no trailing slash.
Status CheckArchivePath(const std::string& path) {
  bool ok = path.starts_with('/') && path.size() <= kMaxControlPathBytes && !HasNul(path) &&
            (path == "/" || !path.ends_with('/'));
  for (size_t start = 1; ok && start < path.size();) {
    size_t slash = path.find('/', start);
    std::string_view part = std::string_view(path).substr(start, slash == std::string::npos ? slash : slash - start);
    ok = !part.empty() && part != "." && part != "..";
    start = slash == std::string::npos ? path.size() : slash + 1;
  }
  if (ok) return Status::OK();
  return Status::InvalidArgument(fmt::format("control request: {:?} is not a canonical absolute path inside the "
                                             "archive",
                                             path.substr(0, 200)));
}

}  // namespace

std::string SerializeControlRequest(const ControlRequest& request) {
  std::string out(NameOf(request.verb).name);
  auto field = [&](std::string_view text) {
    out += '\t';
    AppendEscaped(out, text);
  };
  switch (request.verb) {
    case ControlVerb::kPersist:
    case ControlVerb::kEvict:
    case ControlVerb::kStatus:
    case ControlVerb::kRulesReload: break;
    case ControlVerb::kDiskFail: field(std::to_string(request.disk)); break;
    case ControlVerb::kApply: field(request.path); break;
    case ControlVerb::kDryRun:
      field(request.rules_name);
      field(request.rules_text);
      field(request.path);
      break;
    case ControlVerb::kRepair:
      field(request.rebuild ? "rebuild" : "scrub");
      field(std::to_string(request.budget_ns));
      field(std::to_string(request.rate));
      break;
    case ControlVerb::kKeys:
      field(request.key_action);
      field(request.key_name);
      break;
  }
  return out + '\n';
}

Result<ControlRequest> ParseControlRequest(std::string_view message) {
  if (message.size() > kMaxControlRequestBytes) {
    return Status::InvalidArgument(fmt::format("control request: {} bytes; at most {} are accepted", message.size(),
                                               kMaxControlRequestBytes));
  }
  size_t newline = message.find('\n');
  if (newline == std::string_view::npos) return Status::InvalidArgument("control request: no newline at its end");
  if (newline + 1 != message.size()) return Status::InvalidArgument("control request: bytes after its newline");
  auto fields = SplitFields(message.substr(0, newline));
  if (!fields.ok()) return fields.status();
  const std::vector<std::string>& f = *fields;
  const VerbName* verb = nullptr;
  for (const VerbName& v : kVerbs) {
    if (v.name == f[0]) verb = &v;
  }
  if (!verb) return Status::InvalidArgument(fmt::format("control request: unknown command {:?}", f[0].substr(0, 40)));
  if (f.size() != verb->arguments + 1) {
    return Status::InvalidArgument(fmt::format("control request: {} takes {} argument(s), not {}", verb->name,
                                               verb->arguments, f.size() - 1));
  }
  ControlRequest request;
  request.verb = verb->verb;
  switch (request.verb) {
    case ControlVerb::kPersist:
    case ControlVerb::kEvict:
    case ControlVerb::kStatus:
    case ControlVerb::kRulesReload: break;
    case ControlVerb::kDiskFail: {
      auto disk = ParseNumber(f[1], std::numeric_limits<uint32_t>::max(), "disk");
      if (!disk.ok()) return disk.status();
      request.disk = static_cast<uint32_t>(*disk);
      break;
    }
    case ControlVerb::kApply:
      request.path = f[1];
      CAIRN_RETURN_IF_ERROR(CheckArchivePath(request.path));
      break;
    case ControlVerb::kDryRun:
      if (f[1].empty() || f[1].size() > kMaxControlPathBytes || HasNul(f[1])) {
        return Status::InvalidArgument("control request: dry-run needs the rules file's name (no NUL, at most 4096 "
                                       "bytes)");
      }
      request.rules_name = f[1];
      request.rules_text = f[2];
      request.path = f[3];
      CAIRN_RETURN_IF_ERROR(CheckArchivePath(request.path));
      break;
    case ControlVerb::kRepair: {
      if (f[1] != "rebuild" && f[1] != "scrub") {
        return Status::InvalidArgument(fmt::format("control request: repair {:?}: expected rebuild or scrub",
                                                   f[1].substr(0, 40)));
      }
      request.rebuild = f[1] == "rebuild";
      auto budget = ParseNumber(f[2], std::numeric_limits<int64_t>::max(), "budget");
      if (!budget.ok()) return budget.status();
      auto rate = ParseNumber(f[3], std::numeric_limits<uint64_t>::max(), "rate");
      if (!rate.ok()) return rate.status();
      request.budget_ns = static_cast<int64_t>(*budget);
      request.rate = *rate;
      break;
    }
    case ControlVerb::kKeys:
      if (f[1] != "count" && f[1] != "rewrap" && f[1] != "erase" && f[1] != "attributes") {
        return Status::InvalidArgument(fmt::format("control request: keys {:?}: expected count, rewrap, erase or "
                                                   "attributes",
                                                   f[1].substr(0, 40)));
      }
      if (f[2].empty() || f[2].size() > 64 || HasNul(f[2])) {
        return Status::InvalidArgument("control request: keys needs a key name (1..64 bytes)");
      }
      request.key_action = f[1];
      request.key_name = f[2];
      break;
  }
  return request;
}

}  // namespace cairn
