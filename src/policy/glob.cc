// Glob compilation into a list of elements, and matching by simulating the automaton they
// form on all positions at once (a set of live pattern positions per text character).
#include "policy/glob.h"

#include <fmt/format.h>

namespace cairn {
namespace {

Status BadGlob(std::string_view what) { return Status::InvalidArgument(what); }

}  // namespace

Result<Glob> Glob::Compile(std::string_view pattern) {
  if (pattern.size() > kMaxPatternLength) {
    return BadGlob(fmt::format("the pattern is {} bytes long; at most {} are allowed", pattern.size(),
                               kMaxPatternLength));
  }
  Glob glob;
  glob.pattern_ = std::string(pattern);
  const size_t n = pattern.size();
  size_t i = 0;
  while (i < n) {
    char c = pattern[i];
    if (c == '*') {
      size_t j = i;
      while (j < n && pattern[j] == '*') j++;
      if (j - i == 1) {
        glob.elements_.push_back({Kind::kStar});
      } else {
        const auto& prev = glob.elements_;
        bool starts_component = prev.empty() || (prev.back().kind == Kind::kLiteral && prev.back().ch == '/');
        bool ends_component = j < n && pattern[j] == '/';
        if (starts_component && ends_component) glob.elements_.push_back({Kind::kOptionalDirs});
        glob.elements_.push_back({Kind::kStarStar});
      }
      i = j;
    } else if (c == '?') {
      glob.elements_.push_back({Kind::kAnyChar});
      i++;
    } else if (c == '\\') {
      if (i + 1 == n) return BadGlob("a '\\' at the end escapes nothing (write '\\\\' for a backslash)");
      glob.elements_.push_back({Kind::kLiteral, static_cast<unsigned char>(pattern[i + 1])});
      i += 2;
    } else if (c == '[') {
      std::bitset<256> members;
      size_t k = i + 1;
      bool negate = k < n && (pattern[k] == '!' || pattern[k] == '^');
      if (negate) k++;
      bool first = true;
      // Reads one class member at k, honouring '\' escapes; false at the end of the pattern.
      auto member = [&](unsigned char* out) {
        if (k < n && pattern[k] == '\\') k++;
        if (k >= n) return false;
        *out = static_cast<unsigned char>(pattern[k++]);
        return true;
      };
      for (;;) {
        if (k >= n) {
          return BadGlob(fmt::format("the '[' at character {} is never closed by ']'", i + 1));
        }
        if (pattern[k] == ']' && !first) break;
        first = false;
        unsigned char lo = 0;
        if (!member(&lo)) return BadGlob(fmt::format("the '[' at character {} is never closed by ']'", i + 1));
        unsigned char hi = lo;
        if (k + 1 < n && pattern[k] == '-' && pattern[k + 1] != ']') {
          k++;
          if (!member(&hi)) return BadGlob(fmt::format("the '[' at character {} is never closed by ']'", i + 1));
          if (hi < lo) {
            return BadGlob(fmt::format("the range '{}-{}' in the class at character {} is reversed",
                                       static_cast<char>(lo), static_cast<char>(hi), i + 1));
          }
        }
        for (unsigned v = lo; v <= hi; v++) members.set(v);
      }
      if (negate) members.flip();
      members.reset('/');  // classes, like ? and *, stay inside one path component
      glob.elements_.push_back({Kind::kClass, 0, static_cast<uint32_t>(glob.classes_.size())});
      glob.classes_.push_back(members);
      i = k + 1;
    } else {
      glob.elements_.push_back({Kind::kLiteral, static_cast<unsigned char>(c)});
      i++;
    }
  }

  // Quick-reject data. The '/' after an optional "**/" may be skipped, so it counts for none.
  const auto& el = glob.elements_;
  auto fixed_literal = [&](size_t k) {
    return el[k].kind == Kind::kLiteral && !(k >= 2 && el[k - 2].kind == Kind::kOptionalDirs);
  };
  size_t head = 0;
  while (head < el.size() && fixed_literal(head)) glob.prefix_ += static_cast<char>(el[head++].ch);
  size_t tail = el.size();
  if (head < el.size()) {
    while (tail > head && fixed_literal(tail - 1)) tail--;
    for (size_t k = tail; k < el.size(); k++) glob.suffix_ += static_cast<char>(el[k].ch);
  }
  std::string run;
  for (size_t k = head; k <= tail; k++) {
    if (k < tail && fixed_literal(k)) {
      run += static_cast<char>(el[k].ch);
      continue;
    }
    if (run.size() > glob.infix_.size()) glob.infix_ = run;
    run.clear();
  }
  for (size_t k = 0; k < el.size(); k++) {
    if (fixed_literal(k) || el[k].kind == Kind::kAnyChar || el[k].kind == Kind::kClass) glob.min_length_++;
  }
  return glob;
}

bool Glob::Consumes(const Element& e, unsigned char c) const {
  switch (e.kind) {
    case Kind::kLiteral: return c == e.ch;
    case Kind::kAnyChar: return c != '/';
    case Kind::kClass: return classes_[e.class_index].test(c);
    default: return false;
  }
}

bool Glob::Matches(std::string_view text) const {
  const size_t count = elements_.size();
  if (prefix_.size() == count) return text == prefix_;  // no wildcard at all
  if (text.size() < min_length_ || !text.starts_with(prefix_) || !text.ends_with(suffix_)) return false;
  std::string_view middle = text.substr(prefix_.size(), text.size() - prefix_.size() - suffix_.size());
  if (middle.find(infix_) == std::string_view::npos) return false;
  // The common "/dir/**" and "*.ext" shapes need no automaton.
  if (count - prefix_.size() - suffix_.size() == 1) {
    Kind kind = elements_[prefix_.size()].kind;
    if (kind == Kind::kStarStar) return true;
    if (kind == Kind::kStar) return middle.find('/') == std::string_view::npos;
  }

  // Run the automaton over the middle only: the prefix and suffix elements are plain literals,
  // so a match enters element `head` after the prefix and must reach `tail` before the suffix.
  // live[k]: the elements before k can match the text read so far. Moves only go forward, so
  // live states lie in [lo, hi] and one ascending pass closes a set over the moves that
  // consume nothing.
  const size_t head = prefix_.size(), tail = count - suffix_.size();
  constexpr size_t kInline = 128;
  uint8_t inline_states[2 * kInline];
  std::vector<uint8_t> heap_states;
  uint8_t* live = inline_states;
  uint8_t* next = inline_states + kInline;
  if (count + 1 > kInline) {
    heap_states.resize(2 * (count + 1));
    live = heap_states.data();
    next = live + count + 1;
  }
  std::fill(live, live + count + 1, 0);
  std::fill(next, next + count + 1, 0);
  size_t lo = head, hi = head;
  auto close = [&](uint8_t* set) {
    for (size_t k = lo; k <= hi && k < tail; k++) {
      if (!set[k]) continue;
      Kind kind = elements_[k].kind;
      if (kind == Kind::kStar || kind == Kind::kStarStar || kind == Kind::kOptionalDirs) {
        set[k + 1] = 1;
        hi = std::max(hi, k + 1);
      }
      if (kind == Kind::kOptionalDirs) {  // skip the "**" and "/" that Compile put after it
        set[k + 3] = 1;
        hi = std::max(hi, k + 3);
      }
    }
  };
  live[head] = 1;
  close(live);
  for (char ch : middle) {
    auto c = static_cast<unsigned char>(ch);
    size_t next_lo = count + 1, next_hi = 0;
    auto add = [&](size_t k) {
      next[k] = 1;
      next_lo = std::min(next_lo, k);
      next_hi = std::max(next_hi, k);
    };
    for (size_t k = lo; k <= hi && k < tail; k++) {
      if (!live[k]) continue;
      const Element& e = elements_[k];
      switch (e.kind) {
        case Kind::kStar:
          if (c != '/') add(k);
          break;
        case Kind::kStarStar:
          add(k);
          break;
        case Kind::kOptionalDirs:
          break;
        default:
          if (Consumes(e, c)) add(k + 1);
          break;
      }
    }
    std::fill(live + lo, live + hi + 1, 0);
    if (next_lo > next_hi) return false;
    lo = next_lo;
    hi = next_hi;
    close(next);
    std::swap(live, next);
  }
  return live[tail] != 0;
}

}  // namespace cairn
