// Text from users (names, xattr values, request lines) made safe to put in a log line or
// a message: control bytes escaped so no one can forge lines, and long text cut short.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cairn {

// At most `limit` bytes of `text`, followed by "…(N bytes)" when it was longer.
std::string Abbreviated(std::string_view text, size_t limit = 200);

// `text` with "\" doubled, \n \r \t escaped, and other control bytes, C1 controls and bytes
// that are not valid UTF-8 as \xNN. Printable ASCII and valid UTF-8 stay as they are.
std::string Escaped(std::string_view text);

// `text` with control bytes, C1 controls and bytes that are not valid UTF-8 as \xNN, and
// nothing else changed: for messages quoting what someone typed, where a doubled '\' would
// mislead (a rules file's glob).
std::string ControlsEscaped(std::string_view text);

// `text` as a JSON string, quotes included: '"' and '\' escaped, control bytes and bytes that
// are not valid UTF-8 as \u00NN (the byte's value: a path that is not UTF-8 stays told apart).
std::string JsonString(std::string_view text);

}  // namespace cairn
