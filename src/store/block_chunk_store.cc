#include "store/block_chunk_store.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include <fmt/format.h>

namespace cairn {

BlockChunkStore::BlockChunkStore(uint32_t index, std::unique_ptr<Disk> disk, uint64_t data_start, uint64_t data_end)
    : index_(index),
      name_(fmt::format("disk {}", index)),
      disk_(std::move(disk)),
      data_start_(data_start),
      data_end_(data_end),
      allocator_(data_start, data_end) {}

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
  {
    std::lock_guard lock(mutex_);
    CAIRN_RETURN_IF_ERROR(allocator_.CheckUsed(chunk.address, chunk.length));
  }
  // Discarded while still reserved: once released, a new chunk may be written there, which
  // a discard after it would wipe. (Frees are serialised by the extent store.)
  Status discarded = disk_->Discard(chunk.address, chunk.length);
  CAIRN_RETURN_IF_ERROR(Release(chunk));
  return discarded;
}

uint64_t BlockChunkStore::free_bytes() const {
  std::lock_guard lock(mutex_);
  return allocator_.free_bytes();
}

uint64_t BlockChunkStore::free_bytes_in(uint64_t allocation) const {
  std::lock_guard lock(mutex_);
  return allocator_.FreeBytesIn(allocation);
}

size_t BlockChunkStore::free_ranges() const {
  std::lock_guard lock(mutex_);
  return allocator_.fragments();
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

Status BlockChunkStore::Rewrite(const ChunkLocator& chunk, const ExtentHeader& header,
                                std::span<const uint8_t> payload) {
  std::vector<uint8_t> bytes = EncodeExtent(header, payload);
  if (bytes.size() > chunk.length) {
    return Status::InvalidArgument(fmt::format("{}: chunk of {} bytes does not fit the {} bytes it had at offset {}",
                                               name_, bytes.size(), chunk.length, chunk.address));
  }
  return disk_->Rewrite(chunk.address, bytes);
}

namespace {

// A disk as the redundancy below it rebuilds it, for reading.
class RebuiltReads final : public Disk {
 public:
  RebuiltReads(Disk& disk, unsigned way) : disk_(disk), way_(way) {}
  Status ReadAt(uint64_t offset, std::span<uint8_t> dst) override { return disk_.ReadRebuilt(offset, dst, way_); }
  Status WriteAt(uint64_t, std::span<const uint8_t>) override { return ReadOnly(); }
  Status Sync() override { return ReadOnly(); }
  Status Discard(uint64_t, uint64_t) override { return ReadOnly(); }
  uint64_t Size() const override { return disk_.Size(); }
  uint32_t SectorSize() const override { return disk_.SectorSize(); }
  const std::string& Name() const override { return disk_.Name(); }

 private:
  Status ReadOnly() const { return Status::NotSupported(fmt::format("{}: rebuilt for reading only", Name())); }
  Disk& disk_;
  const unsigned way_;
};

}  // namespace

Result<std::vector<uint8_t>> BlockChunkStore::Read(const ChunkLocator& chunk, const ExtentExpectation& expect,
                                                   std::vector<uint64_t>* repaired, ExtentHeader* header) {
  auto read = ReadExtent(*disk_, chunk.address, expect, repaired, header);
  if (read.ok() || read.status().code() == Status::Code::kNotFound) return read;
  // As the redundancy below the disk rebuilds it, each way it knows until one verifies.
  for (unsigned way = 0;; way++) {
    RebuiltReads rebuilt(*disk_, way);
    auto again = ReadExtent(rebuilt, chunk.address, expect, nullptr, header);
    if (again.ok()) {
      if (repaired) repaired->push_back(0);  // good bytes from a bad spot: the caller rewrites the chunk
      return again;
    }
    // No (other) way, its header read says (nothing below the disk): the first answer.
    if (again.status().code() == Status::Code::kNotSupported) return read;
  }
}

Result<ExtentHeader> BlockChunkStore::ReadHeader(const ChunkLocator& chunk) {
  std::vector<uint8_t> block(kExtentHeaderSize);
  CAIRN_RETURN_IF_ERROR(disk_->ReadAt(chunk.address, block));
  return DecodeExtentHeader(block, fmt::format("{} offset {}", disk_->Name(), chunk.address));
}

void BlockChunkStore::CheckLayout(std::span<const PlacedChunk> chunks,
                                  const std::function<void(const std::string&)>& problem) const {
  std::vector<PlacedChunk> sorted(chunks.begin(), chunks.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const PlacedChunk& a, const PlacedChunk& b) { return a.locator.address < b.locator.address; });
  const PlacedChunk* previous = nullptr;
  for (const PlacedChunk& c : sorted) {
    const ChunkLocator& at = c.locator;
    if (at.address < data_start_ || at.address > data_end_ || at.length > data_end_ - at.address) {
      problem(fmt::format("extent {} at {} (+{}) is outside the disk", c.extent_id, Locate(at), at.length));
    }
    if (previous && previous->locator.address + previous->locator.length > at.address) {
      problem(fmt::format("extents {} and {} overlap on {} at {} (double-owned space)", previous->extent_id,
                          c.extent_id, name_, at.address));
    }
    previous = &c;
  }
}

void BlockChunkStore::ScanChunks(const std::function<bool(const ChunkLocator&, ExtentHeader)>& found,
                                 const std::function<void(const std::string&)>& problem,
                                 const std::function<void(uint64_t)>& progress) {
  constexpr uint64_t kWindow = 1 << 20;  // bytes read at a time
  std::vector<uint8_t> window(kWindow);
  uint64_t window_start = 0, window_length = 0;
  // Where a window does not read, its blocks are read one by one, so that the headers around
  // a bad sector are still found; the blocks that do not read are reported as one range.
  std::optional<uint64_t> unreadable_from;
  Status unreadable_why;
  uint64_t failed_window_end = 0;  // up to here a window did not read: block by block
  auto report_unreadable = [&](uint64_t end) {
    if (!unreadable_from) return;
    problem(fmt::format("{} offset {}: unreadable ({}); skipped {} bytes", name_, *unreadable_from,
                        unreadable_why.message(), end - *unreadable_from));
    unreadable_from.reset();
  };
  for (uint64_t at = data_start_; at + kExtentHeaderSize <= data_end_;) {
    if (at < window_start || at + kExtentHeaderSize > window_start + window_length) {
      window_start = at;
      window_length = at < failed_window_end ? kExtentHeaderSize : std::min<uint64_t>(kWindow, data_end_ - at);
      Status st = disk_->ReadAt(at, std::span(window).first(window_length));
      if (!st.ok() && window_length > kExtentHeaderSize) {
        failed_window_end = at + window_length;  // not read again whole for each block in it
        window_length = kExtentHeaderSize;
        st = disk_->ReadAt(at, std::span(window).first(window_length));
      }
      if (!st.ok()) {
        if (!unreadable_from) unreadable_from = at, unreadable_why = st;
        at += kBlockSize;
        window_length = 0;
        continue;
      }
      report_unreadable(at);
      if (progress) progress(at - data_start_);
    }
    std::span<const uint8_t> block(window.data() + (at - window_start), kExtentHeaderSize);
    if (std::memcmp(block.data(), kExtentMagic, sizeof(kExtentMagic)) != 0) {
      at += kBlockSize;
      continue;
    }
    std::string where = Locate(ChunkLocator{at, kBlockSize});
    auto header = DecodeExtentHeader(block, where);
    if (!header.ok()) {
      problem(fmt::format("{}: damaged extent header, skipped: {}", where, header.status().message()));
      at += kBlockSize;
      continue;
    }
    uint64_t allocation = ExtentAllocation(header->payload_length, header->redundancy.idr_scramble);
    bool ours = found(ChunkLocator{at, allocation}, std::move(*header));
    at += ours ? std::max<uint64_t>(allocation, kBlockSize) : kBlockSize;
  }
  report_unreadable(data_end_);
}

std::string BlockChunkStore::Locate(const ChunkLocator& chunk) const {
  return fmt::format("{} offset {}", name_, chunk.address);
}

std::string BlockChunkStore::Describe(const ChunkLocator& chunk, uint64_t payload_offset) const {
  return fmt::format("disk{}@{}", index_, chunk.address + kExtentHeaderSize + payload_offset);
}

}  // namespace cairn
