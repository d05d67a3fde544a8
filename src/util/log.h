// Process-wide logging: one line per event, to a log file and/or stderr. Safe to call
// from any thread. Every message is escaped (util/printable.h) and cut at kMaxLogMessage
// bytes, so user-supplied text can neither forge lines nor fill the disk; each call site
// writes at most kLogBurst lines per kLogWindow, and says how many it suppressed; the
// file moves to PATH.1 when it would grow past its size limit.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "util/printable.h"

namespace cairn {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

inline constexpr size_t kMaxLogMessage = 2048;
inline constexpr size_t kLogBurst = 20;
inline constexpr std::chrono::seconds kLogWindow{10};
inline constexpr uint64_t kDefaultLogMaxBytes = 64ull << 20;

// Appends to `path` (created 0600 if missing); "" stops logging to a file. Once the file
// would pass `max_bytes`, it is renamed to PATH.1 (replacing the previous one) and a new
// one is started, so the log takes at most twice `max_bytes`.
void SetLogFile(const std::string& path, uint64_t max_bytes = kDefaultLogMaxBytes);
void SetLogToStderr(bool enabled);
void SetLogLevel(LogLevel level);
// `site` identifies the call site (its format string) for rate limiting.
void LogLine(LogLevel level, std::string_view site, const std::string& message);
// Writes the suppression counts still pending (before the daemon exits).
void ReportSuppressedLogLines();

// A call site's format string, which names it for rate limiting.
template <typename... Args>
std::string_view LogSite(fmt::format_string<Args...> f) {
  fmt::string_view text = f;
  return {text.data(), text.size()};
}

template <typename... Args>
void LogInfo(fmt::format_string<Args...> f, Args&&... args) {
  LogLine(LogLevel::kInfo, LogSite<Args...>(f), fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void LogWarning(fmt::format_string<Args...> f, Args&&... args) {
  LogLine(LogLevel::kWarning, LogSite<Args...>(f), fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void LogError(fmt::format_string<Args...> f, Args&&... args) {
  LogLine(LogLevel::kError, LogSite<Args...>(f), fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void LogDebug(fmt::format_string<Args...> f, Args&&... args) {
  LogLine(LogLevel::kDebug, LogSite<Args...>(f), fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace cairn
