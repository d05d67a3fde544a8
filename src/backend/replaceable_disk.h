// ReplaceableDisk is a Disk whose device can be swapped while other threads use it, for
// `cairn disk replace` on a mounted archive. Replaced devices stay open until it is destroyed,
// so a call that started on one finishes on it.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "cairn/disk.h"

namespace cairn {

class ReplaceableDisk : public Disk {
 public:
  explicit ReplaceableDisk(std::unique_ptr<Disk> disk) { Replace(std::move(disk)); }

  void Replace(std::unique_ptr<Disk> disk) {
    std::lock_guard lock(mutex_);
    current_.store(disk.get(), std::memory_order_release);
    devices_.push_back(std::move(disk));
  }

  Status ReadAt(uint64_t offset, std::span<uint8_t> dst) override { return device().ReadAt(offset, dst); }
  Status WriteAt(uint64_t offset, std::span<const uint8_t> src) override { return device().WriteAt(offset, src); }
  Status Sync() override { return device().Sync(); }
  Status Discard(uint64_t offset, uint64_t length) override { return device().Discard(offset, length); }
  uint64_t Size() const override { return device().Size(); }
  uint32_t SectorSize() const override { return device().SectorSize(); }
  const std::string& Name() const override { return device().Name(); }

 private:
  Disk& device() const { return *current_.load(std::memory_order_acquire); }

  std::atomic<Disk*> current_{nullptr};
  std::mutex mutex_;                           // serializes Replace
  std::vector<std::unique_ptr<Disk>> devices_;  // every device it had, the current one last
};

}  // namespace cairn
