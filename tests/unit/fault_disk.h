// FaultDisk fails disk operations on purpose: every WriteAt/Sync/Discard across all
// FaultDisks sharing one counter is numbered, and from operation `fail_at` on (or only
// that one, when transient) each returns an I/O error.
#pragma once

#include <atomic>
#include <memory>

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

}  // namespace cairn::test
