// ControlServer answers the CLI's requests to a running daemon over the unix socket
// ARCHIVE/control.sock: "persist", "evict" and "status", one per connection.
#pragma once

#include <atomic>
#include <string>
#include <thread>

#include "archive/filesystem.h"

namespace cairn {

class ControlServer {
 public:
  explicit ControlServer(Filesystem& fs) : fs_(fs) {}
  ~ControlServer() { Stop(); }

  Status Start();
  void Stop();

  static std::string SocketPath(const std::string& archive_dir) { return archive_dir + "/control.sock"; }

 private:
  void Serve();
  std::string Handle(const std::string& command);

  Filesystem& fs_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace cairn
