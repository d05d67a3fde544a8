// BlockChunkStore is the ChunkStore of one image file or block device: its chunks are
// extents (header + payload, backend/extent_io.h) at block offsets that a SpaceAllocator
// hands out; a locator's address is that offset, which is what the catalog has always
// stored. Thread-safe: the allocator has its own mutex, never held across I/O.
#pragma once

#include <memory>
#include <mutex>

#include "cairn/disk.h"
#include "store/chunk_store.h"
#include "store/space_allocator.h"

namespace cairn {

class BlockChunkStore : public ChunkStore {
 public:
  // Disk `index` of an archive, whose chunks may use bytes [data_start, data_end).
  BlockChunkStore(uint32_t index, std::unique_ptr<Disk> disk, uint64_t data_start, uint64_t data_end);

  const std::string& name() const override { return name_; }
  std::optional<ChunkLocator> Reserve(uint64_t chunk_length, uint8_t idr_scramble) override;
  Status MarkUsed(const ChunkLocator& chunk) override;
  Status Release(const ChunkLocator& chunk) override;
  Status Free(const ChunkLocator& chunk) override;
  uint64_t free_bytes() const override;
  uint64_t free_bytes_in(uint64_t allocation) const override;
  size_t free_ranges() const override;
  uint64_t capacity() const override;

  Status Write(const ChunkLocator& chunk, const ExtentHeader& header, std::span<const uint8_t> payload) override;
  Status Rewrite(const ChunkLocator& chunk, const ExtentHeader& header, std::span<const uint8_t> payload) override;
  Result<std::vector<uint8_t>> Read(const ChunkLocator& chunk, const ExtentExpectation& expect,
                                    std::vector<uint64_t>* repaired, ExtentHeader* header) override;
  Result<ExtentHeader> ReadHeader(const ChunkLocator& chunk) override;
  Status Sync() override { return disk_->Sync(); }
  void DropCached(const ChunkLocator& chunk) override { disk_->DropCached(chunk.address, chunk.length); }
  std::string Describe(const ChunkLocator& chunk, uint64_t payload_offset) const override;
  std::string Locate(const ChunkLocator& chunk) const override;
  void CheckLayout(std::span<const PlacedChunk> chunks,
                   const std::function<void(const std::string&)>& problem) const override;
  void ScanChunks(const std::function<bool(const ChunkLocator&, ExtentHeader)>& found,
                  const std::function<void(const std::string&)>& problem,
                  const std::function<void(uint64_t)>& progress) override;

  // The device itself, for the tools that scan it block by block (fsck, recover, status).
  Disk& disk() { return *disk_; }

 private:
  const uint32_t index_;
  const std::string name_;
  const std::unique_ptr<Disk> disk_;
  const uint64_t data_start_;  // chunks lie in [data_start_, data_end_)
  const uint64_t data_end_;
  mutable std::mutex mutex_;
  SpaceAllocator allocator_;  // guarded by mutex_
};

}  // namespace cairn
