// ControlServer answers the CLI's requests to a running daemon over the unix socket
// ARCHIVE/control.sock, one command line per connection, fields separated by tabs:
// persist, evict, status, rules-reload, apply PATH, dry-run RULES PATH, disk-fail N,
// repair rebuild|scrub BUDGET_NS RATE. Replies are lines; the last is "ok" or "error: ...".
// Each connection gets its own thread.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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
  // Answers one connection: reads the command, writes the reply lines, closes `fd`.
  void Answer(int fd);
  // Runs `command` from the client on `fd`; `send` writes one reply line and returns false
  // once the client is gone.
  Status Handle(const std::vector<std::string>& command, const std::function<bool(const std::string&)>& send,
                int fd);
  // cairn rebuild / scrub on the mounted archive, one at a time; a report line after every
  // batch, and the client going away (or the unmount) stops it.
  Status Repair(const std::vector<std::string>& command, const std::function<bool(const std::string&)>& send,
                int fd);

  Filesystem& fs_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::mutex repair_mutex_;  // held while a rebuild or scrub runs
  std::thread thread_;
  struct Connection {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  std::list<Connection> connections_;  // Serve's; finished ones are joined as new ones come
};

}  // namespace cairn
