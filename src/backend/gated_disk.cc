#include "backend/gated_disk.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace cairn {
namespace {

class FileGatedDisk final : public DiskWrapper {
 public:
  FileGatedDisk(std::unique_ptr<Disk> target, std::string gate)
      : DiskWrapper(std::move(target)), gate_(std::move(gate)), held_(gate_ + ".held") {}

  Status ReadAt(uint64_t offset, std::span<uint8_t> dst) override {
    Wait();
    return DiskWrapper::ReadAt(offset, dst);
  }
  Status WriteAt(uint64_t offset, std::span<const uint8_t> src) override {
    Wait();
    return DiskWrapper::WriteAt(offset, src);
  }
  Status Sync() override {
    Wait();
    return DiskWrapper::Sync();
  }
  Status Discard(uint64_t offset, uint64_t length) override {
    Wait();
    return DiskWrapper::Discard(offset, length);
  }

 private:
  void Wait() {
    if (::access(gate_.c_str(), F_OK) != 0) return;
    int fd = ::open(held_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);
    while (::access(gate_.c_str(), F_OK) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  const std::string gate_;
  const std::string held_;
};

}  // namespace

std::unique_ptr<Disk> GateDiskOnFile(std::unique_ptr<Disk> disk, std::string gate) {
  return std::make_unique<FileGatedDisk>(std::move(disk), std::move(gate));
}

}  // namespace cairn
