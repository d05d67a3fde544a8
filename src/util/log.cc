#include "util/log.h"

#include <cstdio>
#include <ctime>
#include <mutex>

#include <fcntl.h>
#include <sys/time.h>
#include <unistd.h>

namespace cairn {
namespace {

std::mutex g_mutex;
FILE* g_file = nullptr;
bool g_stderr = true;
LogLevel g_level = LogLevel::kInfo;

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "?";
}

}  // namespace

void SetLogFile(const std::string& path) {
  std::lock_guard lock(g_mutex);
  if (g_file) fclose(g_file);
  g_file = nullptr;
  if (path.empty()) return;
  // Private (0600) whatever the umask: the log names files and users.
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0 && !(g_file = fdopen(fd, "a"))) ::close(fd);
}

void SetLogToStderr(bool enabled) {
  std::lock_guard lock(g_mutex);
  g_stderr = enabled;
}

void SetLogLevel(LogLevel level) {
  std::lock_guard lock(g_mutex);
  g_level = level;
}

void LogLine(LogLevel level, const std::string& message) {
  std::lock_guard lock(g_mutex);
  if (level < g_level) return;
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  struct tm tm;
  localtime_r(&tv.tv_sec, &tm);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
  if (g_file) {
    fprintf(g_file, "%s.%03ld cairn %s: %s\n", stamp, static_cast<long>(tv.tv_usec / 1000), LevelName(level),
            message.c_str());
    fflush(g_file);
  }
  if (g_stderr) fprintf(stderr, "cairn: %s: %s\n", LevelName(level), message.c_str());
}

}  // namespace cairn
