// Glob: the pattern language of cairn.rules(5), its error messages, agreement with a slow
// reference matcher, and no exponential blow-up on patterns made of many stars.
#include <catch2/catch.hpp>

#include <chrono>
#include <random>
#include <string>

#include "policy/glob.h"

using namespace cairn;

namespace {

bool Match(std::string_view pattern, std::string_view text) {
  auto glob = Glob::Compile(pattern);
  REQUIRE(glob.ok());
  return glob->Matches(text);
}

std::string CompileError(std::string_view pattern) {
  auto glob = Glob::Compile(pattern);
  REQUIRE_FALSE(glob.ok());
  CHECK(glob.status().code() == Status::Code::kInvalidArgument);
  return glob.status().message();
}

// The definition of the language, by backtracking (exponential; for short strings only), over
// patterns of literals, '?', '*' and '**'. `component_start`: the previous pattern character
// was '/' or there was none, so a "**/" here may match no directory at all.
bool Reference(std::string_view p, std::string_view t, bool component_start = true) {
  if (p.empty()) return t.empty();
  if (p.starts_with("**")) {
    size_t stars = p.find_first_not_of('*');
    std::string_view rest = p.substr(stars == std::string_view::npos ? p.size() : stars);
    for (size_t k = 0; k <= t.size(); k++) {
      if (Reference(rest, t.substr(k), false)) return true;
    }
    return component_start && rest.starts_with('/') && Reference(rest.substr(1), t, true);
  }
  if (p[0] == '*') {
    for (size_t k = 0; k <= t.size(); k++) {
      if (Reference(p.substr(1), t.substr(k), false)) return true;
      if (k < t.size() && t[k] == '/') break;
    }
    return false;
  }
  if (t.empty()) return false;
  if (p[0] == '?' ? t[0] == '/' : p[0] != t[0]) return false;
  return Reference(p.substr(1), t.substr(1), p[0] == '/');
}

}  // namespace

TEST_CASE("Glob: literals, * and ?", "[glob]") {
  CHECK(Match("/a/b.txt", "/a/b.txt"));
  CHECK_FALSE(Match("/a/b.txt", "/a/b.txt2"));
  CHECK_FALSE(Match("/a/b.txt", "/a/b.tx"));
  CHECK(Match("*.log", "app.log"));
  CHECK(Match("*.log", ".log"));
  CHECK_FALSE(Match("*.log", "dir/app.log"));  // * stays inside one component
  CHECK_FALSE(Match("*.log", "app.log.1"));
  CHECK(Match("/logs/*/app.log", "/logs/2019/app.log"));
  CHECK_FALSE(Match("/logs/*/app.log", "/logs/2019/05/app.log"));
  CHECK(Match("/a?c", "/abc"));
  CHECK_FALSE(Match("/a?c", "/a/c"));
  CHECK_FALSE(Match("/a?c", "/ac"));
  CHECK(Match("a*b*c", "aXXbYYc"));
  CHECK(Match("a*b*c", "abc"));
  CHECK_FALSE(Match("a*b*c", "acb"));
  CHECK(Match("", ""));
  CHECK_FALSE(Match("", "a"));
  CHECK(Match("*", ""));
  CHECK(Match("Data.NC", "Data.NC"));
  CHECK_FALSE(Match("data.nc", "Data.NC"));  // case sensitive
}

TEST_CASE("Glob: ** crosses directories; /**/ may also match a single '/'", "[glob]") {
  CHECK(Match("/projects/**", "/projects/a"));
  CHECK(Match("/projects/**", "/projects/a/b/c.nc"));
  CHECK_FALSE(Match("/projects/**", "/projects"));
  CHECK_FALSE(Match("/projects/**", "/projectsX/a"));
  CHECK_FALSE(Match("/projects/**", "/other/projects/a"));
  CHECK(Match("/a/**/b", "/a/b"));
  CHECK(Match("/a/**/b", "/a/x/b"));
  CHECK(Match("/a/**/b", "/a/x/y/b"));
  CHECK_FALSE(Match("/a/**/b", "/a/xb"));
  CHECK_FALSE(Match("/a/**/b", "/ab"));
  CHECK_FALSE(Match("/a/**/b", "/a/x/b/c"));
  CHECK(Match("/**/*.nc", "/x.nc"));
  CHECK(Match("/**/*.nc", "/a/b/x.nc"));
  CHECK_FALSE(Match("/**/*.nc", "/a/b/x.nc4"));
  CHECK(Match("**/x", "x"));
  CHECK(Match("**/x", "a/b/x"));
  CHECK_FALSE(Match("**/x", "ax"));
  CHECK(Match("/a**", "/abc/d"));  // not a whole component: just any run
  CHECK(Match("/a/***/b", "/a/b"));  // more than two stars are one **
  CHECK(Match("/**", "/"));
  CHECK(Match("/**/", "/"));
}

TEST_CASE("Glob: classes and escapes", "[glob]") {
  CHECK(Match("[abc]", "b"));
  CHECK_FALSE(Match("[abc]", "d"));
  CHECK(Match("x[a-z]y", "xmy"));
  CHECK_FALSE(Match("x[a-z]y", "xMy"));
  CHECK(Match("x[!a-z]y", "xMy"));
  CHECK_FALSE(Match("x[!a-z]y", "xmy"));
  CHECK(Match("x[^0-9]", "xa"));
  CHECK_FALSE(Match("x[^0-9]", "x5"));
  CHECK(Match("[]]", "]"));
  CHECK(Match("[!]]", "a"));
  CHECK_FALSE(Match("[!]]", "]"));
  CHECK(Match("[a-]", "-"));
  CHECK(Match("[\\]x]", "]"));
  CHECK(Match("[0-9][0-9][0-9][0-9].nc", "2019.nc"));
  CHECK_FALSE(Match("a[!x]b", "a/b"));  // classes never match '/'
  CHECK_FALSE(Match("a[/]b", "a/b"));
  CHECK(Match("a\\*b", "a*b"));
  CHECK_FALSE(Match("a\\*b", "axb"));
  CHECK(Match("\\[x\\]", "[x]"));
  CHECK(Match("a\\?", "a?"));
  CHECK_FALSE(Match("a\\?", "ab"));
  CHECK(Match("/a/\\**", "/a/*x"));
  CHECK(Match("/caf\xc3\xa9/*", "/caf\xc3\xa9/menu"));  // bytes, so UTF-8 names just work
  CHECK(Match("[\x80-\xff]*", "\xc3\xa9t\xc3\xa9"));
}

TEST_CASE("Glob: long patterns", "[glob]") {
  std::string pattern = std::string(150, '?') + "*";
  CHECK(Match(pattern, std::string(150, 'x')));
  CHECK(Match(pattern, std::string(300, 'x')));
  CHECK_FALSE(Match(pattern, std::string(149, 'x')));
  CHECK_FALSE(Match(pattern, std::string(100, 'x') + "/" + std::string(100, 'x')));
  std::string stars = "/";
  for (int i = 0; i < 200; i++) stars += "*a";
  CHECK(Match(stars, "/" + std::string(200, 'a')));
  CHECK_FALSE(Match(stars, "/" + std::string(199, 'a')));
}

TEST_CASE("Glob: malformed patterns are InvalidArgument saying what is wrong", "[glob]") {
  CHECK(CompileError("/a/[bc") == "the '[' at character 4 is never closed by ']'");
  CHECK(CompileError("[!") == "the '[' at character 1 is never closed by ']'");
  CHECK(CompileError("[]") == "the '[' at character 1 is never closed by ']'");
  CHECK(CompileError("[a\\") == "the '[' at character 1 is never closed by ']'");
  CHECK(CompileError("abc\\").find("a '\\' at the end escapes nothing") == 0);
  CHECK(CompileError("[z-a]") == "the range 'z-a' in the class at character 1 is reversed");
  CHECK(CompileError(std::string(Glob::kMaxPatternLength + 1, 'a')).find("at most 4096") != std::string::npos);
  CHECK(Glob::Compile(std::string(Glob::kMaxPatternLength, '*')).ok());
  CHECK(Glob::Compile("/a/b")->pattern() == "/a/b");
}

TEST_CASE("Glob: agrees with a backtracking reference on random patterns", "[glob]") {
  std::mt19937 rng(4242);
  const char kPatternChars[] = {'a', 'b', '/', '*', '*', '?'};
  const char kTextChars[] = {'a', 'b', '/'};
  int mismatches = 0;
  std::string first_mismatch;
  for (int i = 0; i < 20000; i++) {
    std::string pattern, text;
    for (size_t n = rng() % 9; n > 0; n--) pattern += kPatternChars[rng() % sizeof(kPatternChars)];
    for (size_t n = rng() % 9; n > 0; n--) text += kTextChars[rng() % sizeof(kTextChars)];
    auto glob = Glob::Compile(pattern);
    REQUIRE(glob.ok());
    if (glob->Matches(text) != Reference(pattern, text)) {
      if (mismatches++ == 0) first_mismatch = "'" + pattern + "' vs '" + text + "'";
    }
  }
  INFO(first_mismatch);
  CHECK(mismatches == 0);
}

TEST_CASE("Glob: many stars against a long path finish quickly", "[glob]") {
  std::string path;
  while (path.size() < 4000) path += "/abcdefgh";
  auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(Match("/**/**/**/**/**/**/x", path + "/y"));
  CHECK(Match("/**/**/**/**/**/**/x", path + "/x"));
  CHECK_FALSE(Match("/*a*a*a*a*a*a*a*a*a*a*a*a*b", "/" + std::string(4000, 'a')));
  CHECK_FALSE(Match("**a**a**a**a**a**a**a**a**a**a**a**a**b", std::string(4000, 'a')));
  CHECK_FALSE(Match("/[a-z]*[a-z]*[a-z]*[a-z]*[a-z]*[a-z]*/", "/" + std::string(4000, 'a')));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 0.5);  // backtracking would take longer than the age of the universe
}
