#include "maintenance/extent_scan.h"

#include <cstring>

#include <fmt/format.h>

namespace cairn {
namespace {

struct FoundChunk {
  uint32_t disk;
  ChunkLocator locator;
  ExtentHeader header;
};

// Appends the chunks of disk `index` to `found`; damaged headers to `problems`.
void ScanDisk(Archive& archive, uint32_t index, std::map<uint64_t, std::vector<FoundChunk>>& found,
              ExtentScan& scan, const std::function<void(size_t, uint64_t)>& progress) {
  archive.store(index).ScanChunks(
      [&](const ChunkLocator& locator, ExtentHeader header) {
        if (header.archive_id != archive.id()) return false;  // a disk image stored in the archive, say
        scan.chunks++;
        scan.max_extent_id = std::max(scan.max_extent_id, header.extent_id);
        found[header.extent_id].push_back({index, locator, std::move(header)});
        return true;
      },
      [&](const std::string& problem) { scan.problems.push_back(problem); },
      [&](uint64_t bytes) {
        if (progress) progress(index, bytes);
      });
}

// The extent record of `chunks` (all claiming the same extent id).
FoundExtent Assemble(Archive& archive, uint64_t id, const std::vector<FoundChunk>& chunks) {
  const ExtentHeader& first = chunks.front().header;
  FoundExtent out;
  out.header = first;
  out.where = archive.store(chunks.front().disk).Locate(chunks.front().locator);
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
    record.chunks[index] = ChunkPlacement::At(chunk.disk, chunk.locator, h.payload_crc, h.digest);
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
    if (archive.IsOut(i) && !archive.ServesReads(i)) {  // a lonestar bucket is read through its parity
      scan.problems.push_back(fmt::format("disk {}: not scanned: {}", i, archive.missing_disks()[i]));
      continue;
    }
    ScanDisk(archive, static_cast<uint32_t>(i), found, scan, progress);
  }
  for (const auto& [id, chunks] : found) scan.extents[id] = Assemble(archive, id, chunks);
  return scan;
}

}  // namespace cairn
