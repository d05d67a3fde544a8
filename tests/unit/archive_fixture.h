// An archive on three 16 MiB file-backed disks in a temporary directory (64 KiB segments,
// packs below 8 KiB), driven through Filesystem without FUSE, for the unit tests that need
// the whole write and read path.
#pragma once

#include <catch2/catch.hpp>

#include <fcntl.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "archive/archive.h"
#include "fault_disk.h"
#include "fs_read.h"
#include "fs/filesystem.h"
#include "test_util.h"

namespace cairn::test {

// How a payload stored as it is (no transform chain, no member table) is described.
inline ExtentEncoding PlainEncoding(const char* stamp, const Redundancy& r, std::span<const uint8_t> payload) {
  return ExtentEncoding{stamp, r, "", payload.size(), 0};
}

constexpr uint64_t kSegment = 64 << 10;

struct ArchiveFixture {
  TempDir tmp;
  std::string dir = tmp / "arch";
  std::unique_ptr<Archive> archive;
  std::unique_ptr<Filesystem> fs;

  // Wraps each disk at every Open (a decorator of the test's), unless faults are given.
  using WrapDisk = std::function<std::unique_ptr<Disk>(std::unique_ptr<Disk>, size_t)>;
  WrapDisk wrap_disk;

  // `customize` changes the mkfs options (other disks, groups) before the archive is made.
  explicit ArchiveFixture(const std::function<void(MkfsOptions&)>& customize = {}, WrapDisk wrap = {})
      : wrap_disk(std::move(wrap)) {
    MkfsOptions mkfs;
    mkfs.disk_count = 3;
    mkfs.disk_size = 16 << 20;
    mkfs.options.segment_size = kSegment;
    mkfs.options.pack_threshold = 8 << 10;
    if (customize) customize(mkfs);
    REQUIRE(CreateArchive(dir, mkfs).ok());
    Open();
  }
  ~ArchiveFixture() { Close(); }

  void Open(FaultPlan* faults = nullptr) {
    Archive::OpenOptions options;
    options.wrap_disk = wrap_disk;
    if (faults) {
      options.wrap_disk = [faults](std::unique_ptr<Disk> disk, size_t) -> std::unique_ptr<Disk> {
        return std::make_unique<FaultDisk>(std::move(disk), *faults);
      };
    }
    auto a = Archive::Open(dir, options);
    REQUIRE(a.ok());
    archive = std::move(*a);
    fs = std::make_unique<Filesystem>(*archive);
    REQUIRE(fs->Recover().ok());
  }
  void Close() {
    if (fs) REQUIRE(fs->Stop().ok());
    fs.reset();
    archive.reset();
  }
  // Drops everything in memory without persisting: what kill -9 leaves behind.
  void Crash() {
    fs.reset();
    archive.reset();
  }

  uint64_t WriteFile(const std::string& name, const std::vector<uint8_t>& data, uint64_t parent = kRootInode) {
    InodeRecord attr;
    auto fh = fs->Create(parent, name, 0644, O_RDWR, Caller{}, &attr);
    REQUIRE(fh.ok());
    REQUIRE(*fs->Write(*fh, 0, data) == data.size());
    fs->Release(*fh);
    return attr.ino;
  }
  std::vector<uint8_t> ReadFile(uint64_t ino, size_t size) {
    auto fh = fs->Open(ino, O_RDONLY, Caller{});
    REQUIRE(fh.ok());
    auto out = test::ReadBytes(*fs, *fh, 0, size + 100);
    REQUIRE(out.ok());
    fs->Release(*fh);
    return *out;
  }
  std::vector<SegmentRecord> Segments(uint64_t ino) {
    std::lock_guard lock(archive->catalog_mutex());
    return *archive->catalog().GetSegments(ino);
  }
  ExtentRecord Extent(uint64_t id) {
    std::lock_guard lock(archive->catalog_mutex());
    auto extent = archive->catalog().GetExtent(id);
    REQUIRE(extent.ok());
    return *extent;
  }
  std::vector<ExtentRecord> Extents() {
    std::lock_guard lock(archive->catalog_mutex());
    return *archive->catalog().AllExtents();
  }
  uint64_t FreeBytes() { return archive->free_bytes(); }
};

}  // namespace cairn::test
