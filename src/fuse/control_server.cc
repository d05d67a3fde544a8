#include "fuse/control_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

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
    std::string command;
    char c;
    while (command.size() < 256 && ::read(fd, &c, 1) == 1 && c != '\n') command += c;
    std::string reply;
    try {
      reply = Handle(command);
    } catch (const std::exception& e) {
      reply = fmt::format("error: {}\n", e.what());
    }
    size_t done = 0;
    while (done < reply.size()) {
      ssize_t n = ::write(fd, reply.data() + done, reply.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
}

std::string ControlServer::Handle(const std::string& command) {
  auto finish = [](const Status& st) { return st.ok() ? std::string("ok\n") : fmt::format("error: {}\n", st.ToString()); };
  if (command == "persist") return finish(fs_.PersistAll());
  if (command == "evict") return finish(fs_.EvictAll());
  if (command == "status") return fmt::format("pid {}\nok\n", ::getpid());
  return fmt::format("error: unknown control command '{}'\n", command);
}

}  // namespace cairn
