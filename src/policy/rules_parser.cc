// The rules-file tokenizer and parser behind RuleSet::Parse (cairn.rules(5)): one pass, line by
// line, stopping at the first error, which it reports as "FILE:LINE:COL: ...".
#include "policy/rules.h"

#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>

#include <fmt/format.h>

#include "util/printable.h"
#include "util/size.h"

namespace cairn {
namespace {

constexpr std::string_view kConditions = "path, name, size, owner, group, mtime, atime, xattr";

bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsOperatorChar(char c) { return c == '<' || c == '>' || c == '=' || c == '!'; }

// A token as shown in a message: quoted, and cut after 40 bytes.
std::string Show(std::string_view raw) {
  constexpr size_t kMax = 40;
  if (raw.size() <= kMax) return fmt::format("'{}'", raw);
  size_t end = kMax;
  while (end > 0 && (static_cast<unsigned char>(raw[end]) & 0xC0) == 0x80) end--;  // whole UTF-8 characters
  return fmt::format("'{}...'", raw.substr(0, end));
}

// A policy or rule name: 1..64 of [A-Za-z0-9._-], starting with a letter or digit.
bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > 64 || !std::isalnum(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

std::string_view OperatorName(CompareOp op) {
  switch (op) {
    case CompareOp::kLess: return "<";
    case CompareOp::kLessEqual: return "<=";
    case CompareOp::kGreater: return ">";
    case CompareOp::kGreaterEqual: return ">=";
    case CompareOp::kEqual: return "=";
    case CompareOp::kNotEqual: return "!=";
  }
  return "?";
}

// "30d" -> nanoseconds. Units: s, m (minutes), h, d, w, y (365 days).
Result<int64_t> ParseAge(std::string_view text) {
  constexpr const char* kExpected = "expected a whole number and a unit s, m (minutes), h, d, w or y (365d), e.g. 30d";
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) digits++;
  if (digits == 0 || digits + 1 != text.size()) {
    return Status::InvalidArgument(fmt::format("bad age {}: {}", Show(text), kExpected));
  }
  int64_t unit = 0;
  switch (text.back()) {
    case 's': unit = 1; break;
    case 'm': unit = 60; break;
    case 'h': unit = 3600; break;
    case 'd': unit = 86400; break;
    case 'w': unit = 7 * 86400; break;
    case 'y': unit = 365 * 86400; break;
    default: return Status::InvalidArgument(fmt::format("bad age {}: {}", Show(text), kExpected));
  }
  uint64_t number = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, number);
  constexpr int64_t kNanos = 1000000000;
  if (ec != std::errc() || number > static_cast<uint64_t>(INT64_MAX / kNanos / unit)) {
    return Status::InvalidArgument(fmt::format("bad age {}: too large (at most 292 years)", Show(text)));
  }
  return static_cast<int64_t>(number) * unit * kNanos;
}

}  // namespace

// Reads a rules file line by line. The cursor (line_, pos_) moves over one line; each Parse*
// method consumes what it recognizes and returns the first error as "FILE:LINE:COL: ...".
class RulesParser {
 public:
  RulesParser(std::string_view text, std::string_view file_name) : text_(text) { out_.file_name_ = file_name; }
  Result<RuleSet> Run();

 private:
  enum class Kind { kNone, kPolicy, kRule, kDefault };
  struct Statement {  // the one being read
    Kind kind = Kind::kNone;
    std::string name;
    int line = 0;
    bool selectable = false;
    bool has_where = false;
    std::vector<Condition> conditions;
    std::vector<PolicySetting> settings;
    std::vector<int> setting_lines;  // parallel to settings
  };
  struct PolicyReference {  // a policy=NAME, checked once every policy is known
    std::string name;
    std::string where;
    int line;
    int col;
  };

  Status ErrorAt(int line, int col, std::string_view message) const {
    return Status::InvalidArgument(fmt::format("{}:{}:{}: {}", out_.file_name_, line, col, ControlsEscaped(message)));
  }
  Status Error(int col, std::string_view message) const { return ErrorAt(line_no_, col, message); }
  std::string Describe() const;  // "rule 'x'", "policy 'x'" or "default"

  // The cursor.
  void SkipBlanks() {
    while (pos_ < line_.size() && IsBlank(line_[pos_])) pos_++;
  }
  bool AtEnd() {  // skips blanks; true when only a comment or nothing is left
    SkipBlanks();
    return pos_ >= line_.size() || line_[pos_] == '#';
  }
  int col() const { return static_cast<int>(pos_) + 1; }
  char peek() const { return pos_ < line_.size() ? line_[pos_] : '\0'; }
  std::string Found();                   // what is at the cursor, for messages
  std::string_view Word();               // a bare word, up to a blank, '#', '"' or an operator character
  std::optional<CompareOp> Operator();   // consumes nothing when there is no valid operator here
  Status Token(bool stop_at_operator, std::string* out);

  Status ParseLine();
  Status StartStatement(std::string_view keyword, int keyword_col);
  Status FinishStatement();
  Status ParseClause(std::string_view keyword, int keyword_col);
  Status ParseConditions(std::string_view keyword);
  Status ParseCondition(Condition* out);
  // The token after `after`, which should be `what` ("expected WHAT after 'AFTER'" otherwise).
  Status Operand(std::string_view what, std::string_view after, std::string* out, int* token_col,
                 bool stop_at_operator = false);
  Status ParseGlob(std::string_view keyword, Condition* out);
  Status ParseComparison(std::string_view keyword, Condition* out);
  Status ParseXattr(Condition* out);
  Status ParseSet();
  Result<uint32_t> ResolveId(bool group, const std::string& name, int name_col);

  std::string_view text_;
  int line_no_ = 0;
  std::string_view line_;
  size_t pos_ = 0;

  Statement st_;
  int statements_ = 0;
  int default_line_ = 0;  // 0 until the default statement is seen
  std::map<std::string, int, std::less<>> rule_lines_;
  std::map<std::string, int, std::less<>> policy_lines_;
  std::vector<PolicyReference> references_;
  std::map<std::string, uint32_t> uids_, gids_;  // names resolved so far
  RuleSet out_;
};

std::string RulesParser::Describe() const {
  switch (st_.kind) {
    case Kind::kPolicy: return fmt::format("policy '{}'", st_.name);
    case Kind::kRule: return fmt::format("rule '{}'", st_.name);
    case Kind::kDefault: return "default";
    case Kind::kNone: break;
  }
  return "?";
}

std::string RulesParser::Found() {
  if (AtEnd()) return "end of line";
  size_t end = pos_;
  while (end < line_.size() && !IsBlank(line_[end])) end++;
  return Show(line_.substr(pos_, end - pos_));
}

std::string_view RulesParser::Word() {
  size_t start = pos_;
  while (pos_ < line_.size() && !IsBlank(line_[pos_]) && line_[pos_] != '#' && line_[pos_] != '"' &&
         !IsOperatorChar(line_[pos_])) {
    pos_++;
  }
  return line_.substr(start, pos_ - start);
}

std::optional<CompareOp> RulesParser::Operator() {
  size_t start = pos_;
  while (pos_ < line_.size() && IsOperatorChar(line_[pos_])) pos_++;
  std::string_view op = line_.substr(start, pos_ - start);
  for (CompareOp candidate : {CompareOp::kLess, CompareOp::kLessEqual, CompareOp::kGreater,
                              CompareOp::kGreaterEqual, CompareOp::kEqual, CompareOp::kNotEqual}) {
    if (op == OperatorName(candidate)) return candidate;
  }
  pos_ = start;
  return std::nullopt;
}

// A "quoted" token (\" and \\ are escapes, other backslashes stay) or a bare one, which ends at
// a blank or '#', and at an operator character when `stop_at_operator`. REQUIRES: !AtEnd().
Status RulesParser::Token(bool stop_at_operator, std::string* out) {
  out->clear();
  if (peek() == '"') {
    int quote_col = col();
    pos_++;
    for (;;) {
      if (pos_ >= line_.size()) return Error(quote_col, "unterminated quote: this '\"' is not closed on its line");
      char c = line_[pos_++];
      if (c == '"') break;
      if (c == '\\' && pos_ < line_.size() && (line_[pos_] == '"' || line_[pos_] == '\\')) c = line_[pos_++];
      out->push_back(c);
    }
    char next = peek();
    if (pos_ < line_.size() && !IsBlank(next) && next != '#' && !(stop_at_operator && IsOperatorChar(next))) {
      return Error(col(), fmt::format("expected a blank after the closing quote, found {}", Found()));
    }
    return Status::OK();
  }
  while (pos_ < line_.size()) {
    char c = line_[pos_];
    if (IsBlank(c) || c == '#' || (stop_at_operator && IsOperatorChar(c))) break;
    if (c == '"') return Error(col(), "a '\"' inside a word: quote the whole token instead, e.g. \"a b\"");
    out->push_back(c);
    pos_++;
  }
  return Status::OK();
}

Result<RuleSet> RulesParser::Run() {
  if (text_.size() > RuleSet::kMaxFileBytes) {
    return ErrorAt(1, 1, fmt::format("the file is {} bytes; a rules file may be at most {} bytes (4 MiB)",
                                     text_.size(), RuleSet::kMaxFileBytes));
  }
  if (text_.starts_with("\xEF\xBB\xBF")) text_.remove_prefix(3);  // a UTF-8 byte order mark
  size_t start = 0;
  int last_col = 1;
  while (start < text_.size()) {
    size_t newline = text_.find('\n', start);
    size_t end = newline == std::string_view::npos ? text_.size() : newline;
    line_ = text_.substr(start, end - start);
    if (line_.ends_with('\r')) line_.remove_suffix(1);
    line_no_++;
    pos_ = 0;
    CAIRN_RETURN_IF_ERROR(ParseLine());
    last_col = static_cast<int>(line_.size()) + 1;
    start = end + 1;
  }
  CAIRN_RETURN_IF_ERROR(FinishStatement());
  if (default_line_ == 0) {
    return ErrorAt(std::max(line_no_, 1), line_no_ == 0 ? 1 : last_col,
                   "expected a 'default' statement at the end of the file, found none: every rules file ends "
                   "with one ('default' alone keeps the built-in settings)");
  }
  for (const PolicyReference& ref : references_) {
    if (out_.FindPolicy(ref.name) == nullptr) {
      return ErrorAt(ref.line, ref.col,
                     fmt::format("{} sets policy={}, but no policy of that name is defined in this file (expected "
                                 "a 'policy {}' statement)",
                                 ref.where, ref.name, ref.name));
    }
  }
  return std::move(out_);
}

Status RulesParser::ParseLine() {
  bool indented = !line_.empty() && IsBlank(line_[0]);
  if (AtEnd()) return Status::OK();  // blank or comment
  int keyword_col = col();
  std::string_view keyword = Word();
  return indented ? ParseClause(keyword, keyword_col) : StartStatement(keyword, keyword_col);
}

Status RulesParser::StartStatement(std::string_view keyword, int keyword_col) {
  if (keyword == "where" || keyword == "and" || keyword == "set") {
    return Error(keyword_col, fmt::format("expected a statement (policy, rule, default) in column 1, found '{}': "
                                          "clauses (where, and, set) must be indented",
                                          keyword));
  }
  Kind kind = keyword == "policy" ? Kind::kPolicy
              : keyword == "rule" ? Kind::kRule
              : keyword == "default" ? Kind::kDefault
                                     : Kind::kNone;
  if (kind == Kind::kNone) {
    pos_ = keyword_col - 1;
    return Error(keyword_col, fmt::format("expected a statement (policy, rule, default), found {}",
                                          keyword.empty() ? Found() : Show(keyword)));
  }
  CAIRN_RETURN_IF_ERROR(FinishStatement());
  if (++statements_ > RuleSet::kMaxStatements) {
    return Error(keyword_col, fmt::format("too many statements: a rules file may have at most {}",
                                          RuleSet::kMaxStatements));
  }
  if (default_line_ != 0) {
    if (kind == Kind::kDefault) {
      return Error(keyword_col, fmt::format("a second 'default' statement (the first is at line {})", default_line_));
    }
    return Error(keyword_col, fmt::format("expected nothing after 'default' (line {}), found '{}': default must be "
                                          "the last statement{}",
                                          default_line_, keyword,
                                          kind == Kind::kRule ? ", and a rule after it would never be used" : ""));
  }
  st_ = Statement{};
  st_.kind = kind;
  st_.line = line_no_;
  if (kind == Kind::kDefault) {
    st_.name = "default";
    default_line_ = line_no_;
    if (!AtEnd()) return Error(col(), fmt::format("expected end of line after 'default', found {}", Found()));
    return Status::OK();
  }

  if (AtEnd()) return Error(col(), fmt::format("expected a {} name after '{}', found end of line", keyword, keyword));
  int name_col = col();
  CAIRN_RETURN_IF_ERROR(Token(false, &st_.name));
  if (!IsValidName(st_.name)) {
    return Error(name_col, fmt::format("expected a {} name (1..64 letters, digits, '.', '_' or '-', starting with "
                                       "a letter or digit), found {}",
                                       keyword, Show(st_.name)));
  }
  auto& seen = kind == Kind::kRule ? rule_lines_ : policy_lines_;
  if (auto it = seen.find(st_.name); it != seen.end()) {
    return Error(name_col, fmt::format("duplicate {} name '{}' (first defined at line {})", keyword, st_.name,
                                       it->second));
  }
  seen.emplace(st_.name, line_no_);
  if (kind == Kind::kRule && st_.name == "default") {
    return Error(name_col, "expected a rule name, found 'default', which is reserved for the default statement");
  }
  if (kind == Kind::kPolicy && st_.name == "none") {
    return Error(name_col, "expected a policy name, found 'none', which is reserved: policy=none means no policy");
  }
  if (kind == Kind::kPolicy && !AtEnd()) {
    int word_col = col();
    std::string found = Found();
    if (Word() != "selectable") {
      return Error(word_col, fmt::format("expected 'selectable' or end of line after the policy name, found {}",
                                         found));
    }
    st_.selectable = true;
  }
  if (!AtEnd()) {
    return Error(col(), fmt::format("expected end of line after the {} name, found {}", keyword, Found()));
  }
  return Status::OK();
}

Status RulesParser::FinishStatement() {
  if ((st_.kind == Kind::kPolicy || st_.kind == Kind::kRule) && st_.settings.empty()) {
    return ErrorAt(st_.line, 1, fmt::format("{} has no 'set' line: expected at least one indented "
                                            "'set KEY=VALUE' below it",
                                            Describe()));
  }
  switch (st_.kind) {
    case Kind::kPolicy:
      out_.policy_index_.emplace(st_.name, out_.policies_.size());
      out_.policies_.push_back(NamedPolicy{st_.name, st_.selectable, std::move(st_.settings), st_.line});
      break;
    case Kind::kRule:
      out_.rules_.emplace_back(st_.name, st_.line, std::move(st_.conditions), std::move(st_.settings));
      break;
    case Kind::kDefault:
      out_.default_ = Rule("default", st_.line, {}, std::move(st_.settings));
      break;
    case Kind::kNone: break;
  }
  st_ = Statement{};
  return Status::OK();
}

Status RulesParser::ParseClause(std::string_view keyword, int keyword_col) {
  if (keyword == "policy" || keyword == "rule" || keyword == "default") {
    return Error(keyword_col, fmt::format("expected a clause (where, and, set) on an indented line, found '{}': "
                                          "statements must start in column 1",
                                          keyword));
  }
  if (keyword != "where" && keyword != "and" && keyword != "set") {
    pos_ = keyword_col - 1;
    return Error(keyword_col, fmt::format("expected a clause (where, and, set), found {}",
                                          keyword.empty() ? Found() : Show(keyword)));
  }
  if (st_.kind == Kind::kNone) {
    return Error(keyword_col, fmt::format("expected a statement (policy NAME, rule NAME or default) in column 1 "
                                          "before this indented '{}' line",
                                          keyword));
  }
  if (keyword == "set") return ParseSet();
  if (st_.kind == Kind::kDefault) {
    return Error(keyword_col, fmt::format("'{}' in default: the default applies to every file no rule matched, "
                                          "so it takes only 'set' lines",
                                          keyword));
  }
  if (st_.kind == Kind::kPolicy) {
    return Error(keyword_col, fmt::format("'{}' in {}: a policy takes only 'set' lines; choose files with a rule "
                                          "that sets policy={}",
                                          keyword, Describe(), st_.name));
  }
  if (!st_.settings.empty()) {
    return Error(keyword_col, fmt::format("'{}' after 'set' in {}: conditions come before the settings (or is a "
                                          "'rule NAME' line missing above?)",
                                          keyword, Describe()));
  }
  if (keyword == "where" && st_.has_where) {
    return Error(keyword_col, fmt::format("a second 'where' line in {}: continue with 'and' (all conditions must "
                                          "hold), or start another rule",
                                          Describe()));
  }
  if (keyword == "and" && !st_.has_where) {
    return Error(keyword_col, fmt::format("expected 'where' before 'and' in {}", Describe()));
  }
  st_.has_where = true;
  return ParseConditions(keyword);
}

Status RulesParser::ParseConditions(std::string_view keyword) {
  std::string after(keyword);
  for (;;) {
    if (AtEnd()) {
      return Error(col(), fmt::format("expected a condition ({}) after '{}', found end of line", kConditions, after));
    }
    if (st_.conditions.size() >= RuleSet::kMaxConditionsPerRule) {
      return Error(col(), fmt::format("too many conditions in {}: at most {}", Describe(),
                                      RuleSet::kMaxConditionsPerRule));
    }
    Condition condition;
    CAIRN_RETURN_IF_ERROR(ParseCondition(&condition));
    st_.conditions.push_back(std::move(condition));
    if (AtEnd()) return Status::OK();
    int and_col = col();
    std::string found = Found();
    if (Word() != "and") {
      return Error(and_col, fmt::format("expected 'and' or end of line after the condition, found {}", found));
    }
    after = "and";
  }
}

Status RulesParser::ParseCondition(Condition* out) {
  using CKind = Condition::Kind;
  static constexpr std::pair<std::string_view, CKind> kKinds[] = {
      {"path", CKind::kPath},   {"name", CKind::kName},   {"size", CKind::kSize},   {"owner", CKind::kOwner},
      {"group", CKind::kGroup}, {"mtime", CKind::kMtime}, {"atime", CKind::kAtime}, {"xattr", CKind::kXattr}};
  size_t start = pos_;
  int keyword_col = col();
  std::string found = Found();
  std::string_view keyword = Word();
  auto kind = std::find_if(std::begin(kKinds), std::end(kKinds), [&](const auto& k) { return k.first == keyword; });
  if (kind == std::end(kKinds)) {
    return Error(keyword_col, fmt::format("expected a condition ({}), found {}", kConditions,
                                          keyword.empty() ? found : Show(keyword)));
  }
  out->kind = kind->second;
  switch (out->kind) {
    case CKind::kPath:
    case CKind::kName: CAIRN_RETURN_IF_ERROR(ParseGlob(keyword, out)); break;
    case CKind::kSize:
    case CKind::kMtime:
    case CKind::kAtime: CAIRN_RETURN_IF_ERROR(ParseComparison(keyword, out)); break;
    case CKind::kOwner:
    case CKind::kGroup: {
      bool group = out->kind == CKind::kGroup;
      std::string name;
      int name_col = 0;
      CAIRN_RETURN_IF_ERROR(Operand(group ? "a group name or gid" : "a user name or uid", keyword, &name, &name_col));
      auto id = ResolveId(group, name, name_col);
      if (!id.ok()) return id.status();
      out->id = *id;
      break;
    }
    case CKind::kXattr: CAIRN_RETURN_IF_ERROR(ParseXattr(out)); break;
  }
  std::string_view text = line_.substr(start, pos_ - start);
  while (!text.empty() && IsBlank(text.back())) text.remove_suffix(1);
  out->text = std::string(text);
  return Status::OK();
}

Status RulesParser::Operand(std::string_view what, std::string_view after, std::string* out, int* token_col,
                            bool stop_at_operator) {
  if (AtEnd()) return Error(col(), fmt::format("expected {} after '{}', found end of line", what, after));
  *token_col = col();
  return Token(stop_at_operator, out);
}

Status RulesParser::ParseGlob(std::string_view keyword, Condition* out) {
  std::string pattern;
  int glob_col = 0;
  CAIRN_RETURN_IF_ERROR(Operand("a glob", keyword, &pattern, &glob_col));
  if (out->kind == Condition::Kind::kPath && !pattern.starts_with('/')) {
    return Error(glob_col, fmt::format("expected a path glob starting with '/' (it is matched against the whole path "
                                       "inside the archive), found {}; 'name' matches the last component",
                                       Show(pattern)));
  }
  if (out->kind == Condition::Kind::kName && pattern.find('/') != std::string::npos) {
    return Error(glob_col, fmt::format("expected a name glob without '/' (it is matched against the last path "
                                       "component), found {}; 'path' matches whole paths",
                                       Show(pattern)));
  }
  auto glob = Glob::Compile(pattern);
  if (!glob.ok()) return Error(glob_col, fmt::format("bad glob {}: {}", Show(pattern), glob.status().message()));
  out->glob = std::make_shared<const Glob>(std::move(glob).value());
  return Status::OK();
}

// size OP SIZE, mtime OP AGE, atime OP AGE. Ages take no = or != (nanosecond equality is useless).
Status RulesParser::ParseComparison(std::string_view keyword, Condition* out) {
  bool is_size = out->kind == Condition::Kind::kSize;
  SkipBlanks();
  int op_col = col();
  std::string found = Found();
  auto op = Operator();
  if (!op || (!is_size && (*op == CompareOp::kEqual || *op == CompareOp::kNotEqual))) {
    return Error(op_col, fmt::format("expected an operator ({}) after '{}', found {}",
                                     is_size ? "<, <=, >, >=, =, !=" : "<, <=, >, >=", keyword, found));
  }
  out->op = *op;
  std::string value;
  int value_col = 0;
  CAIRN_RETURN_IF_ERROR(Operand(is_size ? "a size (e.g. 100, 512K, 1G)" : "an age (e.g. 12h, 30d, 2y)",
                                OperatorName(*op), &value, &value_col));
  if (is_size) {
    auto size = ParseSize(value);
    if (!size.ok()) return Error(value_col, fmt::format("bad size: {}", size.status().message()));
    out->size = *size;
  } else {
    auto age = ParseAge(value);
    if (!age.ok()) return Error(value_col, age.status().message());
    out->age_ns = *age;
  }
  return Status::OK();
}

// xattr NAME, xattr NAME = VALUE, xattr NAME != VALUE.
Status RulesParser::ParseXattr(Condition* out) {
  int name_col = 0;
  CAIRN_RETURN_IF_ERROR(Operand("an attribute name (user.*)", "xattr", &out->xattr_name, &name_col, true));
  if (!out->xattr_name.starts_with("user.") || out->xattr_name.size() == 5) {
    return Error(name_col, fmt::format("expected an attribute name starting with 'user.' (e.g. user.project), found {}",
                                       Show(out->xattr_name)));
  }
  SkipBlanks();
  if (!IsOperatorChar(peek())) return Status::OK();  // a presence test
  int op_col = col();
  std::string found = Found();
  auto op = Operator();
  if (!op || (*op != CompareOp::kEqual && *op != CompareOp::kNotEqual)) {
    return Error(op_col, fmt::format("expected '=', '!=' or nothing after the attribute name, found {}", found));
  }
  out->op = *op;
  std::string value;
  int value_col = 0;
  CAIRN_RETURN_IF_ERROR(Operand("a value", OperatorName(*op), &value, &value_col));
  out->xattr_value = std::move(value);
  return Status::OK();
}

Status RulesParser::ParseSet() {
  if (AtEnd()) return Error(col(), "expected KEY=VALUE after 'set', found end of line");
  while (!AtEnd()) {
    int key_col = col();
    std::string found = Found();
    std::string_view key_name = Word();
    if (key_name.empty() || peek() != '=') {
      SkipBlanks();
      std::string_view hint = !key_name.empty() && peek() == '=' ? " (no blanks around '=')" : "";
      return Error(key_col, fmt::format("expected KEY=VALUE, found {}{}", found, hint));
    }
    auto key = ParsePolicyKey(key_name);
    if (!key.ok()) return Error(key_col, key.status().message());
    pos_++;  // '='
    int value_col = col();
    if (pos_ >= line_.size() || IsBlank(peek()) || peek() == '#') {
      return Error(value_col, fmt::format("expected a value right after '{}=', found {}", key_name,
                                          pos_ >= line_.size() || peek() == '#' ? "end of line" : "a blank"));
    }
    std::string value;
    CAIRN_RETURN_IF_ERROR(Token(false, &value));
    if (*key == PolicyKey::kPolicy && st_.kind == Kind::kPolicy) {
      return Error(key_col, fmt::format("expected settings in {}, found policy=: a policy cannot include another "
                                        "policy",
                                        Describe()));
    }
    for (size_t i = 0; i < st_.settings.size(); i++) {
      if (st_.settings[i].key == *key) {
        return Error(key_col, fmt::format("{} is set twice in {} (first at line {})", key_name, Describe(),
                                          st_.setting_lines[i]));
      }
    }
    auto canonical = CanonicalPolicyValue(*key, value);
    if (!canonical.ok()) return Error(value_col, canonical.status().message());
    if (*key == PolicyKey::kPolicy) references_.push_back({*canonical, Describe(), line_no_, value_col});
    st_.settings.push_back({*key, std::move(canonical).value()});
    st_.setting_lines.push_back(line_no_);
  }
  return Status::OK();
}

Result<uint32_t> RulesParser::ResolveId(bool group, const std::string& name, int name_col) {
  std::string_view what = group ? "group" : "user";
  if (!name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    uint64_t id = 0;
    auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), id);
    if (ec != std::errc() || id >= UINT32_MAX) {
      return Error(name_col, fmt::format("expected a {} id below 4294967295, found {}", what, Show(name)));
    }
    return static_cast<uint32_t>(id);
  }
  auto& cache = group ? gids_ : uids_;
  if (auto it = cache.find(name); it != cache.end()) return it->second;
  std::string unknown = fmt::format("unknown {} {}: not in this system's {} database (a number is taken as an id)",
                                    what, Show(name), group ? "group" : "user");
  if (name.empty() || name.find('\0') != std::string::npos) return Error(name_col, unknown);
  std::vector<char> buffer(16384);
  for (;;) {
    int rc = 0;
    bool found = false;
    uint32_t id = 0;
    if (group) {
      struct group gr, *result = nullptr;
      rc = getgrnam_r(name.c_str(), &gr, buffer.data(), buffer.size(), &result);
      if (result != nullptr) {
        found = true;
        id = result->gr_gid;
      }
    } else {
      struct passwd pw, *result = nullptr;
      rc = getpwnam_r(name.c_str(), &pw, buffer.data(), buffer.size(), &result);
      if (result != nullptr) {
        found = true;
        id = result->pw_uid;
      }
    }
    if (found) {
      cache.emplace(name, id);
      return id;
    }
    if (rc == ERANGE && buffer.size() < (1u << 20)) {
      buffer.resize(buffer.size() * 2);
      continue;
    }
    if (rc != 0 && rc != ENOENT && rc != ESRCH && rc != EBADF && rc != EPERM) {
      return Error(name_col, fmt::format("cannot look up {} {}: {}", what, Show(name), std::strerror(rc)));
    }
    return Error(name_col, unknown);
  }
}

Result<RuleSet> RuleSet::Parse(std::string_view text, std::string_view file_name) {
  return RulesParser(text, file_name).Run();
}

}  // namespace cairn
