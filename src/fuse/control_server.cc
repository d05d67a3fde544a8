#include "fuse/control_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "archive/repair.h"
#include "util/log.h"

namespace cairn {

Status ControlServer::Start() {
  std::string path = SocketPath(fs_.archive().dir());
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) {
    return Status::InvalidArgument(fmt::format("control socket path {} is too long", path));
  }
  ::unlink(path.c_str());
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return Status::FromErrno("control socket", errno);
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 8) != 0) {
    return Status::FromErrno(fmt::format("control socket {}", path), errno);
  }
  ::chmod(path.c_str(), 0600);
  thread_ = std::thread([this] { Serve(); });
  return Status::OK();
}

void ControlServer::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  for (auto& connection : connections_) connection.thread.join();
  connections_.clear();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(SocketPath(fs_.archive().dir()).c_str());
    listen_fd_ = -1;
  }
}

void ControlServer::Serve() {
  while (!stopping_) {
    pollfd pfd{listen_fd_, POLLIN, 0};
    if (::poll(&pfd, 1, 200) <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (!it->done) {
        ++it;
        continue;
      }
      it->thread.join();
      it = connections_.erase(it);
    }
    Connection& connection = connections_.emplace_back();
    connection.thread = std::thread([this, fd, &connection] {
      Answer(fd);
      connection.done = true;
    });
  }
}

void ControlServer::Answer(int fd) {
  std::string line;
  char c;
  while (line.size() < 16384 && ::read(fd, &c, 1) == 1 && c != '\n') line += c;
  std::vector<std::string> command;
  for (size_t start = 0;;) {
    size_t tab = line.find('\t', start);
    command.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) break;
    start = tab + 1;
  }
  auto send = [fd](const std::string& text) {
    std::string out = text + "\n";
    size_t done = 0;
    while (done < out.size()) {
      ssize_t n = ::send(fd, out.data() + done, out.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  };
  Status st;
  try {
    st = Handle(command, send, fd);
  } catch (const std::exception& e) {
    st = Status::IOError(e.what());
  }
  send(st.ok() ? "ok" : fmt::format("error: {}", st.message()));
  ::close(fd);
}

Status ControlServer::Handle(const std::vector<std::string>& command,
                             const std::function<bool(const std::string&)>& send, int fd) {
  const std::string& verb = command[0];
  if (verb == "persist") return fs_.PersistAll();
  if (verb == "evict") return fs_.EvictAll();
  if (verb == "status") {
    send(fmt::format("pid {}", ::getpid()));
    return Status::OK();
  }
  if (verb == "disk-fail" && command.size() == 2) {
    char* end = nullptr;
    unsigned long disk = std::strtoul(command[1].c_str(), &end, 10);
    if (command[1].empty() || *end != '\0' || disk >= fs_.archive().disk_count()) {
      return Status::InvalidArgument(fmt::format("'{}' is not a disk of this archive", command[1]));
    }
    Status st = fs_.archive().FailDisk(disk);
    if (st.ok()) LogWarning("disk {} taken out of service (cairn disk fail); running degraded", disk);
    return st;
  }
  if (verb == "rules-reload") {
    Status st = fs_.ReloadRules();
    if (!st.ok()) LogError("rules reload refused, the old rules stay in force: {}", st.message());
    return st;
  }
  if (verb == "apply" && command.size() == 2) {
    return fs_.ApplyPolicy(command[1], [&](const Reconciler::Progress& p) {
      return !stopping_ && send(fmt::format("progress {} {} {} {} {} {}", p.files_done, p.files_total, p.bytes_done,
                                            p.bytes_total, p.files_busy, p.files_failed));
    });
  }
  if (verb == "repair" && command.size() == 4) return Repair(command, send, fd);
  if (verb == "dry-run" && command.size() == 3) {
    auto rules = RuleSet::Load(command[1]);
    if (!rules.ok()) return rules.status();
    return fs_.DryRunRules(std::make_shared<const RuleSet>(std::move(*rules)), command[2],
                           [&](const std::string& line) { return send("change " + line); });
  }
  return Status::InvalidArgument(fmt::format("unknown control command '{}'", verb));
}

Status ControlServer::Repair(const std::vector<std::string>& command,
                             const std::function<bool(const std::string&)>& send, int fd) {
  const std::string& what = command[1];
  RepairOptions options;
  options.rebuild = what == "rebuild";
  char* end_budget = nullptr;
  char* end_rate = nullptr;
  options.budget_ns = std::strtoll(command[2].c_str(), &end_budget, 10);
  options.rate = std::strtoull(command[3].c_str(), &end_rate, 10);
  if ((!options.rebuild && what != "scrub") || command[2].empty() || *end_budget || options.budget_ns < 0 ||
      command[3].empty() || *end_rate) {
    return Status::InvalidArgument(fmt::format("repair: bad arguments '{}' '{}' '{}'", what, command[2], command[3]));
  }
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
  LogInfo("{}: {} of {} extents, {} bad chunk(s), {} repaired, {} extent(s) lost{}", what, report->extents_done,
          report->extents_total, report->chunks_bad, report->chunks_repaired, report->extents_lost,
          report->finished ? "" : " (stopped early)");
  if (options.rebuild && report->finished && report->extents_lost == 0) return fs_.archive().FinishRebuild();
  return Status::OK();
}

}  // namespace cairn
