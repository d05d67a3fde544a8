// The admin rules file (ARCHIVE/rules, cairn.rules(5)): named policies, rules that give files
// settings by path, name, size, owner, group, age and xattrs, and the mandatory default.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/status.h"
#include "policy/glob.h"
#include "policy/vocabulary.h"

namespace cairn {

// One KEY=VALUE of a `set` line. `value` is canonical (CanonicalPolicyValue: sizes in bytes).
struct PolicySetting {
  PolicyKey key;
  std::string value;
};

// The value `settings` gives `key`, or null.
const std::string* FindSetting(const std::vector<PolicySetting>& settings, PolicyKey key);

// `policy NAME [selectable]`: settings that rules (set policy=NAME) and, when selectable,
// users (user.cairn.policy=NAME) can ask for by name.
struct NamedPolicy {
  std::string name;
  bool selectable = false;
  std::vector<PolicySetting> settings;  // never sets PolicyKey::kPolicy
  int line = 0;
};

// What rules look at.
struct FileFacts {
  std::string path;  // "/a/b/c.log" inside the archive ("/" for the root)
  uint64_t size = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  int64_t mtime_ns = 0;
  int64_t atime_ns = 0;
  // Looks up a user.* attribute of the file; may be empty (the file has none).
  std::function<std::optional<std::string>(const std::string& name)> xattr;
};

enum class CompareOp { kLess, kLessEqual, kGreater, kGreaterEqual, kEqual, kNotEqual };

// One test of a `where` line, as built by RuleSet::Parse. Only the fields of its kind are used.
struct Condition {
  enum class Kind { kPath, kName, kSize, kOwner, kGroup, kMtime, kAtime, kXattr };
  Kind kind = Kind::kPath;
  std::string text;                        // as written, e.g. "size >= 1G"
  std::shared_ptr<const Glob> glob;        // kPath (the whole path), kName (its last component)
  CompareOp op = CompareOp::kEqual;        // kSize, kMtime, kAtime; kXattr with a value: kEqual or kNotEqual
  uint64_t size = 0;                       // kSize: bytes
  uint32_t id = 0;                         // kOwner: uid; kGroup: gid
  int64_t age_ns = 0;                      // kMtime, kAtime: compared with now - mtime (atime)
  std::string xattr_name;                  // kXattr: "user.project"
  std::optional<std::string> xattr_value;  // kXattr: none tests presence. != also holds when absent.

  bool Matches(const FileFacts& facts, int64_t now_ns) const;
};

// A `rule` (or the `default`, whose name is "default" and which has no conditions).
class Rule {
 public:
  Rule(std::string name, int line, std::vector<Condition> conditions, std::vector<PolicySetting> settings);

  const std::string& name() const { return name_; }
  int line() const { return line_; }  // of its first line in the file; 0 when built in
  const std::vector<Condition>& conditions() const { return conditions_; }
  const std::vector<PolicySetting>& settings() const { return settings_; }  // in file order
  // True when every condition holds; ages count back from `now_ns`.
  bool Matches(const FileFacts& facts, int64_t now_ns) const;

 private:
  std::string name_;
  int line_;
  std::vector<Condition> conditions_;
  std::vector<PolicySetting> settings_;
};

// A parsed rules file. Immutable after Parse, so one instance can be shared between threads
// (as shared_ptr<const RuleSet>); copyable and movable.
class RuleSet {
 public:
  static constexpr size_t kMaxFileBytes = 4 << 20;
  static constexpr int kMaxStatements = 100000;
  static constexpr size_t kMaxConditionsPerRule = 1000;

  // Parses `text`. Every error is InvalidArgument "FILE_NAME:LINE:COL: what was expected, what
  // was found" (1-based; COL counts bytes and points at the offending token). Owner and group
  // names are resolved now, with the system's user database.
  static Result<RuleSet> Parse(std::string_view text, std::string_view file_name);
  // Reads and parses the file at `path`; errors name `path`. A missing file is NotFound.
  static Result<RuleSet> Load(const std::string& path);
  // The text of the rules file at `path` (Load's reading half), refused when too long.
  static Result<std::string> ReadText(const std::string& path);
  // ReadText of an archive's own rules file, which its owner may change and the daemon (root)
  // reads: a regular file, not reached through a symlink (nor a FIFO that would block).
  static Result<std::string> ReadArchiveText(const std::string& path);
  // What an archive without a rules file uses: no policies, no rules, a default that sets nothing.
  static RuleSet BuiltIn();

  // The first rule that matches `facts`, else the default.
  const Rule& Match(const FileFacts& facts, int64_t now_ns) const;
  const NamedPolicy* FindPolicy(std::string_view name) const;
  // Whether a rule's condition tests attribute `name` ("where xattr NAME"), or tests `kind`.
  bool TestsXattr(std::string_view name) const;
  bool Tests(Condition::Kind kind) const;
  // `settings` plus the fields of the policy their policy=NAME names, for keys `settings` does not
  // set itself (explicit keys win), in kAllPolicyKeys order.
  std::vector<PolicySetting> Expand(const std::vector<PolicySetting>& settings) const;

  const std::vector<Rule>& rules() const { return rules_; }
  const Rule& default_rule() const { return default_; }
  const std::vector<NamedPolicy>& policies() const { return policies_; }
  const std::string& file_name() const { return file_name_; }

 private:
  static Result<std::string> ReadText(const std::string& path, bool regular_only);
  bool AnyCondition(const std::function<bool(const Condition&)>& test) const;
  friend class RulesParser;
  RuleSet() : default_("default", 0, {}, {}) {}

  std::string file_name_;
  std::vector<NamedPolicy> policies_;
  std::map<std::string, size_t, std::less<>> policy_index_;  // name -> index in policies_
  std::vector<Rule> rules_;
  Rule default_;
};

}  // namespace cairn
