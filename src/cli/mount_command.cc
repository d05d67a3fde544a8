// cairn mount: validates everything in the foreground, waits for a daemon still persisting
// after its unmount, then serves the mount from a daemon child. The parent exits 0 only
// once the mount is live; otherwise it prints the child's reason and exits 1.
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <charconv>
#include <chrono>
#include <set>
#include <thread>

#include <fmt/format.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "archive/archive.h"
#include "archive/filesystem.h"
#include "backend/gated_disk.h"
#include "cli/commands.h"
#include "fuse/control_server.h"
#include "fuse/fuse_ops.h"
#include "util/log.h"

namespace cairn {
namespace {

// fstab words that mean nothing to cairn; mount(8) may pass them through.
const std::set<std::string> kIgnoredOptions = {"defaults", "rw", "auto", "noauto", "user", "nouser", "users",
                                               "nofail", "_netdev", "dev", "nodev", "suid", "nosuid", "exec",
                                               "noexec", "relatime", "noatime", "atime", "strictatime", "async"};
const std::set<std::string> kFuseFlags = {"allow_other", "allow_root", "ro", "sync", "dirsync"};

struct MountRequest {
  std::string archive;
  MountSettings settings;
  bool foreground = false;
  bool degraded = false;  // -o degraded: mount even with disks missing
  std::vector<std::pair<std::string, std::string>> overrides;
  int wait_seconds = 300;  // --wait: for a daemon still persisting after its unmount
};

constexpr const char* kUsage =
    "usage: cairn mount ARCHIVE MOUNTPOINT [-f] [-d] [-s] [--wait SECONDS] [-o OPTIONS]";

volatile sig_atomic_t g_interrupted = 0;

// While another cairn process holds the archive but does not serve a mount of it (a daemon
// persisting what is left after fusermount3 -u, or fsck), waits up to `seconds` for it to
// let go, saying so once. Ctrl-C stops the wait: Busy "interrupted".
Status WaitForArchive(const std::string& archive, int seconds) {
  int holder = Archive::LockHolder(archive);
  if (holder == 0) return Status::OK();
  std::string who = holder > 0 ? fmt::format("pid {}", holder) : "another cairn process";
  for (const auto& [source, target] : CairnMounts()) {
    if (source == archive) {
      return Status::Busy(fmt::format("archive {} is mounted at {} ({}); unmount it first", archive, target, who));
    }
  }
  if (seconds == 0) {
    return Status::Busy(fmt::format("archive {} is in use by another cairn process ({}); --wait SECONDS waits for "
                                    "it",
                                    archive, who));
  }
  struct sigaction interrupt {}, previous {};
  interrupt.sa_handler = [](int) { g_interrupted = 1; };
  ::sigaction(SIGINT, &interrupt, &previous);  // no SA_RESTART: the sleep below ends early
  fmt::print(stderr, "cairn: waiting up to {} s for {} to finish persisting and release {} (Ctrl-C to give up)\n",
             seconds, who, archive);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  Status result;
  while ((holder = Archive::LockHolder(archive)) != 0) {
    if (g_interrupted) {
      result = Status::Busy(fmt::format("interrupted while waiting for {}; {} is not mounted", who, archive));
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      result = Status::Busy(fmt::format("{} still holds {} after {} s; not mounted (--wait SECONDS waits longer)",
                                        who, archive, seconds));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::sigaction(SIGINT, &previous, nullptr);
  return result;
}

Status ParseOptions(const std::string& list, MountRequest& request) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string option = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? list.size() + 1 : comma + 1;
    if (option.empty() || kIgnoredOptions.contains(option)) continue;
    if (option == "degraded") {
      request.degraded = true;
      continue;
    }
    size_t eq = option.find('=');
    if (eq == std::string::npos) {
      if (!kFuseFlags.contains(option)) {
        return Status::InvalidArgument(fmt::format("unknown mount option '{}' (see cairn(8), MOUNT OPTIONS)", option));
      }
      request.settings.fuse_options.push_back(option);
    } else {
      request.overrides.emplace_back(option.substr(0, eq), option.substr(eq + 1));
    }
  }
  return Status::OK();
}

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

int RunDaemon(const MountRequest& request, StartupChannel& channel) {
  // Large buffers (segments, 1 MiB FUSE replies) come and go on many threads; with an
  // arena per thread glibc would keep a copy of the peak in each, and RSS only grows.
  mallopt(M_ARENA_MAX, 2);
  std::string open_file_limit = RaiseOpenFileLimit();
  Archive::OpenOptions open;
  open.overrides = request.overrides;
  open.degraded = request.degraded;
  if (const char* gate = std::getenv("CAIRN_TEST_DISK_GATE")) {  // tests of a slow disk (backend/gated_disk.h)
    open.wrap_disk = [gate = std::string(gate)](std::unique_ptr<Disk> disk, size_t) {
      return GateDiskOnFile(std::move(disk), gate);
    };
  }
  auto archive = Archive::Open(request.archive, open);
  if (!archive.ok()) {
    channel.Send(archive.status().message());
    return 1;
  }
  SetLogFile((*archive)->dir() + "/cairn.log", (*archive)->options().log_max_size);
  for (const auto& [disk, why] : (*archive)->missing_disks()) {
    LogWarning("disk {} is missing, running degraded (-o degraded): {}", disk, why);
  }
  Filesystem fs(**archive);
  if (Status st = fs.Recover(); !st.ok()) {
    channel.Send(fmt::format("cannot recover the archive: {}", st.message()));
    return 1;
  }
  ControlServer control(fs);
  auto ready = [&]() -> Status {
    CAIRN_RETURN_IF_ERROR(control.Start());
    CAIRN_RETURN_IF_ERROR(fs.StartBackground());
    if (!request.foreground) {
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
    channel.Send("ok");
    return Status::OK();
  };
  Status served = ServeFuse(fs, request.settings, ready);
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

int CmdMount(const Args& args) {
  MountRequest request;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "-f" || a == "--foreground") {
      request.foreground = true;
    } else if (a == "-d" || a == "--debug") {
      request.foreground = true;
      request.settings.debug = true;
    } else if (a == "-s" || a == "--single-thread") {
      request.settings.single_thread = true;
    } else if (a == "-o" && i + 1 < args.size()) {
      if (Status st = ParseOptions(args[++i], request); !st.ok()) return Fail(2, st.message());
    } else if (a.starts_with("-o") && a.size() > 2) {
      if (Status st = ParseOptions(a.substr(2), request); !st.ok()) return Fail(2, st.message());
    } else if (a == "--wait" && i + 1 < args.size()) {
      const std::string& text = args[++i];
      auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), request.wait_seconds);
      if (text.empty() || error != std::errc() || end != text.data() + text.size() || request.wait_seconds < 0 ||
          request.wait_seconds > 86400) {
        return Fail(2, fmt::format("--wait {:?}: expected whole seconds from 0 to 86400", text));
      }
    } else if (a.starts_with("-")) {
      return Fail(2, fmt::format("unknown flag '{}'\n{}", a, kUsage));
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2) return Fail(2, kUsage);
  struct stat st;
  if (::stat(positional[1].c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Fail(1, fmt::format("mount point {} is not a directory", positional[1]));
  }
  // The daemon runs in "/", so both paths must be absolute.
  for (size_t i = 0; i < 2; i++) {
    char* real = ::realpath(positional[i].c_str(), nullptr);
    if (!real) return Fail(1, fmt::format("{}: {}", positional[i], std::strerror(errno)));
    positional[i] = real;
    free(real);
  }
  request.archive = positional[0];
  request.settings.mountpoint = positional[1];
  if (::getuid() == 0 && std::find(request.settings.fuse_options.begin(), request.settings.fuse_options.end(),
                                   "allow_other") == request.settings.fuse_options.end()) {
    request.settings.fuse_options.push_back("allow_other");  // an archive is shared by its users
  }
  if (Status st = WaitForArchive(request.archive, request.wait_seconds); !st.ok()) {
    return Fail(g_interrupted ? 130 : 1, st.message());
  }
  StartupChannel channel;
  if (request.foreground) return RunDaemon(request, channel);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Fail(1, "cannot create a pipe");
  pid_t pid = ::fork();
  if (pid < 0) return Fail(1, "cannot fork");
  if (pid == 0) {
    ::close(pipe_fds[0]);
    ::setsid();
    if (::chdir("/") != 0) {
      // Paths were resolved before forking; a failed chdir only keeps the old cwd busy.
    }
    channel.fd = pipe_fds[1];
    const int status = RunDaemon(request, channel);
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
  if (message == "ok") return 0;
  ::waitpid(pid, nullptr, 0);
  return Fail(1, message.empty() ? "the daemon died during startup (see cairn.log)" : message);
}

}  // namespace cairn
