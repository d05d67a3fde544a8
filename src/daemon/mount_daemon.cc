#include "daemon/mount_daemon.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "archive/archive.h"
#include "backend/gated_disk.h"
#include "daemon/control_server.h"
#include "daemon/parity_resync.h"
#include "daemon/reload_on_hangup.h"
#include "fs/filesystem.h"
#include "util/log.h"
#include "util/size.h"

namespace cairn {
namespace {

// Lifts the daemon's soft limit on open files to the hard limit: the default 1024 is
// too few for a daemon that serves every user's files, SQLite and the disks. Returns
// what to log.
std::string RaiseOpenFileLimit() {
  struct rlimit limit;
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return fmt::format("cannot read the limit on open files: {}", std::strerror(errno));
  }
  if (limit.rlim_cur >= limit.rlim_max) return fmt::format("open files: limit {} (the hard limit)", limit.rlim_cur);
  rlim_t soft = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return fmt::format("open files: cannot raise the limit from {} to {}: {}", soft, limit.rlim_max,
                       std::strerror(errno));
  }
  return fmt::format("open files: limit raised from {} to the hard limit {}", soft, limit.rlim_max);
}

// Where the daemon reports how startup went: the parent's pipe, or stderr in foreground.
struct StartupChannel {
  int fd = -1;
  void Send(const std::string& message) {
    if (fd < 0) {
      if (message != "ok") fmt::print(stderr, "cairn: {}\n", message);
      return;
    }
    if (::write(fd, message.data(), message.size()) < 0) {
      // The parent is gone; nothing else can hear us.
    }
    ::close(fd);
    fd = -1;
  }
};

int RunDaemon(const DaemonOptions& options, bool foreground, StartupChannel& channel) {
  // Large buffers (segments, 1 MiB FUSE replies) come and go on many threads; with an
  // arena per thread glibc would keep a copy of the peak in each, and RSS only grows.
  mallopt(M_ARENA_MAX, 2);
  std::string open_file_limit = RaiseOpenFileLimit();
  Archive::OpenOptions open;
  open.overrides = options.overrides;
  open.degraded = options.degraded;
  if (const char* gate = std::getenv("CAIRN_TEST_DISK_GATE")) {  // tests of a slow disk (backend/gated_disk.h)
    open.wrap_disk = [gate = std::string(gate)](std::unique_ptr<Disk> disk, size_t) {
      return GateDiskOnFile(std::move(disk), gate);
    };
  }
  // What opening finds (a journal set aside, a disk missing) belongs in the archive's log too,
  // if this is an archive (never a cairn.log left in some other directory).
  std::error_code unreadable;  // then Open says why
  if (std::filesystem::is_regular_file(options.archive + "/cairn.conf", unreadable)) {
    SetLogFile(options.archive + "/cairn.log", ArchiveOptions{}.log_max_size);
  }
  auto archive = Archive::Open(options.archive, open);
  if (!archive.ok()) {
    channel.Send(archive.status().message());
    return 1;
  }
  SetLogFile((*archive)->dir() + "/cairn.log", (*archive)->options().log_max_size);
  for (const auto& [disk, why] : (*archive)->missing_disks()) {
    LogWarning("disk {} is missing, running degraded (-o degraded): {}", disk, why);
  }
  for (const auto& array : (*archive)->arrays()) {
    if (uint64_t bytes = array->defective_bytes()) {
      LogWarning("lonestar group {}: {} of its disks are not covered by their parity yet (a replaced disk, a lost "
                 "journal, or devices of a cairn from before they were zeroed): a disk lost there loses what it "
                 "holds; the mount re-derives parity in the background, cairn rebuild fills replaced disks",
                 array->name(), FormatSize(bytes));
    }
  }
  Filesystem fs(**archive);
  if (Status st = fs.Recover(); !st.ok()) {
    channel.Send(fmt::format("cannot recover the archive: {}", st.message()));
    return 1;
  }
  ControlServer control(fs);
  std::optional<ReloadOnHangup> reload_on_hangup;
  std::optional<ParityResync> parity_resync;
  auto ready = [&]() -> Status {
    CAIRN_RETURN_IF_ERROR(control.Start());
    CAIRN_RETURN_IF_ERROR(fs.StartBackground());
    parity_resync.emplace(**archive);
    if (!foreground) {
      SetLogToStderr(false);
      int null = ::open("/dev/null", O_RDWR);
      if (null >= 0) {
        ::dup2(null, 0);
        ::dup2(null, 1);
        ::dup2(null, 2);
        if (null > 2) ::close(null);
      }
    }
    LogInfo("{}", open_file_limit);  // after stderr is gone: not worth a line on the terminal
    // After libfuse's signal handlers, whose SIGHUP would unmount.
    reload_on_hangup.emplace(fs);
    channel.Send("ok");
    return Status::OK();
  };
  Status served = ServeFuse(fs, options.settings, ready);
  // The last persist comes next: a second Ctrl-C or SIGTERM (libfuse has put back their
  // default actions) must not kill it, nor a log line to a closed pipe.
  for (int signal : {SIGINT, SIGTERM, SIGPIPE}) ::signal(signal, SIG_IGN);
  parity_resync.reset();
  reload_on_hangup.reset();
  control.Stop();
  Status stopped = fs.Stop();
  ReportSuppressedLogLines();
  if (!served.ok()) {
    channel.Send(served.message());
    LogError("{}", served.message());
    return 1;
  }
  if (!stopped.ok()) {
    LogError("unmounted, but not everything was persisted: {}", stopped.message());
    return 1;
  }
  LogInfo("unmounted {}; all data persisted", (*archive)->dir());
  return 0;
}

}  // namespace

int RunDaemonInForeground(const DaemonOptions& options) {
  StartupChannel channel;
  return RunDaemon(options, true, channel);
}

Status StartDaemon(const DaemonOptions& options) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Status::IOError("cannot create a pipe");
  pid_t pid = ::fork();
  if (pid < 0) return Status::IOError("cannot fork");
  if (pid == 0) {
    ::close(pipe_fds[0]);
    ::setsid();
    if (::chdir("/") != 0) {
      // Paths were resolved before forking; a failed chdir only keeps the old cwd busy.
    }
    StartupChannel channel{pipe_fds[1]};
    const int status = RunDaemon(options, false, channel);
#if defined(__SANITIZE_ADDRESS__)
    __lsan_do_leak_check();  // _exit skips the exit-time leak check of a sanitized build (tests/run)
#endif
    ::_exit(status);
  }
  ::close(pipe_fds[1]);
  std::string message;
  char buffer[1024];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0) message.append(buffer, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  if (message == "ok") return Status::OK();
  ::waitpid(pid, nullptr, 0);
  return Status::IOError(message.empty() ? "the daemon died during startup (see cairn.log)" : message);
}

}  // namespace cairn
