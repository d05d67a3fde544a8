#include "maintenance/array_repair.h"

#include <cstdlib>

#include <fmt/format.h>

#include "maintenance/repair_pace.h"

namespace cairn {
namespace {

constexpr uint64_t kStep = 64ull << 20;  // a rebuild or check step, then progress and a stop check

std::string CursorKey(const LoneStarArray& array) { return "parity_scrub_cursor." + array.name(); }

}  // namespace

Status RebuildArrays(Archive& archive, const RepairOptions& options, RepairPace& pace, RepairReport* report) {
  report->finished = true;
  for (const auto& array : archive.arrays()) {
    LoneStarArray::RebuildRun run;  // a range that fails is reported and passed over
    uint64_t left = array->defective_bytes();
    while (left > 0) {
      if (pace.Over()) {
        report->finished = false;
        return Status::OK();
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
      if (options.progress && !options.progress(*report)) {
        report->finished = false;
        return Status::OK();
      }
      pace.Throttle(report->bytes_read);
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
