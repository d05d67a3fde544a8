#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "archive/archive.h"
#include "cli/commands.h"
#include "fuse/control_server.h"

namespace cairn {

int SendControl(const std::string& archive_dir, const std::string& command, std::string* reply_out) {
  char* real = ::realpath(archive_dir.c_str(), nullptr);
  if (!real) return Fail(1, fmt::format("{}: {}", archive_dir, std::strerror(errno)));
  std::string dir = real;
  free(real);
  if (Archive::LockHolder(dir) == 0) return Fail(1, fmt::format("{} is not mounted", dir));
  std::string path = ControlServer::SocketPath(dir);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    if (fd >= 0) ::close(fd);
    return Fail(1, fmt::format("cannot reach the daemon at {}: {}", path, std::strerror(err)));
  }
  std::string line = command + "\n";
  if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    ::close(fd);
    return Fail(1, "cannot send to the daemon");
  }
  std::string reply;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) reply.append(buffer, static_cast<size_t>(n));
  ::close(fd);
  if (reply_out) *reply_out = reply;
  if (reply.ends_with("ok\n")) return 0;
  return Fail(1, reply.empty() ? "the daemon closed the connection without answering" : reply.substr(0, reply.size() - 1));
}

int CmdPersist(const Args& args) {
  if (args.size() != 1) return Fail(2, "usage: cairn persist ARCHIVE");
  return SendControl(args[0], "persist");
}

int CmdEvict(const Args& args) {
  if (args.size() != 1) return Fail(2, "usage: cairn evict ARCHIVE");
  return SendControl(args[0], "evict");
}

}  // namespace cairn
