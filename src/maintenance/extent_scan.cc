#include "maintenance/extent_scan.h"

#include <cstring>

#include <fmt/format.h>

namespace cairn {
namespace {

constexpr uint64_t kWindow = 1 << 20;  // bytes read at a time

struct FoundChunk {
  uint32_t disk;
  uint64_t offset;
  ExtentHeader header;
};

// Appends the chunks of `disk` to `found`; damaged headers to `problems`.
void ScanDisk(Archive& archive, uint32_t index, std::map<uint64_t, std::vector<FoundChunk>>& found,
              ExtentScan& scan, const std::function<void(size_t, uint64_t)>& progress) {
  Disk& disk = archive.disk(index);
  uint64_t size = disk.Size() / kBlockSize * kBlockSize;
  std::vector<uint8_t> window(kWindow);
  uint64_t window_start = 0, window_length = 0;
  for (uint64_t at = kBlockSize; at + kExtentHeaderSize <= size;) {
    if (at < window_start || at + kExtentHeaderSize > window_start + window_length) {
      window_start = at;
      window_length = std::min<uint64_t>(kWindow, size - at);
      Status st = disk.ReadAt(at, std::span(window).first(window_length));
      if (!st.ok()) {  // read what can be read, a block at a time
        scan.problems.push_back(fmt::format("disk {} offset {}: unreadable ({}); skipped {} bytes", index, at,
                                            st.message(), window_length));
        at += window_length;
        window_length = 0;
        continue;
      }
      if (progress) progress(index, at);
    }
    std::span<const uint8_t> block(window.data() + (at - window_start), kExtentHeaderSize);
    if (std::memcmp(block.data(), kExtentMagic, sizeof(kExtentMagic)) != 0) {
      at += kBlockSize;
      continue;
    }
    std::string where = fmt::format("disk {} offset {}", index, at);
    auto header = DecodeExtentHeader(block, where);
    if (!header.ok()) {
      scan.problems.push_back(fmt::format("{}: damaged extent header, skipped: {}", where, header.status().message()));
      at += kBlockSize;
      continue;
    }
    if (header->archive_id != archive.id()) {  // a disk image stored in the archive, say
      at += kBlockSize;
      continue;
    }
    scan.chunks++;
    scan.max_extent_id = std::max(scan.max_extent_id, header->extent_id);
    uint64_t allocation = ExtentAllocation(header->payload_length, header->redundancy.idr_scramble);
    found[header->extent_id].push_back({index, at, std::move(*header)});
    at += std::max<uint64_t>(allocation, kBlockSize);
  }
}

// The extent record of `chunks` (all claiming the same extent id).
FoundExtent Assemble(uint64_t id, const std::vector<FoundChunk>& chunks) {
  const ExtentHeader& first = chunks.front().header;
  FoundExtent out;
  out.header = first;
  out.where = fmt::format("disk {} offset {}", chunks.front().disk, chunks.front().offset);
  ExtentRecord& record = out.record;
  record.id = id;
  record.kind = static_cast<int>(first.kind);
  record.redundancy = first.redundancy;
  record.payload_length = first.extent_payload_length;
  record.payload_crc = first.extent_payload_crc;
  record.logical_length = first.logical_length;
  record.chain_stamp = first.chain_stamp;
  record.chunks.resize(first.redundancy.chunk_count(), ChunkPlacement{kNoDisk, 0, 0, 0, {}});
  std::vector<bool> have(record.chunks.size());
  for (const FoundChunk& chunk : chunks) {
    const ExtentHeader& h = chunk.header;
    size_t index = h.chunk_index;
    if (index >= have.size() || have[index] || !(h.redundancy == first.redundancy) ||
        h.extent_payload_length != first.extent_payload_length || h.version != first.version ||
        h.logical_length != first.logical_length || h.chain_stamp != first.chain_stamp) {
      continue;  // a stale copy (a chunk moved by a rebuild) or a conflicting header
    }
    have[index] = true;
    record.chunks[index] = {chunk.disk, chunk.offset, ExtentAllocation(h.payload_length, h.redundancy.idr_scramble),
                            h.payload_crc, h.digest};
  }
  for (size_t i = 0; i < have.size(); i++) {
    if (!have[i]) out.missing += fmt::format("{}{}", out.missing.empty() ? "" : ", ", i);
  }
  return out;
}

}  // namespace

ExtentScan ScanDisks(Archive& archive, const std::function<void(size_t, uint64_t)>& progress) {
  ExtentScan scan;
  std::map<uint64_t, std::vector<FoundChunk>> found;
  for (size_t i = 0; i < archive.disk_count(); i++) {
    if (archive.IsOut(i)) {
      scan.problems.push_back(fmt::format("disk {}: not scanned: {}", i, archive.missing_disks()[i]));
      continue;
    }
    ScanDisk(archive, static_cast<uint32_t>(i), found, scan, progress);
  }
  for (const auto& [id, chunks] : found) scan.extents[id] = Assemble(id, chunks);
  return scan;
}

}  // namespace cairn
