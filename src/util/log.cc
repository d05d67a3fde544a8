#include "util/log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <mutex>

#include "util/log_rate_limiter.h"

namespace cairn {
namespace {

std::mutex g_mutex;
FILE* g_file = nullptr;
std::string g_path;
uint64_t g_max_bytes = kDefaultLogMaxBytes;
uint64_t g_bytes = 0;  // size of g_file
bool g_stderr = true;
LogLevel g_level = LogLevel::kInfo;
LogRateLimiter g_limiter(kLogBurst, kLogWindow);

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "?";
}

// REQUIRES: g_mutex.
void OpenLogFile() {
  if (g_file) fclose(g_file);
  g_file = nullptr;
  g_bytes = 0;
  if (g_path.empty()) return;
  // Private (0600) whatever the umask: the log names files and users. It belongs to the
  // owner of its directory (the archive's owner), also when a root daemon makes it anew after
  // a rotation; a file with other names is not written (it could be anyone's).
  int fd = ::open(g_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  struct stat file {}, dir {};
  std::string dir_path = g_path.substr(0, g_path.rfind('/') + 1) + ".";
  bool usable = ::fstat(fd, &file) == 0 && file.st_nlink <= 1 && ::stat(dir_path.c_str(), &dir) == 0;
  if (usable && ::geteuid() == 0 && file.st_uid != dir.st_uid) usable = ::fchown(fd, dir.st_uid, dir.st_gid) == 0;
  if (!usable) {
    ::close(fd);
    return;
  }
  g_file = fdopen(fd, "a");
  if (!g_file) {
    ::close(fd);
    return;
  }
  off_t size = ::lseek(fd, 0, SEEK_END);
  g_bytes = size > 0 ? static_cast<uint64_t>(size) : 0;
}

// REQUIRES: g_mutex.
void WriteLine(LogLevel level, const std::string& message) {
  std::string text = Escaped(Abbreviated(message, kMaxLogMessage));
  if (g_file) {
    struct timeval tv;
    gettimeofday(&tv, nullptr);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
    std::string line = fmt::format("{}.{:03} cairn {}: {}\n", stamp, tv.tv_usec / 1000, LevelName(level), text);
    if (g_bytes > 0 && g_bytes + line.size() > g_max_bytes) {
      std::string old = g_path + ".1";
      if (::rename(g_path.c_str(), old.c_str()) == 0) OpenLogFile();
    }
    if (g_file) {
      fwrite(line.data(), 1, line.size(), g_file);
      fflush(g_file);
      g_bytes += line.size();
    }
  }
  if (g_stderr) fprintf(stderr, "cairn: %s: %s\n", LevelName(level), text.c_str());
}

// REQUIRES: g_mutex.
void WriteSuppressed(const std::vector<LogRateLimiter::Suppressed>& reports) {
  for (const auto& report : reports) {
    WriteLine(LogLevel::kWarning, fmt::format("{} more message(s) like \"{}\" suppressed (at most {} per {} s)",
                                              report.count, report.site, kLogBurst, kLogWindow.count()));
  }
}

}  // namespace

void SetLogFile(const std::string& path, uint64_t max_bytes) {
  std::lock_guard lock(g_mutex);
  g_path = path;
  g_max_bytes = max_bytes;
  OpenLogFile();
}

void SetLogToStderr(bool enabled) {
  std::lock_guard lock(g_mutex);
  g_stderr = enabled;
}

void SetLogLevel(LogLevel level) {
  std::lock_guard lock(g_mutex);
  g_level = level;
}

void LogLine(LogLevel level, std::string_view site, const std::string& message) {
  std::lock_guard lock(g_mutex);
  if (level < g_level) return;
  std::vector<LogRateLimiter::Suppressed> reports;
  bool admitted = g_limiter.Admit(site, LogRateLimiter::Clock::now(), &reports);
  WriteSuppressed(reports);
  if (admitted) WriteLine(level, message);
}

void ReportSuppressedLogLines() {
  std::lock_guard lock(g_mutex);
  WriteSuppressed(g_limiter.TakeAll());
}

}  // namespace cairn
