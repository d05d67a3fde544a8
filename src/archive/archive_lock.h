// The archive lock: an exclusive flock on ARCHIVE/lock, which records the holder's pid,
// keeps a second daemon, fsck or recover out of an archive in use.
#pragma once

#include <string>

#include "cairn/status.h"

namespace cairn {

class ArchiveLock {
 public:
  // Takes the lock of archive `dir` and records this process's pid in it; Busy naming the
  // holder's pid when another process has it (waiting only out a Holder() probe). Refuses a
  // lock file that is not a regular file with one name.
  static Result<ArchiveLock> Acquire(const std::string& dir);
  // The pid recorded in the lock file of `dir`, -1 when it is locked and no pid is written
  // yet, 0 when no process holds the archive.
  static int Holder(const std::string& dir);
  // What to call a holder in a message: "pid N", or what is known when no pid is written
  // (-1). REQUIRES: holder != 0.
  static std::string HolderName(int holder);

  ArchiveLock(ArchiveLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  ArchiveLock& operator=(ArchiveLock&& other) noexcept;
  ArchiveLock(const ArchiveLock&) = delete;
  ArchiveLock& operator=(const ArchiveLock&) = delete;
  ~ArchiveLock() { Release(); }

 private:
  explicit ArchiveLock(int fd) : fd_(fd) {}
  void Release();

  int fd_ = -1;  // holds the flock
};

}  // namespace cairn
