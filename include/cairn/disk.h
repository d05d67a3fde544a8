// Disk is cairn's platform interface for one storage device (a sparse image file or a
// block device): positioned reads and writes, sync and discard. Implementations are
// safe for concurrent use by several threads without external locking.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "cairn/status.h"

namespace cairn {

class Disk {
 public:
  virtual ~Disk() = default;

  // Reads exactly dst.size() bytes at `offset`. A read past the end of the device is
  // Corruption ("short read"), since extents never extend past the device.
  virtual Status ReadAt(uint64_t offset, std::span<uint8_t> dst) = 0;
  // Writes all of src at `offset`. Data is durable only after Sync() returns OK.
  virtual Status WriteAt(uint64_t offset, std::span<const uint8_t> src) = 0;
  // Writes `pieces` back to back at `offset`: one WriteAt of their concatenation, which is
  // what this default does; a device may write them as they are, without joining them.
  virtual Status WriteGatherAt(uint64_t offset, std::span<const std::span<const uint8_t>> pieces);
  // Makes every completed WriteAt durable.
  virtual Status Sync() = 0;
  // Tells the device that [offset, offset+length) holds no data any more (hole punch / TRIM).
  virtual Status Discard(uint64_t offset, uint64_t length) = 0;
  // Where the bytes in [from, to) that may hold data end: from if all of them read as zeros,
  // `to` when the device cannot tell (this default, a block device, an error). Image files
  // answer from their holes.
  virtual uint64_t DataEnd(uint64_t /*from*/, uint64_t to) { return to; }
  // A hint that [offset, offset+length) will not be read again soon, so a cached copy of it
  // can go: a rebuild streaming through a disk keeps it from filling the page cache. Bytes
  // not yet synced stay; nothing depends on the hint being taken.
  virtual void DropCached(uint64_t /*offset*/, uint64_t /*length*/) {}
  // For a disk protected by redundancy below it (a bucket of a parity grid): reads the range
  // as that redundancy rebuilds it, whatever the disk itself holds. `way` 1, 2, ... ask for
  // other ways to rebuild it, for when the bytes rebuilt fail their checksum (another disk
  // they came from was damaged too). NotSupported when there is no (such) way.
  virtual Status ReadRebuilt(uint64_t offset, std::span<uint8_t> dst, unsigned way);
  // Writes bytes that redundancy below the disk already agrees with (a repair in place,
  // with bytes rebuilt from elsewhere); WriteAt for a disk without any.
  virtual Status Rewrite(uint64_t offset, std::span<const uint8_t> src) { return WriteAt(offset, src); }

  virtual uint64_t Size() const = 0;
  // Writes of one aligned sector are atomic; larger writes may tear at sector boundaries.
  virtual uint32_t SectorSize() const = 0;
  // Where the device lives, for messages ("disks/disk-003.img").
  virtual const std::string& Name() const = 0;
};

// Opens an existing image file or block device for reading and writing.
Result<std::unique_ptr<Disk>> OpenImageDisk(const std::string& path);
// Creates a sparse image file of `size` bytes; fails if `path` exists.
Result<std::unique_ptr<Disk>> CreateImageDisk(const std::string& path, uint64_t size);
// Makes the first `length` bytes of the image file or block device `path` read as zeros,
// durably (BLKZEROOUT on a device, which the kernel turns into WRITE ZEROES or plain
// writes; a punched hole, or written zeros, in a file). `progress(bytes_done)` after each
// GiB.
Status ZeroDisk(const std::string& path, uint64_t length, const std::function<void(uint64_t)>& progress = {});
// Stands in for a disk that could not be opened: every read and write fails with IOError
// naming `name` and `why`, and it has no space.
std::unique_ptr<Disk> MissingDisk(const std::string& name, const std::string& why);

// Forwards every call to another Disk, so decorators (fault injection, power accounting)
// override only what they change. ReadRebuilt and Rewrite are not forwarded: a decorator
// sits on a device, below any redundancy, so Rewrite is its own WriteAt; nor is
// WriteGatherAt, which comes to the decorator's WriteAt joined.
class DiskWrapper : public Disk {
 public:
  explicit DiskWrapper(std::unique_ptr<Disk> target) : target_(std::move(target)) {}
  Status ReadAt(uint64_t offset, std::span<uint8_t> dst) override {
    return target_->ReadAt(offset, dst);
  }
  Status WriteAt(uint64_t offset, std::span<const uint8_t> src) override {
    return target_->WriteAt(offset, src);
  }
  Status Sync() override { return target_->Sync(); }
  Status Discard(uint64_t offset, uint64_t length) override {
    return target_->Discard(offset, length);
  }
  uint64_t DataEnd(uint64_t from, uint64_t to) override { return target_->DataEnd(from, to); }
  void DropCached(uint64_t offset, uint64_t length) override { target_->DropCached(offset, length); }

  uint64_t Size() const override { return target_->Size(); }
  uint32_t SectorSize() const override { return target_->SectorSize(); }
  const std::string& Name() const override { return target_->Name(); }

 protected:
  Disk* target() { return target_.get(); }

 private:
  std::unique_ptr<Disk> target_;
};

}  // namespace cairn
