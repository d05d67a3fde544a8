// FaultDisk fails disk operations on purpose: every WriteAt/Sync/Discard across all
// FaultDisks sharing one counter is numbered, and from operation `fail_at` on (or only
// that one, when transient) each returns an I/O error.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "cairn/disk.h"

namespace cairn::test {

struct FaultPlan {
  int fail_at = 0;  // 1-based operation number; 0 never fails
  bool transient = false;
  std::atomic<int> operations{0};
  std::atomic<int> injected{0};
};

class FaultDisk : public DiskWrapper {
 public:
  FaultDisk(std::unique_ptr<Disk> target, FaultPlan& plan) : DiskWrapper(std::move(target)), plan_(plan) {}

  Status WriteAt(uint64_t offset, std::span<const uint8_t> src) override {
    if (Fail()) return Status::IOError(Name() + ": injected write error");
    return DiskWrapper::WriteAt(offset, src);
  }
  Status Sync() override {
    if (Fail()) return Status::IOError(Name() + ": injected sync error");
    return DiskWrapper::Sync();
  }

 private:
  bool Fail() {
    int n = ++plan_.operations;
    bool fail = plan_.fail_at > 0 && (plan_.transient ? n == plan_.fail_at : n >= plan_.fail_at);
    if (fail) plan_.injected++;
    return fail;
  }
  FaultPlan& plan_;
};

// BadBlocksDisk reports read errors for byte ranges, like a disk with latent sector
// errors: a read that touches one fails as a whole.
class BadBlocksDisk : public DiskWrapper {
 public:
  BadBlocksDisk(std::unique_ptr<Disk> target, std::vector<std::pair<uint64_t, uint64_t>>& bad)
      : DiskWrapper(std::move(target)), bad_(bad) {}

  Status ReadAt(uint64_t offset, std::span<uint8_t> dst) override {
    for (const auto& [start, length] : bad_) {
      if (offset < start + length && start < offset + dst.size()) {
        return Status::IOError(Name() + ": injected read error");
      }
    }
    return DiskWrapper::ReadAt(offset, dst);
  }

 private:
  std::vector<std::pair<uint64_t, uint64_t>>& bad_;  // (offset, length), may change while in use
};

// ReadLogDisk records the offset of every read, for tests of access order.
class ReadLogDisk : public DiskWrapper {
 public:
  ReadLogDisk(std::unique_ptr<Disk> target, std::vector<uint64_t>& log, std::mutex& mutex)
      : DiskWrapper(std::move(target)), log_(log), mutex_(mutex) {}

  Status ReadAt(uint64_t offset, std::span<uint8_t> dst) override {
    std::lock_guard lock(mutex_);
    log_.push_back(offset);
    return DiskWrapper::ReadAt(offset, dst);
  }

 private:
  std::vector<uint64_t>& log_;
  std::mutex& mutex_;
};

}  // namespace cairn::test
