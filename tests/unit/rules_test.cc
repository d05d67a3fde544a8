// RuleSet: parsing valid rules files, matching files against them, one case per error with its
// exact position, the size limits, the shipped policies/ files, and a fuzz loop.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <fmt/format.h>

#include "policy/rules.h"
#include "fuzz.h"
#include "test_util.h"

using namespace cairn;

namespace {

constexpr int64_t kSecond = 1000000000;
constexpr int64_t kDay = 86400 * kSecond;
constexpr int64_t kNow = 1800000000 * kSecond;

// The example of the design, with an owner every test machine has.
constexpr std::string_view kExample = R"(# named policies: the menu users may pick with user.cairn.policy
policy cold selectable
    set segment_size=16M
policy bulk
    set segment_size=64M checksum=crc32c

rule instruments
    where path /instruments/** and size >= 1G
    set segment_size=64M

rule logs
    where name *.log
    set policy=cold

rule stale
    where mtime > 365d
    and owner root
    set policy=cold segment_size=8M

rule tagged
    where xattr user.project = "alpha team"
    set segment_size=1M

default
    set segment_size=4M
)";

RuleSet MustParse(std::string_view text) {
  auto rules = RuleSet::Parse(text, "rules");
  INFO(rules.status().ToString());
  REQUIRE(rules.ok());
  return std::move(rules).value();
}

std::string Value(const std::vector<PolicySetting>& settings, PolicyKey key) {
  const std::string* value = FindSetting(settings, key);
  return value ? *value : "(unset)";
}

FileFacts Facts(std::string path, uint64_t size = 0) {
  FileFacts facts;
  facts.path = std::move(path);
  facts.size = size;
  facts.uid = 1000;
  facts.gid = 1000;
  facts.mtime_ns = kNow - kDay;
  facts.atime_ns = kNow - kDay;
  return facts;
}

FileFacts WithXattrs(FileFacts facts, std::map<std::string, std::string> xattrs) {
  facts.xattr = [xattrs](const std::string& name) -> std::optional<std::string> {
    auto it = xattrs.find(name);
    if (it == xattrs.end()) return std::nullopt;
    return it->second;
  };
  return facts;
}

struct ErrorCase {
  std::string text;
  int line;
  int col;
  std::string fragment;
};

}  // namespace

TEST_CASE("Rules: the design's example parses", "[rules]") {
  RuleSet rules = MustParse(kExample);
  CHECK(rules.file_name() == "rules");
  REQUIRE(rules.policies().size() == 2);
  CHECK(rules.policies()[0].name == "cold");
  CHECK(rules.policies()[0].selectable);
  CHECK(rules.policies()[0].line == 2);
  CHECK(Value(rules.policies()[0].settings, PolicyKey::kSegmentSize) == "16777216");
  CHECK(rules.policies()[1].name == "bulk");
  CHECK_FALSE(rules.policies()[1].selectable);
  CHECK(Value(rules.policies()[1].settings, PolicyKey::kSegmentSize) == "67108864");
  CHECK(Value(rules.policies()[1].settings, PolicyKey::kChecksum) == "crc32c");

  REQUIRE(rules.rules().size() == 4);
  const Rule& instruments = rules.rules()[0];
  CHECK(instruments.name() == "instruments");
  CHECK(instruments.line() == 7);
  REQUIRE(instruments.conditions().size() == 2);
  CHECK(instruments.conditions()[0].text == "path /instruments/**");
  CHECK(instruments.conditions()[1].text == "size >= 1G");
  CHECK(instruments.conditions()[1].size == (1ull << 30));
  CHECK(instruments.conditions()[1].op == CompareOp::kGreaterEqual);
  const Rule& stale = rules.rules()[2];
  REQUIRE(stale.conditions().size() == 2);
  CHECK(stale.conditions()[0].age_ns == 365 * kDay);
  CHECK(stale.conditions()[1].kind == Condition::Kind::kOwner);
  CHECK(stale.conditions()[1].id == 0);
  REQUIRE(stale.settings().size() == 2);
  CHECK(stale.settings()[0].key == PolicyKey::kPolicy);
  CHECK(stale.settings()[0].value == "cold");
  CHECK(stale.settings()[1].value == "8388608");
  const Rule& tagged = rules.rules()[3];
  CHECK(tagged.conditions()[0].xattr_name == "user.project");
  CHECK(tagged.conditions()[0].xattr_value == "alpha team");
  CHECK(tagged.conditions()[0].text == "xattr user.project = \"alpha team\"");

  CHECK(rules.default_rule().name() == "default");
  CHECK(rules.default_rule().line() == 24);
  CHECK(rules.default_rule().conditions().empty());
  CHECK(Value(rules.default_rule().settings(), PolicyKey::kSegmentSize) == "4194304");
}

TEST_CASE("Rules: comments, quotes, tabs, CRLF and operators without blanks", "[rules]") {
  std::string text =
      "# leading comment\r\n"
      "\r\n"
      "policy \"p.1\"   selectable   # trailing comment\r\n"
      "\tset raid=none\t compress=off # comment after a setting\r\n"
      "rule r_1\r\n"
      "\twhere size>=1G and mtime<12h and atime>=2w and xattr user.p!=x\r\n"
      "\tand name \"a b*\" and path \"/x/\\\"q\\\"/\\\\/**\" and xattr \"user.q\"=\"v #1\"\r\n"
      "  \t  and group 0 and owner 0 and xattr user.flag and size!=5\r\n"
      "\tset segment_size=\"64K\"\r\n"
      "\tset policy=p.1\r\n"
      "   # an indented comment line\r\n"
      "      \r\n"
      "default";
  RuleSet rules = MustParse(text);
  REQUIRE(rules.policies().size() == 1);
  CHECK(rules.policies()[0].name == "p.1");
  CHECK(rules.policies()[0].selectable);
  CHECK(rules.policies()[0].settings.size() == 2);
  REQUIRE(rules.rules().size() == 1);
  const auto& c = rules.rules()[0].conditions();
  REQUIRE(c.size() == 11);
  CHECK(c[0].kind == Condition::Kind::kSize);
  CHECK(c[0].op == CompareOp::kGreaterEqual);
  CHECK(c[1].op == CompareOp::kLess);
  CHECK(c[1].age_ns == 12 * 3600 * kSecond);
  CHECK(c[2].age_ns == 14 * kDay);
  CHECK(c[3].op == CompareOp::kNotEqual);
  CHECK(c[3].xattr_value == "x");
  CHECK(c[4].glob->pattern() == "a b*");
  CHECK(c[5].glob->pattern() == "/x/\"q\"/\\/**");
  CHECK(c[6].xattr_name == "user.q");
  CHECK(c[6].xattr_value == "v #1");
  CHECK(c[7].kind == Condition::Kind::kGroup);
  CHECK(c[9].kind == Condition::Kind::kXattr);
  CHECK_FALSE(c[9].xattr_value.has_value());
  CHECK(c[10].op == CompareOp::kNotEqual);
  CHECK(c[10].text == "size!=5");
  CHECK(Value(rules.rules()[0].settings(), PolicyKey::kSegmentSize) == "65536");
  CHECK(rules.default_rule().settings().empty());

  // A byte order mark and a file without a final newline.
  CHECK(RuleSet::Parse("\xEF\xBB\xBF" "default", "rules").ok());
  // Other backslashes inside quotes reach the glob, which reads them as escapes.
  RuleSet escaped = MustParse("rule e\n where name \"\\*\"\n set raid=none\ndefault\n");
  CHECK(escaped.rules()[0].conditions()[0].glob->Matches("*"));
  CHECK_FALSE(escaped.rules()[0].conditions()[0].glob->Matches("x"));
}

TEST_CASE("Rules: each condition kind matches FileFacts", "[rules]") {
  auto first = [](std::string_view where, const FileFacts& facts) {
    std::string text = fmt::format("rule r\n  where {}\n  set raid=none\ndefault\n", where);
    RuleSet rules = MustParse(text);
    return rules.Match(facts, kNow).name() == "r";
  };
  CHECK(first("path /projects/**", Facts("/projects/2019/a.nc")));
  CHECK_FALSE(first("path /projects/**", Facts("/projects")));
  CHECK(first("name *.nc", Facts("/projects/2019/a.nc")));
  CHECK_FALSE(first("name *.nc", Facts("/projects/2019.nc/a.txt")));
  CHECK(first("name 2019", Facts("/projects/2019")));

  CHECK(first("size >= 1G", Facts("/f", 1ull << 30)));
  CHECK_FALSE(first("size >= 1G", Facts("/f", (1ull << 30) - 1)));
  CHECK(first("size > 1G", Facts("/f", (1ull << 30) + 1)));
  CHECK_FALSE(first("size > 1G", Facts("/f", 1ull << 30)));
  CHECK(first("size < 512K", Facts("/f", 0)));
  CHECK(first("size <= 100", Facts("/f", 100)));
  CHECK_FALSE(first("size <= 100", Facts("/f", 101)));
  CHECK(first("size = 100", Facts("/f", 100)));
  CHECK(first("size != 100", Facts("/f", 99)));
  CHECK_FALSE(first("size != 100", Facts("/f", 100)));

  FileFacts mine = Facts("/f");
  CHECK(first("owner 1000", mine));
  CHECK_FALSE(first("owner 0", mine));
  CHECK_FALSE(first("owner root", mine));
  CHECK(first("group 1000", mine));
  mine.uid = 0;
  mine.gid = 0;
  CHECK(first("owner root", mine));
  CHECK(first("group root", mine));

  FileFacts old = Facts("/f");
  old.mtime_ns = kNow - 400 * kDay;
  old.atime_ns = kNow - 10 * kDay;
  CHECK(first("mtime > 365d", old));
  CHECK_FALSE(first("mtime > 1y and atime > 30d", old));
  CHECK(first("atime < 30d", old));
  CHECK(first("atime >= 10d", old));
  CHECK_FALSE(first("atime > 10d", old));
  CHECK(first("mtime > 57w", old));
  CHECK_FALSE(first("mtime > 58w", old));
  FileFacts future = Facts("/f");
  future.mtime_ns = kNow + kDay;  // clock skew: a negative age is younger than any age
  CHECK(first("mtime < 1s", future));
  FileFacts ancient = Facts("/f");
  ancient.mtime_ns = INT64_MIN;  // no overflow
  CHECK(first("mtime > 292y", ancient));

  FileFacts tagged = WithXattrs(Facts("/f"), {{"user.project", "alpha team"}});
  CHECK(first("xattr user.project", tagged));
  CHECK_FALSE(first("xattr user.other", tagged));
  CHECK(first("xattr user.project = \"alpha team\"", tagged));
  CHECK_FALSE(first("xattr user.project = alpha", tagged));
  CHECK(first("xattr user.project != alpha", tagged));
  CHECK_FALSE(first("xattr user.project != \"alpha team\"", tagged));
  CHECK(first("xattr user.other != alpha", tagged));  // absent is not equal
  FileFacts bare = Facts("/f");                         // no xattr callback: no attributes
  CHECK_FALSE(first("xattr user.project", bare));
  CHECK(first("xattr user.project != x", bare));

  CHECK(first("path /data/** and name *.nc and size > 1M", Facts("/data/x/y.nc", 2 << 20)));
  CHECK_FALSE(first("path /data/** and name *.nc and size > 1M", Facts("/data/x/y.nc", 1 << 20)));
}

TEST_CASE("Rules: the first matching rule wins, else the default", "[rules]") {
  RuleSet rules = MustParse(kExample);
  auto match = [&](const FileFacts& facts) { return rules.Match(facts, kNow).name(); };
  CHECK(match(Facts("/instruments/cam/1.raw", 2ull << 30)) == "instruments");
  CHECK(match(Facts("/instruments/cam/1.raw", 1 << 20)) == "default");
  CHECK(match(Facts("/instruments/run.log", 2ull << 30)) == "instruments");  // also a log: first wins
  CHECK(match(Facts("/home/run.log")) == "logs");
  FileFacts stale = Facts("/home/x.dat");
  stale.mtime_ns = kNow - 400 * kDay;
  CHECK(match(stale) == "default");  // not root's
  stale.uid = 0;
  CHECK(match(stale) == "stale");
  CHECK(match(WithXattrs(Facts("/a"), {{"user.project", "alpha team"}})) == "tagged");
  CHECK(match(WithXattrs(Facts("/a"), {{"user.project", "beta"}})) == "default");
  CHECK(&rules.Match(Facts("/"), kNow) == &rules.default_rule());

  RuleSet built_in = RuleSet::BuiltIn();
  CHECK(built_in.rules().empty());
  CHECK(built_in.policies().empty());
  CHECK(built_in.Match(Facts("/x"), kNow).name() == "default");
  CHECK(built_in.default_rule().settings().empty());
}

TEST_CASE("Rules: named policies are found and expanded, explicit keys winning", "[rules]") {
  RuleSet rules = MustParse(kExample);
  REQUIRE(rules.FindPolicy("cold") != nullptr);
  CHECK(rules.FindPolicy("cold")->selectable);
  CHECK(rules.FindPolicy("bulk") != nullptr);
  CHECK(rules.FindPolicy("warm") == nullptr);
  CHECK(rules.FindPolicy("") == nullptr);

  auto logs = rules.Expand(rules.rules()[1].settings());  // policy=cold
  CHECK(Value(logs, PolicyKey::kPolicy) == "cold");
  CHECK(Value(logs, PolicyKey::kSegmentSize) == "16777216");
  auto stale = rules.Expand(rules.rules()[2].settings());  // policy=cold segment_size=8M
  CHECK(Value(stale, PolicyKey::kSegmentSize) == "8388608");
  REQUIRE(stale.size() == 2);
  CHECK(stale[0].key == PolicyKey::kSegmentSize);  // kAllPolicyKeys order
  CHECK(stale[1].key == PolicyKey::kPolicy);
  auto plain = rules.Expand(rules.default_rule().settings());
  REQUIRE(plain.size() == 1);

  // Copies and moves keep working (the policy index is by position).
  RuleSet copy = rules;
  RuleSet moved = std::move(rules);
  CHECK(copy.FindPolicy("bulk")->name == "bulk");
  CHECK(moved.FindPolicy("bulk")->name == "bulk");
  CHECK(moved.Match(Facts("/a.log"), kNow).name() == "logs");

  // A policy may be defined after the rule that names it.
  RuleSet later = MustParse("rule r\n  set policy=late\npolicy late\n  set raid=none\ndefault\n  set policy=late\n");
  CHECK(later.FindPolicy("late") != nullptr);
}

TEST_CASE("Rules: every error names the file, line and column and says what was expected", "[rules]") {
  const std::vector<ErrorCase> cases = {
      // Statements.
      {"rulez a\n", 1, 1, "expected a statement (policy, rule, default), found 'rulez'"},
      {"\"rule\" a\n", 1, 1, "expected a statement (policy, rule, default), found '\"rule\"'"},
      {"  set segment_size=4M\ndefault\n", 1, 3,
       "expected a statement (policy NAME, rule NAME or default) in column 1 before this indented 'set' line"},
      {"  where name x\n", 1, 3, "before this indented 'where' line"},
      {"set raid=none\n", 1, 1, "found 'set': clauses (where, and, set) must be indented"},
      {"rule a\n  sett x=1\n", 2, 3, "expected a clause (where, and, set), found 'sett'"},
      {"rule a\n  set raid=none\n  rule b\n", 3, 3, "found 'rule': statements must start in column 1"},
      {"rule\n", 1, 5, "expected a rule name after 'rule', found end of line"},
      {"policy   # nothing\n", 1, 10, "expected a policy name after 'policy', found end of line"},
      {"rule a!b\n", 1, 6, "expected a rule name (1..64 letters, digits, '.', '_' or '-', starting with a letter or "
                           "digit), found 'a!b'"},
      {"policy -x\n", 1, 8, "expected a policy name (1..64"},
      {"rule " + std::string(65, 'a') + "\n", 1, 6, "expected a rule name"},
      {"rule a\n  set raid=none\nrule a\n", 3, 6, "duplicate rule name 'a' (first defined at line 1)"},
      {"policy p\n  set raid=none\npolicy p\n", 3, 8, "duplicate policy name 'p' (first defined at line 1)"},
      {"rule default\n", 1, 6, "found 'default', which is reserved for the default statement"},
      {"policy none\n", 1, 8, "found 'none', which is reserved"},
      {"policy p selectible\n", 1, 10, "expected 'selectable' or end of line after the policy name, found "
                                       "'selectible'"},
      {"policy p selectable x\n", 1, 21, "expected end of line after the policy name, found 'x'"},
      {"rule a b\n", 1, 8, "expected end of line after the rule name, found 'b'"},
      {"default x\n", 1, 9, "expected end of line after 'default', found 'x'"},
      // Statement structure.
      {"rule a\n  where name x\ndefault\n", 1, 1, "rule 'a' has no 'set' line: expected at least one"},
      {"policy p\ndefault\n", 1, 1, "policy 'p' has no 'set' line"},
      {"policy p\n", 1, 1, "policy 'p' has no 'set' line"},
      {"default\n  where name x\n", 2, 3, "'where' in default: the default applies to every file no rule matched"},
      {"default\n  and name x\n", 2, 3, "'and' in default"},
      {"policy p\n  where name x\n", 2, 3, "'where' in policy 'p': a policy takes only 'set' lines"},
      {"rule a\n  where name x\n  where name y\n", 3, 3, "a second 'where' line in rule 'a': continue with 'and'"},
      {"rule a\n  and name x\n", 2, 3, "expected 'where' before 'and' in rule 'a'"},
      {"rule a\n  set raid=none\n  where name x\n", 3, 3, "'where' after 'set' in rule 'a'"},
      {"rule a\n  set raid=none\n", 2, 16, "expected a 'default' statement at the end of the file, found none"},
      {"rule a\n  set raid=none\n\n# end\n", 4, 6, "expected a 'default' statement"},
      {"", 1, 1, "expected a 'default' statement"},
      {"default\nrule a\n  set raid=none\n", 2, 1,
       "expected nothing after 'default' (line 1), found 'rule': default must be the last statement, and a rule "
       "after it would never be used"},
      {"default\npolicy p\n  set raid=none\n", 2, 1, "found 'policy': default must be the last statement"},
      {"default\n\ndefault\n", 3, 1, "a second 'default' statement (the first is at line 1)"},
      // Conditions.
      {"rule a\n  where sise > 1\n", 2, 9,
       "expected a condition (path, name, size, owner, group, mtime, atime, xattr), found 'sise'"},
      {"rule a\n  where sise>1\n", 2, 9, "found 'sise'"},
      {"rule a\n  where\n", 2, 8, "expected a condition (path, name, size, owner, group, mtime, atime, xattr) after "
                                  "'where', found end of line"},
      {"rule a\n  where name x and\n", 2, 19, "after 'and', found end of line"},
      {"rule a\n  where name x or name y\n", 2, 16, "expected 'and' or end of line after the condition, found 'or'"},
      {"rule a\n  where size 1G\n", 2, 14, "expected an operator (<, <=, >, >=, =, !=) after 'size', found '1G'"},
      {"rule a\n  where size => 1G\n", 2, 14, "after 'size', found '=>'"},
      {"rule a\n  where size\n", 2, 13, "after 'size', found end of line"},
      {"rule a\n  where size >\n", 2, 15, "expected a size (e.g. 100, 512K, 1G) after '>', found end of line"},
      {"rule a\n  where size > lots\n", 2, 16, "bad size: 'lots' is not a size"},
      {"rule a\n  where size>=1Q\n", 2, 15, "bad size: '1Q' has an unknown size suffix"},
      {"rule a\n  where mtime > 30\n", 2, 17, "bad age '30': expected a whole number and a unit s, m (minutes), "
                                              "h, d, w or y (365d), e.g. 30d"},
      {"rule a\n  where atime < 1.5d\n", 2, 17, "bad age '1.5d'"},
      {"rule a\n  where mtime > 1000y\n", 2, 17, "bad age '1000y': too large"},
      {"rule a\n  where mtime = 30d\n", 2, 15, "expected an operator (<, <=, >, >=) after 'mtime', found '='"},
      {"rule a\n  where atime\n", 2, 14, "expected an operator (<, <=, >, >=) after 'atime', found end of line"},
      {"rule a\n  where owner no-such-user-xyz\n", 2, 15,
       "unknown user 'no-such-user-xyz': not in this system's user database"},
      {"rule a\n  where group no-such-group-xyz\n", 2, 15, "unknown group 'no-such-group-xyz'"},
      {"rule a\n  where owner 4294967295\n", 2, 15, "expected a user id below 4294967295, found '4294967295'"},
      {"rule a\n  where owner\n", 2, 14, "expected a user name or uid after 'owner', found end of line"},
      {"rule a\n  where group\n", 2, 14, "expected a group name or gid after 'group', found end of line"},
      {"rule a\n  where path /a/[bc\n", 2, 14, "bad glob '/a/[bc': the '[' at character 4 is never closed by ']'"},
      {"rule a\n  where name x\\\n", 2, 14, "bad glob 'x\\': a '\\' at the end escapes nothing"},
      {"rule a\n  where name [z-a]\n", 2, 14, "bad glob '[z-a]': the range 'z-a'"},
      {"rule a\n  where path a/**\n", 2, 14, "expected a path glob starting with '/'"},
      {"rule a\n  where path *.log\n", 2, 14, "found '*.log'; 'name' matches the last component"},
      {"rule a\n  where name a/b\n", 2, 14, "expected a name glob without '/'"},
      {"rule a\n  where path\n", 2, 13, "expected a glob after 'path', found end of line"},
      {"rule a\n  where xattr project\n", 2, 15, "expected an attribute name starting with 'user.' (e.g. "
                                                 "user.project), found 'project'"},
      {"rule a\n  where xattr user.\n", 2, 15, "starting with 'user.'"},
      {"rule a\n  where xattr\n", 2, 14, "expected an attribute name (user.*) after 'xattr', found end of line"},
      {"rule a\n  where xattr user.p < 3\n", 2, 22, "expected '=', '!=' or nothing after the attribute name, "
                                                    "found '<'"},
      {"rule a\n  where xattr user.p =\n", 2, 23, "expected a value after '=', found end of line"},
      // Quoting.
      {"rule a\n  where name \"abc\n", 2, 14, "unterminated quote: this '\"' is not closed on its line"},
      {"rule a\n  where name \"ab\\\"\n", 2, 14, "unterminated quote"},
      {"rule a\n  where name a\"b\"\n", 2, 15, "a '\"' inside a word: quote the whole token"},
      {"rule a\n  where name \"a\"b\n", 2, 17, "expected a blank after the closing quote, found 'b'"},
      {"rule \"a\n", 1, 6, "unterminated quote"},
      // Settings.
      {"rule a\n  set\n", 2, 6, "expected KEY=VALUE after 'set', found end of line"},
      {"rule a\n  set # nothing\n", 2, 7, "expected KEY=VALUE after 'set', found end of line"},
      {"rule a\n  set segment_size\n", 2, 7, "expected KEY=VALUE, found 'segment_size'"},
      {"rule a\n  set segment_size = 4M\n", 2, 7, "expected KEY=VALUE, found 'segment_size' (no blanks around '=')"},
      {"rule a\n  set =4M\n", 2, 7, "expected KEY=VALUE, found '=4M'"},
      {"rule a\n  set raid=none x\n", 2, 17, "expected KEY=VALUE, found 'x'"},
      {"rule a\n  set segment_size=\n", 2, 20, "expected a value right after 'segment_size=', found end of line"},
      {"rule a\n  set segment_size= 4M\n", 2, 20, "found a blank"},
      {"rule a\n  set colour=red\n", 2, 7, "user.cairn.colour is not a cairn policy key"},
      {"rule a\n  set segment_size=3K\n", 2, 20, "user.cairn.segment_size: '3K' is not a valid value (allowed: a size"},
      {"rule a\n  set raid=raid5\n", 2, 12, "user.cairn.raid: 'raid5' is not a valid value"},
      {"default\n  set encrypt=aes-256-gcm\n", 2, 15, "user.cairn.encrypt=aes-256-gcm is valid but not available in this build"},
      {"rule a\n  set policy=\"has space\"\n", 2, 14, "user.cairn.policy: 'has space' is not a valid value"},
      {"rule a\n  set policy=nope\ndefault\n", 2, 14,
       "rule 'a' sets policy=nope, but no policy of that name is defined in this file (expected a 'policy nope' "
       "statement)"},
      {"default\n  set policy=nope\n", 2, 14, "default sets policy=nope"},
      {"policy p\n  set policy=q\n", 2, 7, "expected settings in policy 'p', found policy=: a policy cannot include "
                                           "another policy"},
      {"rule a\n  set raid=none raid=none\n", 2, 17, "raid is set twice in rule 'a' (first at line 2)"},
      {"rule a\n  set raid=none\n  set checksum=crc32c\n  set raid=none\ndefault\n", 4, 7,
       "raid is set twice in rule 'a' (first at line 2)"},
      {"policy p\n  set segment_size=1M segment_size=1M\n", 2, 23, "segment_size is set twice in policy 'p'"},
      // Positions count bytes; tabs are one column; CRLF is one line ending.
      {"rule a\r\n\twhere sise > 1\r\n", 2, 8, "found 'sise'"},
      {"\xEF\xBB\xBFrulez\n", 1, 1, "found 'rulez'"},
      {"rule a\n  where name x \x01\n", 2, 16, "expected 'and' or end of line after the condition, found '\\x01'"},
      {"rulez\x01\n", 1, 1, "found 'rulez\\x01'"},
      {"rule a\n  set raid=a\x02" "b\n", 2, 12, "user.cairn.raid: 'a\\x02b' is not a valid value"},
      // C1 controls (0x9b is CSI) and bytes that are not UTF-8 are escaped too.
      {"rule \x9b" "2J\xff\xc3(\n", 1, 6, "found '\\x9b2J\\xff\\xc3('"},
  };
  for (const ErrorCase& c : cases) {
    INFO(c.text);
    auto rules = RuleSet::Parse(c.text, "rules");
    REQUIRE_FALSE(rules.ok());
    CHECK(rules.status().code() == Status::Code::kInvalidArgument);
    std::string prefix = fmt::format("rules:{}:{}: ", c.line, c.col);
    const std::string& message = rules.status().message();
    CHECK(message.substr(0, prefix.size()) == prefix);
    INFO(message);
    CHECK(message.find(c.fragment) != std::string::npos);
  }
}

TEST_CASE("Rules: a long token is cut short in messages", "[rules]") {
  auto rules = RuleSet::Parse(std::string(1000, 'x') + "\n", "rules");
  REQUIRE_FALSE(rules.ok());
  CHECK(rules.status().message() ==
        "rules:1:1: expected a statement (policy, rule, default), found 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'");
}

TEST_CASE("Rules: size limits are refused with a clear error", "[rules]") {
  std::string big(RuleSet::kMaxFileBytes + 1, '#');
  auto too_big = RuleSet::Parse(big, "rules");
  REQUIRE_FALSE(too_big.ok());
  CHECK(too_big.status().message() ==
        "rules:1:1: the file is 4194305 bytes; a rules file may be at most 4194304 bytes (4 MiB)");

  std::string many;
  for (int i = 0; i <= RuleSet::kMaxStatements; i++) many += fmt::format("policy p{}\n set raid=none\n", i);
  REQUIRE(many.size() <= RuleSet::kMaxFileBytes);
  auto too_many = RuleSet::Parse(many, "rules");
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.status().message() ==
        fmt::format("rules:{}:1: too many statements: a rules file may have at most 100000",
                    2 * RuleSet::kMaxStatements + 1));
  many.resize(many.size() - std::string_view("policy p100000\n set raid=none\n").size());
  auto most = RuleSet::Parse(many + "rule r\n set raid=none\n", "rules");
  CHECK_FALSE(most.ok());  // the 100001st statement
  auto exactly = RuleSet::Parse(many.substr(0, many.rfind("policy")) + "default\n", "rules");
  CHECK(exactly.ok());

  std::string conditions = "rule r\n where size > 1";
  for (size_t i = 1; i <= RuleSet::kMaxConditionsPerRule; i++) conditions += " and size > 1";
  auto too_many_conditions = RuleSet::Parse(conditions + "\n set raid=none\ndefault\n", "rules");
  REQUIRE_FALSE(too_many_conditions.ok());
  CHECK(too_many_conditions.status().message().find("too many conditions in rule 'r': at most 1000") !=
        std::string::npos);
}

TEST_CASE("Rules: Load reads a file and names it in errors", "[rules]") {
  test::TempDir dir;
  std::string path = dir / "rules";
  {
    std::ofstream out(path);
    out << kExample;
  }
  auto rules = RuleSet::Load(path);
  REQUIRE(rules.ok());
  CHECK(rules->file_name() == path);
  CHECK(rules->rules().size() == 4);

  {
    std::ofstream out(path);
    out << "rule a\n  set raid=none\n";
  }
  auto broken = RuleSet::Load(path);
  REQUIRE_FALSE(broken.ok());
  CHECK(broken.status().message().starts_with(path + ":2:16: expected a 'default' statement"));

  auto missing = RuleSet::Load(dir / "nope");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().IsNotFound());
  CHECK(missing.status().message().find(dir / "nope") != std::string::npos);

  auto directory = RuleSet::Load(dir.path());
  REQUIRE_FALSE(directory.ok());
  CHECK(directory.status().message().find(dir.path()) != std::string::npos);

  {
    std::ofstream out(path);
    out << std::string(RuleSet::kMaxFileBytes + 100, '\n');
  }
  auto huge = RuleSet::Load(path);
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.status().message() ==
        path + ":1:1: the file is 4194404 bytes; a rules file may be at most 4194304 bytes (4 MiB)");
}

TEST_CASE("Rules: every file in policies/ parses", "[rules]") {
#ifdef CAIRN_SOURCE_DIR
  std::filesystem::path dir = std::filesystem::path(CAIRN_SOURCE_DIR) / "policies";
#else
  std::filesystem::path dir = "policies";
#endif
  INFO("policies directory: " << dir.string() << " (run from the source tree or define CAIRN_SOURCE_DIR)");
  REQUIRE(std::filesystem::is_directory(dir));
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".rules") continue;
    INFO(entry.path().string());
    auto rules = RuleSet::Load(entry.path().string());
    INFO(rules.status().ToString());
    CHECK(rules.ok());
    files++;
  }
  CHECK(files >= 2);
}

TEST_CASE("Rules: matching 1000 rules takes microseconds", "[rules]") {
  std::string text;
  for (int i = 0; i < 1000; i++) {
    switch (i % 4) {
      case 0: text += fmt::format("rule r{}\n  where path /projects/p{}/** and size >= 1M\n", i, i); break;
      case 1: text += fmt::format("rule r{}\n  where name *.ext{}\n", i, i); break;
      case 2: text += fmt::format("rule r{}\n  where path /data/**/run{}/*.nc and mtime > 30d\n", i, i); break;
      case 3: text += fmt::format("rule r{}\n  where xattr user.tag{} and owner root\n", i, i); break;
    }
    text += "  set segment_size=8M\n";
  }
  text += "default\n";
  RuleSet rules = MustParse(text);
  FileFacts facts = WithXattrs(Facts("/data/2019/deep/er/run998/x.nc", 5 << 20), {});
  constexpr int kRounds = 200;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; i++) REQUIRE(rules.Match(facts, kNow).name() == "default");
  double micros = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  double per_match = micros / kRounds;
  INFO("microseconds per Match over 1000 rules: " << per_match);
  CHECK(per_match < 1000);  // a generous bound that holds under sanitizers too
  facts.mtime_ns = kNow - 40 * kDay;
  CHECK(rules.Match(facts, kNow).name() == "r998");
}

TEST_CASE("Rules: fuzzed files never crash and every error has a position", "[rules][fuzz]") {
  const std::string base = std::string(kExample);
  const std::vector<std::string> kVocabulary = {
      "policy", "rule", "default", "where", "and", "set", "selectable", "path", "name", "size", "owner", "group",
      "mtime", "atime", "xattr", "<", "<=", ">", ">=", "=", "!=", "\"", "\\", "#", "/**", "**", "*", "?", "[", "]",
      "[!a-z]", "/", "1G", "30d", "99999999999999999999y", "root", "user.project", "user.", "segment_size=",
      "segment_size=4M", "policy=cold", "policy=bulk", "raid=rs-10-4", "checksum=crc32c", "cold", "\t", " ", "\n",
      "\r\n", "\r", "    set ", "    where ", "    and ", "\"a b\"", "\"\\\"\"", "\xEF\xBB\xBF", std::string(1, '\0')};
  const size_t kWords = kVocabulary.size();
  test::Fuzz fuzz("rules", 22000);
  // "fuzz:LINE:COL: message", LINE and COL positive numbers, and no control characters.
  auto positioned = [](const std::string& message) {
    size_t at = 0;
    if (message.rfind("fuzz:", 0) != 0) return false;
    at = 5;
    for (int field = 0; field < 2; field++) {
      if (at >= message.size() || message[at] < '1' || message[at] > '9') return false;
      while (at < message.size() && std::isdigit(static_cast<unsigned char>(message[at]))) at++;
      if (at >= message.size() || message[at] != ':') return false;
      at++;
    }
    if (message.size() <= at + 1 || message[at] != ' ') return false;
    return std::none_of(message.begin(), message.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; });
  };
  uint64_t parsed = 0, failed = 0, bad = 0;
  std::string first_bad;
  auto check = [&](const std::string& text) {
    auto rules = RuleSet::Parse(text, "fuzz");
    if (rules.ok()) {
      parsed++;
      FileFacts facts = WithXattrs(Facts("/instruments/x.log", 3ull << 30), {{"user.project", "alpha team"}});
      (void)rules->Match(facts, kNow);
      (void)rules->Expand(rules->Match(facts, kNow).settings());
      return;
    }
    failed++;
    const std::string& message = rules.status().message();
    if (rules.status().code() != Status::Code::kInvalidArgument || !positioned(message)) {
      if (bad++ == 0) first_bad = message;
    }
  };

  while (fuzz.Next()) {
    std::string text;
    if (fuzz.iterations() % 11 == 0) {  // random bytes, or random sentences of the grammar's words
      const size_t length = fuzz.Uniform(300);
      if (fuzz.Uniform(2) == 0) {
        while (text.size() < length) text += static_cast<char>(fuzz.Uniform(256));
      } else {
        while (text.size() < length) text += kVocabulary[fuzz.Uniform(kWords)] + (fuzz.Uniform(3) ? " " : "\n");
      }
    } else {  // the example, mutated; sometimes with a line duplicated (a rule or policy defined twice)
      text = base;
      if (fuzz.Uniform(4) == 0) {
        const size_t at = fuzz.Uniform(text.size());
        size_t begin = text.rfind('\n', at == 0 ? 0 : at - 1);
        begin = begin == std::string::npos ? 0 : begin + 1;
        size_t end = text.find('\n', at);
        end = end == std::string::npos ? text.size() : end + 1;
        text.insert(begin, text.substr(begin, end - begin));
      }
      fuzz.Mutate(text, kVocabulary);
    }
    check(text);
  }
  INFO("first message without a position: " << first_bad);
  CHECK(bad == 0);
  CHECK(parsed >= fuzz.iterations() / 200);  // many mutations (comments, blank lines) keep the file valid
  CHECK(failed >= fuzz.iterations() / 2);
}

TEST_CASE("RuleSet: an archive's own rules file is read only as a regular file, not through a link or a FIFO") {
  test::TempDir dir;
  std::string secret = dir / "secret";
  {
    std::ofstream f(secret);
    f << "root:$y$j9T$not-for-the-archive-owner\n";
  }
  std::string link = dir / "rules-link";
  std::filesystem::create_symlink(secret, link);
  auto through_link = RuleSet::ReadArchiveText(link);
  REQUIRE_FALSE(through_link.ok());
  CHECK(through_link.status().message().find("symbolic link") != std::string::npos);
  CHECK(through_link.status().message().find("not-for") == std::string::npos);
  std::string fifo = dir / "rules-fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto from_fifo = RuleSet::ReadArchiveText(fifo);  // returns at once: nobody writes to it
  REQUIRE_FALSE(from_fifo.ok());
  CHECK(from_fifo.status().message().find("not a regular file") != std::string::npos);
  CHECK(RuleSet::ReadArchiveText(dir / "none").status().sys_errno() == ENOENT);
  CHECK(*RuleSet::ReadArchiveText(secret) == "root:$y$j9T$not-for-the-archive-owner\n");
}
