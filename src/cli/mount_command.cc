// cairn mount: validates everything in the foreground, waits for a daemon still persisting
// after its unmount, then serves the mount from a daemon child (daemon/mount_daemon.h). The
// parent exits 0 only once the mount is live; otherwise it prints the child's reason and exits 1.
#include <signal.h>
#include <sys/stat.h>
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

#include "archive/archive.h"
#include "archive/archive_lock.h"
#include "archive/config.h"
#include "cli/commands.h"
#include "daemon/mount_daemon.h"
#include "util/cairn_mounts.h"

namespace cairn {
namespace {

// fstab words that mean nothing to cairn; mount(8) may pass them through.
const std::set<std::string> kIgnoredOptions = {"defaults", "rw", "auto", "noauto", "user", "nouser", "users",
                                               "nofail", "_netdev", "dev", "nodev", "suid", "nosuid", "exec",
                                               "noexec", "relatime", "noatime", "atime", "strictatime", "async"};
const std::set<std::string> kFuseFlags = {"allow_other", "allow_root", "ro", "sync", "dirsync"};

struct MountRequest {
  DaemonOptions daemon;
  bool foreground = false;
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
  std::string who = ArchiveLock::HolderName(holder);
  if (auto target = MountpointOf(archive)) {
    return Status::Busy(fmt::format("archive {} is mounted at {} ({}); unmount it first", archive, *target, who));
  }
  if (seconds == 0) {
    return Status::Busy(fmt::format("archive {} is in use by another cairn process ({}); --wait SECONDS waits for "
                                    "it",
                                    archive, who));
  }
  struct sigaction interrupt {}, previous {};
  interrupt.sa_handler = [](int) { g_interrupted = 1; };
  ::sigaction(SIGINT, &interrupt, &previous);  // no SA_RESTART: the sleep below ends early
  Tell(fmt::format("waiting up to {} s for {} to finish persisting and release {} (Ctrl-C to give up)", seconds, who,
                   archive));
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
      request.daemon.degraded = true;
      continue;
    }
    size_t eq = option.find('=');
    if (eq == std::string::npos) {
      if (!kFuseFlags.contains(option)) {
        return Status::InvalidArgument(fmt::format("unknown mount option '{}' (see cairn(8), MOUNT OPTIONS)", option));
      }
      request.daemon.settings.fuse_options.push_back(option);
    } else {
      // Checked here (a usage error, exit 2) as the daemon will apply it, over cairn.conf.
      ArchiveOptions scratch;
      if (Status st = ApplyOption(scratch, option.substr(0, eq), option.substr(eq + 1)); !st.ok()) {
        return Status::InvalidArgument(fmt::format("mount option: {}", st.message()));
      }
      request.daemon.overrides.emplace_back(option.substr(0, eq), option.substr(eq + 1));
    }
  }
  return Status::OK();
}

}  // namespace

int CmdMount(const Args& args) {
  MountRequest request;
  std::vector<std::string> positional;
  std::set<std::string> seen;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "--wait" && !FirstTime(seen, a)) return Fail(2, GivenTwice(a));
    if (a == "-f" || a == "--foreground") {
      request.foreground = true;
    } else if (a == "-d" || a == "--debug") {
      request.foreground = true;
      request.daemon.settings.debug = true;
    } else if (a == "-s" || a == "--single-thread") {
      request.daemon.settings.single_thread = true;
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
    } else if (a == "-o" || a == "--wait") {
      return Fail(2, fmt::format("{} needs a value\n{}", a, kUsage));
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
  request.daemon.archive = positional[0];
  request.daemon.settings.mountpoint = positional[1];
  for (const auto& [source, target] : CairnMounts()) {  // a mount over it would hide it, its daemon running on
    if (target == positional[1]) {
      return Fail(1, fmt::format("{} is already the mount point of archive {}; unmount it first", target, source));
    }
  }
  std::vector<std::string>& fuse_options = request.daemon.settings.fuse_options;
  if (::getuid() == 0 && std::find(fuse_options.begin(), fuse_options.end(), "allow_other") == fuse_options.end()) {
    fuse_options.push_back("allow_other");  // an archive is shared by its users
  }
  if (Status st = WaitForArchive(request.daemon.archive, request.wait_seconds); !st.ok()) {
    return Fail(g_interrupted ? 130 : 1, st.message());
  }
  if (request.foreground) return RunDaemonInForeground(request.daemon);
  Status started = StartDaemon(request.daemon);
  return started.ok() ? 0 : Fail(1, started.message());
}

}  // namespace cairn
