// Process-wide logging: one line per event, to a log file and/or stderr.
// Safe to call from any thread.
#pragma once

#include <string>

#include <fmt/format.h>

namespace cairn {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// Appends to `path` (created if missing); "" keeps the current file.
void SetLogFile(const std::string& path);
void SetLogToStderr(bool enabled);
void SetLogLevel(LogLevel level);
void LogLine(LogLevel level, const std::string& message);

template <typename... Args>
void LogInfo(fmt::format_string<Args...> f, Args&&... args) {
  LogLine(LogLevel::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void LogWarning(fmt::format_string<Args...> f, Args&&... args) {
  LogLine(LogLevel::kWarning, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void LogError(fmt::format_string<Args...> f, Args&&... args) {
  LogLine(LogLevel::kError, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void LogDebug(fmt::format_string<Args...> f, Args&&... args) {
  LogLine(LogLevel::kDebug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace cairn
