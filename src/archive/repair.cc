#include "archive/repair.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "backend/extent_io.h"
#include "redundancy/striping.h"
#include "util/clock.h"
#include "util/coding.h"
#include "util/log.h"

namespace cairn {
namespace {

constexpr const char* kScrubCursor = "scrub_cursor";  // catalog meta: last extent id scrubbed

// Writes chunk `index` of `extent`: in place when its disk is there, else on a disk that
// holds no other chunk of the extent (then the catalog is updated).
Status WriteChunk(Archive& archive, ExtentRecord& extent, size_t index, ExtentHeader header,
                  std::span<const uint8_t> bytes) {
  ChunkPlacement placement = extent.chunks[index];
  if (!archive.missing_disks().contains(placement.disk)) return archive.RewriteChunk(extent, index, header, bytes);
  {
    std::lock_guard lock(archive.catalog_mutex());
    std::set<std::string> used;  // failure domains of the other chunks
    for (size_t i = 0; i < extent.chunks.size(); i++) {
      if (i != index) used.insert(archive.DomainOf(extent.chunks[i].disk));
    }
    std::optional<uint64_t> offset;
    for (uint32_t d = 0; d < archive.disk_count() && !offset; d++) {
      if (used.contains(archive.DomainOf(d)) || archive.missing_disks().contains(d)) continue;
      offset = archive.allocator(d).Allocate(placement.alloc_length);
      if (offset) {  // same bytes, same CRC and digest: only the place changes
        placement.disk = d;
        placement.offset = *offset;
      }
    }
    if (!offset) {
      return Status::NoSpace(fmt::format("extent {}: no disk without a chunk of it has room for chunk {}", extent.id,
                                         index));
    }
  }
  header.chunk_index = static_cast<uint8_t>(index);
  header.payload_crc = placement.crc;
  header.digest = placement.digest;
  header.payload_length = bytes.size();
  Status st = WriteExtent(archive.disk(placement.disk), placement.offset, header, bytes);
  if (st.ok()) st = archive.disk(placement.disk).Sync();
  std::lock_guard lock(archive.catalog_mutex());
  Catalog& catalog = archive.catalog();
  if (st.ok()) st = InTransaction(catalog, [&] { return catalog.SetExtentChunk(extent.id, index, placement); });
  if (!st.ok()) {
    archive.allocator(placement.disk).Release(placement.offset, placement.alloc_length);
    return st;
  }
  extent.chunks[index] = placement;
  return archive.FlushCatalog(true);
}

}  // namespace

Result<RepairReport> RepairArchive(Archive& archive, const RepairOptions& options) {
  RepairReport report;
  std::vector<ExtentRecord> extents;
  uint64_t cursor = 0;
  {
    std::lock_guard lock(archive.catalog_mutex());
    extents = archive.catalog().AllExtents();
    auto saved = archive.catalog().GetMeta(kScrubCursor);
    if (!options.rebuild && saved.ok()) cursor = std::strtoull(saved->c_str(), nullptr, 10);
  }
  std::set<uint32_t> lost_disks = archive.options().rebuild_disks;
  for (const auto& [disk, why] : archive.missing_disks()) lost_disks.insert(static_cast<uint32_t>(disk));
  report.extents_total = extents.size();
  int64_t start = NowNs();
  uint64_t last_id = cursor;
  auto save_cursor = [&](uint64_t id) {
    std::lock_guard lock(archive.catalog_mutex());
    Catalog& catalog = archive.catalog();
    Status st = InTransaction(catalog, [&] { return catalog.SetMeta(kScrubCursor, std::to_string(id)); });
    return st.ok() ? archive.FlushCatalog(true) : st;
  };
  report.finished = true;
  for (ExtentRecord& extent : extents) {
    if (extent.id <= cursor) {
      report.extents_done++;
      continue;
    }
    if (options.budget_ns > 0 && NowNs() - start > options.budget_ns) {
      report.finished = false;
      break;
    }
    std::set<size_t> bad;
    for (size_t i = 0; i < extent.chunks.size(); i++) {
      if (options.rebuild) {
        if (lost_disks.contains(extent.chunks[i].disk)) bad.insert(i);
        continue;
      }
      bool idr_repaired = false;
      Status st = archive.ReadChunk(extent, i, &idr_repaired).status();
      if (st.ok() && idr_repaired) st = Status::Corruption("damaged blocks, rebuilt by its intra-disk parity");
      report.bytes_read += extent.redundancy.ChunkLength(extent.payload_length);
      if (!st.ok()) {
        bad.insert(i);
        LogWarning("scrub: extent {} chunk {} (disk {}): {}", extent.id, i, extent.chunks[i].disk, st.message());
      }
    }
    report.chunks_bad += bad.size();
    if (!bad.empty()) {
      auto payload = archive.ReadExtentPayload(extent);
      auto header = payload.ok() ? archive.ReadAnyChunkHeader(extent) : Result<ExtentHeader>(payload.status());
      if (!header.ok()) {
        report.extents_lost++;
        report.problems.push_back(fmt::format("extent {}: {}", extent.id, header.status().message()));
      } else {
        report.bytes_read += payload->size();
        // Encoding is deterministic: the chunks come out as they were written.
        auto chunks = MakeChunks(*payload, extent.redundancy);
        for (size_t i : bad) {
          Status st = WriteChunk(archive, extent, i, *header, chunks[i]);
          if (!st.ok()) return st;
          report.chunks_repaired++;
        }
      }
    }
    report.extents_done++;
    last_id = extent.id;
    if (options.progress) options.progress(report);
    if (options.rate > 0) {
      int64_t due = start + static_cast<int64_t>(report.bytes_read * 1e9 / options.rate);
      if (due > NowNs()) std::this_thread::sleep_for(std::chrono::nanoseconds(due - NowNs()));
    }
  }
  if (!options.rebuild) CAIRN_RETURN_IF_ERROR(save_cursor(report.finished ? 0 : last_id));
  return report;
}

}  // namespace cairn
