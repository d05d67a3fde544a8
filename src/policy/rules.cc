// Rules-file matching and lookup: which rule's settings a file gets, named policies and their
// expansion, the built-in rule set, and loading ARCHIVE/rules (the parser is rules_parser.cc).
#include "policy/rules.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include <fmt/format.h>

namespace cairn {
namespace {

template <typename T>
bool Compare(T left, CompareOp op, T right) {
  switch (op) {
    case CompareOp::kLess: return left < right;
    case CompareOp::kLessEqual: return left <= right;
    case CompareOp::kGreater: return left > right;
    case CompareOp::kGreaterEqual: return left >= right;
    case CompareOp::kEqual: return left == right;
    case CompareOp::kNotEqual: return left != right;
  }
  return false;
}

std::string_view LastComponent(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

const std::string* FindSetting(const std::vector<PolicySetting>& settings, PolicyKey key) {
  for (const PolicySetting& s : settings) {
    if (s.key == key) return &s.value;
  }
  return nullptr;
}

bool Condition::Matches(const FileFacts& facts, int64_t now_ns) const {
  switch (kind) {
    case Kind::kPath: return glob->Matches(facts.path);
    case Kind::kName: return glob->Matches(LastComponent(facts.path));
    case Kind::kSize: return Compare(facts.size, op, size);
    case Kind::kOwner: return facts.uid == id;
    case Kind::kGroup: return facts.gid == id;
    case Kind::kMtime:
    case Kind::kAtime: {
      int64_t age = 0;
      if (__builtin_sub_overflow(now_ns, kind == Kind::kMtime ? facts.mtime_ns : facts.atime_ns, &age)) {
        age = now_ns < 0 ? INT64_MIN : INT64_MAX;
      }
      return Compare(age, op, age_ns);
    }
    case Kind::kXattr: {
      std::optional<std::string> value;
      if (facts.xattr) value = facts.xattr(xattr_name);
      if (!xattr_value) return value.has_value();
      bool equal = value.has_value() && *value == *xattr_value;
      return op == CompareOp::kNotEqual ? !equal : equal;
    }
  }
  return false;
}

Rule::Rule(std::string name, int line, std::vector<Condition> conditions, std::vector<PolicySetting> settings)
    : name_(std::move(name)), line_(line), conditions_(std::move(conditions)), settings_(std::move(settings)) {}

bool Rule::Matches(const FileFacts& facts, int64_t now_ns) const {
  for (const Condition& c : conditions_) {
    if (!c.Matches(facts, now_ns)) return false;
  }
  return true;
}

Result<RuleSet> RuleSet::Load(const std::string& path) {
  auto text = ReadText(path);
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

Result<std::string> RuleSet::ReadText(const std::string& path) { return ReadText(path, false); }

Result<std::string> RuleSet::ReadArchiveText(const std::string& path) { return ReadText(path, true); }

Result<std::string> RuleSet::ReadText(const std::string& path, bool regular_only) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (regular_only ? O_NOFOLLOW | O_NONBLOCK : 0));
  if (fd < 0) {
    int err = errno;
    return Status::Posix(err, fmt::format("cannot open rules file {}: {}", path,
                                          err == ELOOP ? "it is a symbolic link" : std::strerror(err)));
  }
  std::string text;
  struct stat st = {};
  bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (regular_only && !regular) {
    ::close(fd);
    return Status::Posix(EINVAL, fmt::format("rules file {} is not a regular file", path));
  }
  if (regular && static_cast<uint64_t>(st.st_size) <= kMaxFileBytes) text.reserve(static_cast<size_t>(st.st_size));
  char buffer[65536];
  while (text.size() <= kMaxFileBytes) {  // one byte past the limit is enough for Parse to refuse it
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return Status::Posix(err, fmt::format("cannot read rules file {}: {}", path, std::strerror(err)));
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  if (text.size() > kMaxFileBytes && regular) {
    return Status::InvalidArgument(fmt::format("{}:1:1: the file is {} bytes; a rules file may be at most {} bytes "
                                               "(4 MiB)",
                                               path, st.st_size, kMaxFileBytes));
  }
  return text;
}

RuleSet RuleSet::BuiltIn() {
  RuleSet rules;
  rules.file_name_ = "built-in";
  return rules;
}

const Rule& RuleSet::Match(const FileFacts& facts, int64_t now_ns) const {
  for (const Rule& rule : rules_) {
    if (rule.Matches(facts, now_ns)) return rule;
  }
  return default_;
}

const NamedPolicy* RuleSet::FindPolicy(std::string_view name) const {
  auto it = policy_index_.find(name);
  return it == policy_index_.end() ? nullptr : &policies_[it->second];
}

bool RuleSet::AnyCondition(const std::function<bool(const Condition&)>& test) const {
  return std::any_of(rules_.begin(), rules_.end(), [&](const Rule& rule) {
    return std::any_of(rule.conditions().begin(), rule.conditions().end(), test);
  });
}

bool RuleSet::TestsXattr(std::string_view name) const {
  return AnyCondition([name](const Condition& c) { return c.kind == Condition::Kind::kXattr && c.xattr_name == name; });
}

bool RuleSet::Tests(Condition::Kind kind) const {
  return AnyCondition([kind](const Condition& c) { return c.kind == kind; });
}

std::vector<PolicySetting> RuleSet::Expand(const std::vector<PolicySetting>& settings) const {
  const NamedPolicy* policy = nullptr;
  if (const std::string* name = FindSetting(settings, PolicyKey::kPolicy)) policy = FindPolicy(*name);
  std::vector<PolicySetting> out;
  for (PolicyKey key : kAllPolicyKeys) {
    const std::string* value = FindSetting(settings, key);
    if (value == nullptr && policy != nullptr) value = FindSetting(policy->settings, key);
    if (value != nullptr) out.push_back({key, *value});
  }
  return out;
}

}  // namespace cairn
