// FaultDisk fails disk operations on purpose: every WriteAt/Sync/Discard across all
// FaultDisks sharing one counter is numbered, and from operation `fail_at` on (or only
// that one, when transient) each returns an I/O error.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
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
        failed_reads_++;
        return Status::IOError(Name() + ": injected read error");
      }
    }
    return DiskWrapper::ReadAt(offset, dst);
  }
  // How many reads failed (a slow bad sector costs each one).
  int failed_reads() const { return failed_reads_; }

 private:
  std::vector<std::pair<uint64_t, uint64_t>>& bad_;  // (offset, length), may change while in use
  std::atomic<int> failed_reads_{0};
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

// DiskGate holds the disk operations of the kinds it is closed for until it opens again:
// a disk that takes seconds to answer (a spin-up), made deterministic. Thread-safe.
class DiskGate {
 public:
  enum Kind { kRead = 1, kWrite = 2, kSync = 4, kDiscard = 8 };

  void Close(int kinds) {
    std::lock_guard lock(mutex_);
    closed_ = kinds;
  }
  void Open() {
    {
      std::lock_guard lock(mutex_);
      closed_ = 0;
    }
    changed_.notify_all();
  }
  // Whether an operation has been held at the gate within `timeout`.
  bool WaitUntilHolding(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [this] { return holding_ > 0; });
  }
  int holding() {
    std::lock_guard lock(mutex_);
    return holding_;
  }
  // Called by GateDisk before an operation of `kind`: waits while the gate is closed to it.
  void Pass(Kind kind) {
    std::unique_lock lock(mutex_);
    if (!(closed_ & kind)) return;
    holding_++;
    changed_.notify_all();
    changed_.wait(lock, [&] { return !(closed_ & kind); });
    holding_--;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int closed_ = 0;
  int holding_ = 0;
};

class GateDisk : public DiskWrapper {
 public:
  GateDisk(std::unique_ptr<Disk> target, DiskGate& gate) : DiskWrapper(std::move(target)), gate_(gate) {}
  Status ReadAt(uint64_t offset, std::span<uint8_t> dst) override {
    gate_.Pass(DiskGate::kRead);
    return DiskWrapper::ReadAt(offset, dst);
  }
  Status WriteAt(uint64_t offset, std::span<const uint8_t> src) override {
    gate_.Pass(DiskGate::kWrite);
    return DiskWrapper::WriteAt(offset, src);
  }
  Status Sync() override {
    gate_.Pass(DiskGate::kSync);
    return DiskWrapper::Sync();
  }
  Status Discard(uint64_t offset, uint64_t length) override {
    gate_.Pass(DiskGate::kDiscard);
    return DiskWrapper::Discard(offset, length);
  }

 private:
  DiskGate& gate_;
};

// IoCountDisk counts the reads and writes of each disk (by its index in the archive) in
// maps shared by the disks of one archive.
struct IoCounts {
  std::mutex mutex;
  std::map<size_t, int> reads, writes;
  void Clear() {
    std::lock_guard lock(mutex);
    reads.clear();
    writes.clear();
  }
};

class IoCountDisk : public DiskWrapper {
 public:
  IoCountDisk(std::unique_ptr<Disk> target, IoCounts& counts, size_t index)
      : DiskWrapper(std::move(target)), counts_(counts), index_(index) {}
  Status ReadAt(uint64_t offset, std::span<uint8_t> dst) override {
    Count(counts_.reads);
    return DiskWrapper::ReadAt(offset, dst);
  }
  Status WriteAt(uint64_t offset, std::span<const uint8_t> src) override {
    Count(counts_.writes);
    return DiskWrapper::WriteAt(offset, src);
  }

 private:
  void Count(std::map<size_t, int>& map) {
    std::lock_guard lock(counts_.mutex);
    map[index_]++;
  }
  IoCounts& counts_;
  const size_t index_;
};

}  // namespace cairn::test
