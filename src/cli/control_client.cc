#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "archive/archive.h"
#include "archive/archive_lock.h"
#include "archive/private_files.h"
#include "cli/commands.h"
#include "daemon/control_server.h"
#include "util/cairn_mounts.h"

namespace cairn {

Status ExchangeControl(const std::string& archive_dir, const ControlRequest& request, std::string* reply_out,
                       const std::function<void(const std::string&)>& on_line) {
  char* real = ::realpath(archive_dir.c_str(), nullptr);
  if (!real) return Status::IOError(fmt::format("{}: {}", archive_dir, std::strerror(errno)));
  std::string dir = real;
  free(real);
  CAIRN_RETURN_IF_ERROR(CheckArchiveAccess(dir));
  if (Archive::LockHolder(dir) == 0) return Status::IOError(fmt::format("{} is not mounted", dir));
  std::string path = ControlServer::SocketPath(dir);
  // Through a descriptor of the archive directory: a socket path is at most 107 bytes, and
  // one cut short would reach another socket (in a parent directory, say).
  int dir_fd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return Status::IOError(fmt::format("{}: {}", dir, std::strerror(errno)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  fmt::format_to_n(addr.sun_path, sizeof addr.sun_path - 1, "/proc/self/fd/{}/{}", dir_fd,
                   path.substr(path.rfind('/') + 1));
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int connected = fd < 0 ? -1 : ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int err = errno;
  ::close(dir_fd);
  if (connected != 0) {
    if (fd >= 0) ::close(fd);
    if (err == EACCES) {
      return Status::IOError(
          fmt::format("permission denied: the daemon of {} takes requests only from root and the archive's owner", dir));
    }
    if (err == ENOENT || err == ECONNREFUSED) {  // no daemon listens: which is it?
      if (auto target = MountpointOf(dir)) {
        return Status::IOError(fmt::format("the daemon of {} mounted at {} does not answer at {}: {} (starting or "
                                           "stopping?)",
                                           dir, *target, path, std::strerror(err)));
      }
      int holder = Archive::LockHolder(dir);
      if (holder == 0) return Status::IOError(fmt::format("{} is not mounted", dir));
      return Status::Busy(fmt::format("{} is in use by another cairn process ({}) that is not a mounted daemon (a "
                                      "command that works offline, or a mount starting or stopping); try again "
                                      "when it is done",
                                      dir, ArchiveLock::HolderName(holder)));
    }
    return Status::IOError(fmt::format("cannot reach the daemon at {}: {}", path, std::strerror(err)));
  }
  std::string message = SerializeControlRequest(request);
  for (size_t done = 0; done < message.size();) {
    ssize_t n = ::send(fd, message.data() + done, message.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the daemon refused early: its reply says why
    done += static_cast<size_t>(n);
  }
  std::string pending;
  std::string last;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) {
    pending.append(buffer, static_cast<size_t>(n));
    for (size_t eol; (eol = pending.find('\n')) != std::string::npos; pending.erase(0, eol + 1)) {
      last = pending.substr(0, eol);
      if (last == "ok" || last.starts_with("error: ")) continue;
      if (on_line) on_line(last);
      if (reply_out) *reply_out += last + "\n";
    }
  }
  ::close(fd);
  if (last == "ok") return Status::OK();
  if (last.starts_with("error: ")) return Status::IOError(last.substr(7));
  return Status::IOError("the daemon closed the connection without answering");
}

int SendControl(const std::string& archive_dir, const ControlRequest& request, std::string* reply,
                const std::function<void(const std::string&)>& on_line) {
  Status st = ExchangeControl(archive_dir, request, reply, on_line);
  return st.ok() ? 0 : Fail(1, st.message());
}

Result<MountedPath> LocateInMount(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return Status::FromErrno(path, errno);
  std::string full = real;
  free(real);
  MountedPath found;
  for (const auto& [source, target] : CairnMounts()) {
    if (target.size() < found.mountpoint.size()) continue;
    bool inside = full == target || (full.starts_with(target) && (target == "/" || full[target.size()] == '/'));
    if (!inside) continue;
    found.archive = source;
    found.mountpoint = target;
    found.inside = full == target ? "/" : full.substr(target == "/" ? 0 : target.size());
  }
  if (found.archive.empty()) return Status::NotFound(fmt::format("{} is not inside a mounted cairn archive", path));
  return found;
}

int CmdPersist(const Args& args) {
  if (args.size() != 1) return Fail(2, "usage: cairn persist ARCHIVE|MOUNTPOINT");
  auto dir = ArchiveDir(args[0]);
  if (!dir.ok()) return Fail(1, dir.status().message());
  return SendControl(*dir, ControlRequest{.verb = ControlVerb::kPersist});
}

int CmdEvict(const Args& args) {
  if (args.size() != 1) return Fail(2, "usage: cairn evict ARCHIVE|MOUNTPOINT");
  auto dir = ArchiveDir(args[0]);
  if (!dir.ok()) return Fail(1, dir.status().message());
  return SendControl(*dir, ControlRequest{.verb = ControlVerb::kEvict});
}

}  // namespace cairn
