// ControlServer answers the CLI's requests to a running daemon over the unix socket
// ARCHIVE/control.sock: one request per connection (util/control_request.h), reply lines,
// the last "ok" or "error: ...". The socket is 0600 and owned by the archive's owner (the
// owner of the archive directory) from the moment it has its name, and every connection's
// peer must be root, that owner or the daemon's own user. A client gets 10 s to send its
// request and each reply line 30 s to be read; at most kMaxClients are answered at once,
// each on its own thread; Stop() wakes them all and never waits on a client.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>

#include "fs/filesystem.h"
#include "util/control_request.h"

namespace cairn {

class ControlServer {
 public:
  static constexpr size_t kMaxClients = 8;
  static constexpr std::chrono::seconds kRequestTimeout{10};
  static constexpr std::chrono::seconds kReplyTimeout{30};

  explicit ControlServer(Filesystem& fs) : fs_(fs) {}
  ~ControlServer() { Stop(); }

  Status Start();
  void Stop();

  static std::string SocketPath(const std::string& archive_dir) { return archive_dir + "/control.sock"; }

 private:
  using Clock = std::chrono::steady_clock;
  using SendFn = std::function<bool(const std::string&)>;

  void Serve();
  // Answers one connection from `peer_uid`: checks it, reads the request, writes the reply
  // lines, closes `fd`.
  void Answer(int fd, uid_t peer_uid);
  bool Allowed(uid_t uid) const;
  // Waits until `fd` has `events` (OK), Stop() was called (Busy) or `deadline` passed (IOError).
  Status Wait(int fd, short events, Clock::time_point deadline) const;
  // One whole request (up to its newline), within kRequestTimeout.
  Result<std::string> ReadRequest(int fd) const;
  // Writes `text` and a newline; false once the client is gone, too slow, or the daemon stops.
  bool SendLine(int fd, const std::string& text) const;
  // Ends the reply and closes `fd`, first reading what the client still sends until it
  // hangs up or `deadline` passes: closing on unread bytes would reset the connection, and
  // the client could lose the reply.
  void Close(int fd, Clock::time_point deadline) const;
  Status Handle(const ControlRequest& request, const SendFn& send, int fd);
  // cairn rebuild / scrub on the mounted archive, one at a time; a report line after every
  // batch, and the client going away (or the unmount) stops it.
  Status Repair(const ControlRequest& request, const SendFn& send, int fd);

  Filesystem& fs_;
  uid_t owner_uid_ = 0;  // of the archive directory
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd, readable once Stop() was called: wakes every poll
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
