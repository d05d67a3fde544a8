#include "daemon/control_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "maintenance/repair.h"
#include "util/log.h"

namespace cairn {
namespace {

// A listening socket at `path`, mode 0600 and owned by uid:gid before it is reachable:
// bound in a fresh 0700 directory next to `path`, set up there, then renamed into place,
// so neither the umask nor a connect racing the setup can get at it. The archive's owner
// may rename that directory under us, so every step goes through a descriptor of it
// (binding by /proc/self/fd/N/s), never through its name: no step can be sent to a
// symlink the owner put in its place.
Result<int> ListenPrivately(const std::string& path, uid_t uid, gid_t gid) {
  std::string dir = path.substr(0, path.rfind('/')) + "/.ctl.XXXXXX";
  if (!::mkdtemp(dir.data())) return Status::FromErrno(fmt::format("cannot create {}", dir), errno);
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat dir_stat {};
  if (dir_fd < 0 || ::fstat(dir_fd, &dir_stat) != 0 || dir_stat.st_uid != ::geteuid() ||
      (dir_stat.st_mode & 07777) != 0700) {
    int err = dir_fd < 0 ? errno : EPERM;
    if (dir_fd >= 0) ::close(dir_fd);
    return Status::FromErrno(fmt::format("control socket: {} was replaced while being set up", dir), err);
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  fmt::format_to_n(addr.sun_path, sizeof addr.sun_path - 1, "/proc/self/fd/{}/s", dir_fd);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  Status st = fd < 0 ? Status::FromErrno("control socket", errno) : Status::OK();
  auto step = [&](bool ok, std::string_view what) {
    if (st.ok() && !ok) st = Status::FromErrno(fmt::format("control socket {}: {}", path, what), errno);
  };
  if (st.ok()) step(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0, "bind");
  if (st.ok()) step(::fchmodat(dir_fd, "s", 0600, 0) == 0, "chmod");
  if (st.ok() && ::geteuid() == 0) step(::fchownat(dir_fd, "s", uid, gid, AT_SYMLINK_NOFOLLOW) == 0, "chown");
  if (st.ok()) step(::listen(fd, 16) == 0, "listen");
  if (st.ok()) step(::renameat(dir_fd, "s", AT_FDCWD, path.c_str()) == 0, "rename into place");
  if (!st.ok()) ::unlinkat(dir_fd, "s", 0);
  ::close(dir_fd);
  if (::rmdir(dir.c_str()) != 0 && st.ok()) step(false, fmt::format("remove {}", dir));
  if (!st.ok()) {
    if (fd >= 0) ::close(fd);
    return st;
  }
  return fd;
}

}  // namespace

Status ControlServer::Start() {
  const std::string& dir = fs_.archive().dir();
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno(fmt::format("archive {}", dir), errno);
  owner_uid_ = st.st_uid;
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) return Status::FromErrno("control socket: eventfd", errno);
  auto fd = ListenPrivately(SocketPath(dir), st.st_uid, st.st_gid);
  if (!fd.ok()) return fd.status();
  listen_fd_ = *fd;
  thread_ = std::thread([this] { Serve(); });
  return Status::OK();
}

void ControlServer::Stop() {
  stopping_ = true;
  if (stop_fd_ >= 0) {
    uint64_t one = 1;
    if (::write(stop_fd_, &one, sizeof one) != sizeof one) {
      // Only an overflowing counter fails, and then the eventfd is readable already.
    }
  }
  if (thread_.joinable()) thread_.join();
  // Each client thread wakes from its poll now; what it runs checks stopping_ or is bounded.
  for (auto& connection : connections_) connection.thread.join();
  connections_.clear();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(SocketPath(fs_.archive().dir()).c_str());
    listen_fd_ = -1;
  }
  if (stop_fd_ >= 0) ::close(stop_fd_);
  stop_fd_ = -1;
}

void ControlServer::Serve() {
  while (!stopping_) {
    if (!Wait(listen_fd_, POLLIN, Clock::time_point::max()).ok()) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    size_t busy = 0;
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (!it->done) {
        ++it;
        busy++;
        continue;
      }
      it->thread.join();
      it = connections_.erase(it);
    }
    ucred peer{};
    socklen_t length = sizeof peer;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) {
      LogError("control socket: cannot tell who connected: {}", std::strerror(errno));
      ::close(fd);
      continue;
    }
    if (busy >= kMaxClients) {
      SendLine(fd, fmt::format("error: the daemon is answering {} control requests already; try again", busy));
      Close(fd, Clock::now());
      continue;
    }
    Connection& connection = connections_.emplace_back();
    connection.thread = std::thread([this, fd, uid = peer.uid, &connection] {
      Answer(fd, uid);
      connection.done = true;
    });
  }
}

bool ControlServer::Allowed(uid_t uid) const { return uid == 0 || uid == owner_uid_ || uid == ::geteuid(); }

Status ControlServer::Wait(int fd, short events, Clock::time_point deadline) const {
  for (;;) {
    int timeout_ms = -1;
    if (deadline != Clock::time_point::max()) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 60000));
    }
    pollfd fds[2] = {{fd, events, 0}, {stop_fd_, POLLIN, 0}};
    int n = ::poll(fds, 2, timeout_ms);
    if (n < 0 && errno != EINTR) return Status::FromErrno("control socket: poll", errno);
    if (stopping_ || (n > 0 && fds[1].revents)) return Status::Busy("the daemon is shutting down");
    if (n > 0 && fds[0].revents) return Status::OK();
    if (timeout_ms == 0) return Status::IOError("timed out");
  }
}

Result<std::string> ControlServer::ReadRequest(int fd) const {
  Clock::time_point deadline = Clock::now() + kRequestTimeout;
  std::string message;
  char buffer[65536];
  while (message.find('\n') == std::string::npos) {
    if (message.size() > kMaxControlRequestBytes) {
      return Status::InvalidArgument(fmt::format("request longer than {} bytes", kMaxControlRequestBytes));
    }
    Status st = Wait(fd, POLLIN, deadline);
    if (!st.ok()) {
      return st.code() == Status::Code::kBusy
                 ? st
                 : Status::InvalidArgument(fmt::format("no complete request within {} s", kRequestTimeout.count()));
    }
    ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return Status::FromErrno("control socket: recv", errno);
    if (n == 0) return Status::InvalidArgument("the client closed the connection before its request was complete");
    message.append(buffer, static_cast<size_t>(n));
  }
  return message;
}

bool ControlServer::SendLine(int fd, const std::string& text) const {
  std::string out = text + "\n";
  Clock::time_point deadline = Clock::now() + kReplyTimeout;
  for (size_t done = 0; done < out.size();) {
    ssize_t n = ::send(fd, out.data() + done, out.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR && errno != EAGAIN) {
      return false;  // the client is gone
    } else if (n < 0 && errno == EAGAIN && !Wait(fd, POLLOUT, deadline).ok()) {
      return false;  // it stopped reading, or the daemon stops
    }
  }
  return true;
}

void ControlServer::Answer(int fd, uid_t peer_uid) {
  Status st;
  if (!Allowed(peer_uid)) {
    st = Status::Permission(fmt::format("permission denied: the daemon of {} takes requests only from root and the "
                                        "archive's owner (uid {}), not from uid {}",
                                        fs_.archive().dir(), owner_uid_, peer_uid));
    LogWarning("control socket: refused a connection from uid {}", peer_uid);
  }
  auto message = st.ok() ? ReadRequest(fd) : Result<std::string>(st);
  auto request = message.ok() ? ParseControlRequest(*message) : Result<ControlRequest>(message.status());
  st = request.status();
  if (st.ok() && request->verb == ControlVerb::kKeys && request->key_action != "count" && peer_uid != 0) {
    // Re-wrapping and erasing keys is root's: the keystore is root's.
    st = Status::Permission(fmt::format("cairn key {} is for root only, not uid {}", request->key_action, peer_uid));
  }
  if (st.ok()) {
    try {
      st = Handle(*request, [this, fd](const std::string& line) { return !stopping_ && SendLine(fd, line); }, fd);
    } catch (const std::exception& e) {
      st = Status::IOError(e.what());
    }
  }
  SendLine(fd, st.ok() ? "ok" : fmt::format("error: {}", st.message()));
  Close(fd, Clock::now() + std::chrono::seconds(1));
}

void ControlServer::Close(int fd, Clock::time_point deadline) const {
  ::shutdown(fd, SHUT_WR);
  char buffer[4096];
  while (Wait(fd, POLLIN, deadline).ok() && ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT) > 0) {
  }
  ::close(fd);
}

Status ControlServer::Handle(const ControlRequest& request, const SendFn& send, int fd) {
  switch (request.verb) {
    case ControlVerb::kPersist: return fs_.PersistAll();
    case ControlVerb::kEvict: return fs_.EvictAll();
    case ControlVerb::kStatus:
      send(fmt::format("pid {}", ::getpid()));
      send(fmt::format("cache_size {}", fs_.archive().options().cache_size));  // with the mount's -o
      return Status::OK();
    case ControlVerb::kDiskFail: {
      if (request.disk >= fs_.archive().disk_count()) {
        return Status::InvalidArgument(fmt::format("'{}' is not a disk of this archive (0..{})", request.disk,
                                                   fs_.archive().disk_count() - 1));
      }
      Status st = fs_.archive().FailDisk(request.disk);
      if (st.ok()) LogWarning("disk {} taken out of service (cairn disk fail); running degraded", request.disk);
      return st;
    }
    case ControlVerb::kRulesReload: {
      Status st = fs_.ReloadRules();
      if (!st.ok()) LogError("rules reload refused, the old rules stay in force: {}", st.message());
      return st;
    }
    case ControlVerb::kApply:
      return fs_.ApplyPolicy(request.path, [&](const Reconciler::Progress& p) {
        return send(fmt::format("progress {} {} {} {} {} {} {}", p.files_done, p.files_total, p.bytes_done,
                                p.bytes_total, p.files_busy, p.files_failed, p.files_in_policy));
      });
    case ControlVerb::kDryRun: {
      // The client read the rules file with its own rights; the daemon opens no path it names.
      auto rules = RuleSet::Parse(request.rules_text, request.rules_name);
      if (!rules.ok()) return rules.status();
      return fs_.DryRunRules(std::make_shared<const RuleSet>(std::move(*rules)), request.path,
                             [&](const std::string& line) { return send("change " + line); });
    }
    case ControlVerb::kRepair: return Repair(request, send, fd);
    case ControlVerb::kKeys: {
      if (request.key_action == "attributes") {  // where user.cairn.key or trusted.cairn.key names it
        auto named = fs_.AttributesNamingKey(request.key_name, kNamedKeyAttributesShown + 1);
        if (!named.ok()) return named.status();
        for (const std::string& line : *named) send("named " + line);
        return Status::OK();
      }
      auto files = fs_.ChangeFileKeys(request.key_action, request.key_name);
      if (!files.ok()) return files.status();
      if (request.key_action != "count") {
        LogInfo("cairn key: {} of the {} file key(s) under key {}", request.key_action, *files, request.key_name);
      }
      send(fmt::format("files {}", *files));
      return Status::OK();
    }
  }
  return Status::InvalidArgument("unknown control request");
}

Status ControlServer::Repair(const ControlRequest& request, const SendFn& send, int fd) {
  const char* what = request.rebuild ? "rebuild" : "scrub";
  RepairOptions options;
  options.rebuild = request.rebuild;
  options.budget_ns = request.budget_ns;
  options.rate = request.rate;
  std::unique_lock lock(repair_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return Status::Busy("a rebuild or scrub is already running on this archive");
  options.progress = [&](const RepairReport& r) { return send(RepairReportLine(r)); };
  options.should_stop = [&] {
    pollfd p{fd, POLLRDHUP, 0};  // the client hung up (Ctrl-C)
    return stopping_.load() || (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)));
  };
  LogInfo("cairn {}: started on the mounted archive", what);
  auto report = RepairArchive(fs_.archive(), options);
  if (!report.ok()) {
    LogError("{} stopped: {}", what, report.status().message());
    return report.status();
  }
  for (const auto& problem : report->problems) {
    LogError("{}: {}", what, problem);
    send("problem " + problem);
  }
  send(RepairReportLine(*report));
  LogInfo("{}", RepairSummary(*report, options.rebuild));
  // What is lost elsewhere (a missing disk's raid=none extent) does not keep the replaced disks waiting.
  if (options.rebuild && report->finished && report->replaced_extents_lost == 0) return fs_.archive().FinishRebuild();
  return Status::OK();
}

}  // namespace cairn
