#include "daemon/reload_on_hangup.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "util/log.h"

namespace cairn {
namespace {

int g_wake_fd = -1;

void OnHangup(int) {
  int saved = errno;  // of the code the signal interrupted
  char byte = 1;
  [[maybe_unused]] ssize_t n = ::write(g_wake_fd, &byte, 1);  // async-signal-safe; a full pipe is fine
  errno = saved;
}

}  // namespace

ReloadOnHangup::ReloadOnHangup(Filesystem& fs) : fs_(fs) {
  if (::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    LogError("SIGHUP will not reload the rules: cannot create a pipe");
    return;
  }
  g_wake_fd = pipe_[1];
  struct sigaction action {};
  action.sa_handler = OnHangup;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGHUP, &action, nullptr);
  thread_ = std::thread([this] { Run(); });
}

ReloadOnHangup::~ReloadOnHangup() {
  signal(SIGHUP, SIG_IGN);  // not the default, which would kill the daemon during its last persist
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  g_wake_fd = -1;
  for (int fd : pipe_) {
    if (fd >= 0) ::close(fd);
  }
}

void ReloadOnHangup::Run() {
  while (!stopping_) {
    pollfd pfd{pipe_[0], POLLIN, 0};
    if (::poll(&pfd, 1, 200) <= 0) continue;
    char drain[64];
    while (::read(pipe_[0], drain, sizeof drain) > 0) {
    }
    Status st = fs_.ReloadRules();
    if (st.ok()) {
      LogInfo("SIGHUP: rules reloaded from {}", fs_.archive().rules_path());
    } else {
      LogError("SIGHUP: rules reload refused, the old rules stay in force: {}", st.message());
    }
  }
}

}  // namespace cairn
