// Shell-style patterns for admin rules (cairn.rules(5)): *, **, ?, [classes] and \ escapes,
// compiled once and matched against paths inside the archive in O(pattern x path) time.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/status.h"

namespace cairn {

// A compiled glob. `*` is any run of characters except '/', `**` any run including '/',
// and a `**` that fills a whole path component (`/a/**/b`, or `**/b` at the start) may also
// match no component at all, so `/a/**/b` matches `/a/b`. `?` is one character except '/';
// `[abc]`, `[a-z]` and `[!a-z]` (or `[^a-z]`) are classes, which never match '/'; `\x` is
// the character x. Matching is case sensitive and never backtracks. Copyable and immutable:
// safe to share between threads.
class Glob {
 public:
  static constexpr size_t kMaxPatternLength = 4096;

  // Compiles `pattern`. An unterminated class, a reversed range, a trailing '\' or a pattern
  // longer than kMaxPatternLength is InvalidArgument, saying what is wrong and where in `pattern`.
  static Result<Glob> Compile(std::string_view pattern);

  bool Matches(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  enum class Kind : uint8_t {
    kLiteral,   // the character `ch`
    kAnyChar,   // ?
    kClass,     // classes_[class_index]
    kStar,      // *
    kStarStar,  // **
    // Put before the "**" of "/**/" (or of a leading "**/"): consumes nothing and lets the
    // match go on either at that "**" or past it and its '/'.
    kOptionalDirs,
  };
  struct Element {
    Kind kind;
    unsigned char ch = 0;
    uint32_t class_index = 0;
  };

  Glob() = default;
  bool Consumes(const Element& e, unsigned char c) const;

  std::string pattern_;
  std::vector<Element> elements_;
  std::vector<std::bitset<256>> classes_;
  // Quick rejects before the automaton runs: literal text the match must start and end with,
  // the longest literal it must contain between them, and the fewest characters it can match.
  std::string prefix_;
  std::string suffix_;
  std::string infix_;
  size_t min_length_ = 0;
};

}  // namespace cairn
