#include "store/block_chunk_store.h"

#include <fmt/format.h>

namespace cairn {

BlockChunkStore::BlockChunkStore(uint32_t index, std::unique_ptr<Disk> disk, uint64_t data_start, uint64_t data_end)
    : index_(index), name_(fmt::format("disk {}", index)), disk_(std::move(disk)), allocator_(data_start, data_end) {}

std::optional<ChunkLocator> BlockChunkStore::Reserve(uint64_t chunk_length, uint8_t idr_scramble) {
  uint64_t length = ExtentAllocation(chunk_length, idr_scramble);
  std::lock_guard lock(mutex_);
  auto offset = allocator_.Allocate(length);
  if (!offset) return std::nullopt;
  return ChunkLocator{*offset, length};
}

Status BlockChunkStore::MarkUsed(const ChunkLocator& chunk) {
  std::lock_guard lock(mutex_);
  return allocator_.MarkUsed(chunk.address, chunk.length);
}

Status BlockChunkStore::Release(const ChunkLocator& chunk) {
  std::lock_guard lock(mutex_);
  return allocator_.Release(chunk.address, chunk.length);
}

Status BlockChunkStore::Free(const ChunkLocator& chunk) {
  CAIRN_RETURN_IF_ERROR(Release(chunk));
  return disk_->Discard(chunk.address, chunk.length);
}

uint64_t BlockChunkStore::free_bytes() const {
  std::lock_guard lock(mutex_);
  return allocator_.free_bytes();
}

uint64_t BlockChunkStore::capacity() const {
  std::lock_guard lock(mutex_);
  return allocator_.capacity();
}

Status BlockChunkStore::Write(const ChunkLocator& chunk, const ExtentHeader& header,
                              std::span<const uint8_t> payload) {
  uint64_t length = ExtentAllocation(payload.size(), header.redundancy.idr_scramble);
  if (length > chunk.length) {
    return Status::InvalidArgument(fmt::format("{}: chunk of {} bytes does not fit the {} bytes reserved at offset {}",
                                               name_, length, chunk.length, chunk.address));
  }
  return WriteExtent(*disk_, chunk.address, header, payload);
}

Result<std::vector<uint8_t>> BlockChunkStore::Read(const ChunkLocator& chunk, const ExtentExpectation& expect,
                                                   std::vector<uint64_t>* repaired, ExtentHeader* header) {
  return ReadExtent(*disk_, chunk.address, expect, repaired, header);
}

Result<ExtentHeader> BlockChunkStore::ReadHeader(const ChunkLocator& chunk) {
  std::vector<uint8_t> block(kExtentHeaderSize);
  CAIRN_RETURN_IF_ERROR(disk_->ReadAt(chunk.address, block));
  return DecodeExtentHeader(block, fmt::format("{} offset {}", disk_->Name(), chunk.address));
}

std::string BlockChunkStore::Describe(const ChunkLocator& chunk, uint64_t payload_offset) const {
  return fmt::format("disk{}@{}", index_, chunk.address + kExtentHeaderSize + payload_offset);
}

}  // namespace cairn
