#include "maintenance/array_repair.h"

#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "maintenance/repair_pace.h"
#include "redundancy/striping.h"
#include "util/log.h"

namespace cairn {
namespace {

constexpr uint64_t kStep = 64ull << 20;  // a rebuild or check step, then progress and a stop check

std::string CursorKey(const LoneStarArray& array) { return "parity_scrub_cursor." + array.name(); }

// The bucket ranges a rebuild filled: defective before it (`before`) and not after, by disk.
std::map<uint32_t, RangeSet> RebuiltBuckets(const LoneStarArray& array, const std::map<uint32_t, RangeSet>& before) {
  std::map<uint32_t, RangeSet> rebuilt;
  const std::map<uint32_t, RangeSet> after = array.defects();
  for (const auto& [position, ranges] : before) {
    if (array.geometry().role(position) != DiskRole::kData) continue;  // parity holds no chunks
    RangeSet filled = ranges;
    if (auto left = after.find(position); left != after.end()) left->second.ForEach([&](ByteRange r) { filled.Remove(r); });
    if (!filled.empty()) rebuilt.emplace(array.disk_of(position), std::move(filled));
  }
  return rebuilt;
}

// Parity rebuilds a bucket's bytes as the rest of its parity group has them: a member damaged
// there makes them wrong. So every chunk in a range just rebuilt is read back through its
// checks; one that fails them is read the other ways the grid knows (BlockChunkStore::Read),
// or rebuilt from its extent's other chunks, and rewritten; one nothing rebuilds is counted
// lost, never reported rebuilt.
Status VerifyRebuiltChunks(Archive& archive, const std::map<uint32_t, RangeSet>& rebuilt, RepairPace& pace,
                           RepairReport* report) {
  if (rebuilt.empty()) return Status::OK();
  std::set<uint64_t> lost;  // extents
  for (uint64_t after = 0;;) {
    Result<std::vector<ExtentRecord>> page = Status::NotFound("");
    {
      std::lock_guard lock(archive.catalog_mutex());
      page = archive.catalog().ExtentsAfter(after, 4096);
    }
    if (!page.ok()) return page.status();
    if (page->empty()) return Status::OK();
    after = page->back().id;
    for (const ExtentRecord& extent : *page) {
      for (size_t i = 0; i < extent.chunks.size(); i++) {
        const ChunkPlacement& chunk = extent.chunks[i];
        auto ranges = rebuilt.find(chunk.disk);
        if (ranges == rebuilt.end() || !ranges->second.Overlaps({chunk.locator().address, chunk.locator().length})) {
          continue;
        }
        bool wrong = false;
        ExtentHeader header;
        auto bytes = archive.extents().ReadChunk(extent, i, &wrong, &header);
        report->bytes_read += chunk.locator().length;
        pace.Throttle(report->bytes_read);
        if (bytes.ok() && !wrong) continue;
        auto current = ExtentStillCurrent(archive, extent);
        if (!current.ok()) return current.status();
        if (!*current) continue;  // deleted or moved by the mounted archive meanwhile
        report->chunks_bad++;
        if (!bytes.ok() && extent.chunks.size() > 1) {  // its copies or its stripe's parity rebuild it
          ExtentHeader verified;
          auto payload = archive.extents().ReadExtentPayload(extent, &verified);
          if (payload.ok()) {
            bytes = std::move(MakeChunks(*payload, extent.redundancy)[i]);
            header = std::move(verified);
          }
        }
        if (!bytes.ok()) {
          if (lost.insert(extent.id).second) report->extents_lost++;
          report->problems.push_back(fmt::format("extent {} chunk {} on disk {}: rebuilt from parity, it does not "
                                                 "verify, and nothing else rebuilds it: {}",
                                                 extent.id, i, chunk.disk, bytes.status().message()));
          continue;
        }
        auto written = archive.extents().RewriteChunk(extent, i, header, *bytes);
        Status st = written.ok() && *written ? archive.extents().SyncDisk(chunk.disk) : written.status();
        if (!st.ok()) {
          report->problems.push_back(fmt::format("extent {} chunk {} on disk {}: rebuilt wrong from parity, and "
                                                 "cannot be rewritten: {} (cairn scrub tries again)",
                                                 extent.id, i, chunk.disk, st.message()));
          continue;
        }
        if (!*written) continue;  // moved meanwhile
        report->chunks_repaired++;
        LogInfo("rebuild: extent {} chunk {} on disk {} was rebuilt wrong from its parity group (a member is damaged "
                "there) and is rewritten from {}",
                extent.id, i, chunk.disk, wrong ? "the grid's other ways" : "its extent's other chunks");
      }
    }
  }
}

}  // namespace

Status RebuildArrays(Archive& archive, const RepairOptions& options, RepairPace& pace, RepairReport* report) {
  report->finished = true;
  for (const auto& array : archive.arrays()) {
    LoneStarArray::RebuildRun run;  // a range that fails is reported and passed over
    const std::map<uint32_t, RangeSet> defects = array->defects();
    uint64_t left = array->defective_bytes();
    bool stopped = false;  // out of time, or cancelled: what was rebuilt is verified first
    while (left > 0 && !stopped) {
      if (pace.Over()) {
        stopped = true;
        break;
      }
      const size_t failures = run.failures;
      auto after = array->RebuildStep(kStep, true, &run);
      if (!after.ok() && run.failures > failures) {
        const std::string prefix = fmt::format("lonestar group {}: ", array->name());  // once
        const std::string& why = after.status().message();
        report->problems.push_back(why.starts_with(prefix) ? why : prefix + why);
        continue;
      }
      if (!after.ok()) return after.status();
      if (*after >= left) break;  // what is left is on disks that are not there, or failed
      report->bytes_read += left - *after;
      report->array_bytes_rebuilt += left - *after;
      left = *after;
      stopped = options.progress && !options.progress(*report);
      pace.Throttle(report->bytes_read);
    }
    CAIRN_RETURN_IF_ERROR(VerifyRebuiltChunks(archive, RebuiltBuckets(*array, defects), pace, report));
    if (stopped) {
      report->finished = false;
      return Status::OK();
    }
    if (left > 0) {
      report->finished = false;
      report->problems.push_back(
          run.failures > 0 ? fmt::format("lonestar group {}: {} bytes are left to rebuild, those above could not be "
                                         "(cairn rebuild tries them again)", array->name(), left)
                           : fmt::format("lonestar group {}: {} bytes of disks that are missing wait for their "
                                         "replacement (cairn disk replace)", array->name(), left));
    }
  }
  return Status::OK();
}

Result<bool> ParityScrubUnderWay(Archive& archive) {
  std::lock_guard lock(archive.catalog_mutex());
  for (const auto& array : archive.arrays()) {
    auto saved = archive.catalog().GetMeta(CursorKey(*array));
    if (saved.ok() && !saved->empty()) return true;
    if (!saved.ok() && !saved.status().IsNotFound()) return saved.status();
  }
  return false;
}

// Each group's cursor: "" before a check (and after all groups are through), else the
// offset it has checked up to (its data end once through).
Status ScrubArrays(Archive& archive, const RepairOptions& options, RepairPace& pace, RepairReport* report) {
  report->finished = true;
  std::vector<uint64_t> cursors;
  {
    std::lock_guard lock(archive.catalog_mutex());
    Status begun = InTransaction(archive.catalog(), [&]() -> Status {
      for (const auto& array : archive.arrays()) {
        auto saved = archive.catalog().GetMeta(CursorKey(*array));
        if (!saved.ok() && !saved.status().IsNotFound()) return saved.status();
        uint64_t at = saved.ok() && !saved->empty() ? std::strtoull(saved->c_str(), nullptr, 10) : 0;
        cursors.push_back(std::max(at, array->data_start()));
        if (!saved.ok() || saved->empty()) {
          CAIRN_RETURN_IF_ERROR(archive.catalog().SetMeta(CursorKey(*array), std::to_string(cursors.back())));
        }
      }
      return Status::OK();
    });
    if (!begun.ok()) return begun;
  }
  for (size_t i = 0; i < archive.arrays().size(); i++) {
    const auto& array = archive.arrays()[i];
    uint64_t at = cursors[i];
    const uint64_t end = array->data_end();
    while (at < end) {
      if (pace.Over()) {
        report->finished = false;
        return Status::OK();
      }
      uint64_t length = std::min(kStep, end - at);
      auto checked = array->CheckParity({at, length}, /*repair=*/true);
      if (!checked.ok()) return checked.status();
      report->bytes_read += checked->bytes_checked;
      report->parity_bad += checked->mismatches.size();
      report->parity_repaired += checked->repaired;
      report->parity_buckets_rebuilt += checked->buckets_rebuilt;
      report->problems.insert(report->problems.end(), checked->mismatches.begin(), checked->mismatches.end());
      at += length;
      {
        std::lock_guard lock(archive.catalog_mutex());
        Status saved = InTransaction(archive.catalog(),
                                     [&] { return archive.catalog().SetMeta(CursorKey(*array), std::to_string(at)); });
        if (!saved.ok()) return saved;
      }
      if (options.progress && !options.progress(*report)) {
        report->finished = false;
        return Status::OK();
      }
      pace.Throttle(report->bytes_read);
    }
  }
  CAIRN_RETURN_IF_ERROR(RestartParityScrub(archive));  // every group is through
  return archive.CommitDurably();
}

Status RestartParityScrub(Archive& archive) {
  std::lock_guard lock(archive.catalog_mutex());
  return InTransaction(archive.catalog(), [&]() -> Status {
    for (const auto& array : archive.arrays()) CAIRN_RETURN_IF_ERROR(archive.catalog().SetMeta(CursorKey(*array), ""));
    return Status::OK();
  });
}

}  // namespace cairn
