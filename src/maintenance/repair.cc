#include "maintenance/repair.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "array/lonestar_array.h"
#include "catalog/record_checks.h"
#include "maintenance/array_repair.h"
#include "maintenance/repair_pace.h"
#include "redundancy/striping.h"
#include "util/clock.h"
#include "util/coding.h"
#include "util/size.h"
#include "util/log.h"

namespace cairn {
namespace {

// Catalog meta keys: where an interrupted scrub or rebuild continues.
constexpr const char* kScrubCursor = "scrub_cursor";      // last extent id scrubbed
constexpr const char* kRebuildCursor = "rebuild_cursor";  // "<replaced disks> <disk> <position>", see PlanTasks

std::set<uint32_t> WithoutArrays(const Archive& archive, std::set<uint32_t> disks) {
  std::erase_if(disks, [&](uint32_t d) { return archive.array_of(d).first != nullptr; });
  return disks;
}

// One extent to repair. A rebuild orders them by where a lost chunk lies (on a replaced disk
// if there is one, a position that never changes): the order chunks were allocated, so every
// survivor is read front to back.
struct Task {
  ExtentRecord extent;
  std::vector<size_t> lost;  // rebuild: chunks on replaced or missing disks; scrub: found by reading
  uint32_t disk = 0;
  uint64_t position = 0;  // of that chunk in its store
  bool in_place = false;  // its key chunk is on a replaced disk (rewritten where it is)
  bool failed = false;    // could not be repaired in this run
  auto key() const { return std::tie(disk, position, extent.id); }
};

// What one batch wrote: the disks to sync before anything is recorded, and chunks placed on
// another disk than the catalog says.
struct BatchWrites {
  struct Move {
    uint64_t extent_id;
    size_t index;
    ChunkPlacement from, to;
  };
  std::set<uint32_t> disks;
  std::vector<Move> moved;
};

class Repairer {
 public:
  // Disks of lonestar groups are left out: their arrays rebuild them in place (array_repair.h).
  Repairer(Archive& archive, const RepairOptions& options, RepairPace& pace)
      : archive_(archive), options_(options), pace_(pace), awaiting_(WithoutArrays(archive, archive.awaiting_rebuild())),
        lost_disks_(awaiting_) {
    for (const auto& [disk, why] : archive.missing_disks()) {
      if (!archive.array_of(disk).first) lost_disks_.insert(static_cast<uint32_t>(disk));
    }
  }

  Result<RepairReport> Run();

 private:
  Result<std::vector<Task>> PlanTasks(const std::string& cursor);
  std::string RebuildCursorPrefix() const;
  std::string CursorAfter(const Task& task) const;
  void RepairExtent(Task& task, BatchWrites& writes, RepairReport& report);
  Result<bool> WriteChunk(ExtentRecord& extent, size_t index, const ExtentHeader& header,
                          std::span<const uint8_t> bytes, BatchWrites& writes);
  Status Commit(BatchWrites& writes, const std::string& cursor);
  void RunBatch(std::vector<Task>& tasks, size_t begin, size_t end, BatchWrites& writes);
  bool Stopping() const { return pace_.Stopping(); }
  bool OnReplacedDisk(const ExtentRecord& extent) const {
    return std::any_of(extent.chunks.begin(), extent.chunks.end(),
                       [&](const ChunkPlacement& c) { return awaiting_.contains(c.disk); });
  }

  Archive& archive_;
  const RepairOptions& options_;
  RepairPace& pace_;
  const std::set<uint32_t> awaiting_;  // replaced disks: chunks rewritten in place
  std::set<uint32_t> lost_disks_;      // those and the missing disks
  std::mutex mutex_;  // guards report_, stop_error_ and the BatchWrites while workers run
  RepairReport report_;
  Status stop_error_;  // the first chunk that could not be written: the run stops after its batch
};

std::string Repairer::RebuildCursorPrefix() const {
  std::string prefix;  // the replaced disks and their images: a new replacement starts over
  for (uint32_t d : awaiting_) {
    prefix += fmt::format("{}{}={}", prefix.empty() ? "" : ",", d,
                          d < archive_.options().disks.size() ? archive_.options().disks[d] : "?");
  }
  return prefix;
}

std::string Repairer::CursorAfter(const Task& task) const {
  if (!options_.rebuild) return std::to_string(task.extent.id);
  return fmt::format("{} {} {}", RebuildCursorPrefix(), task.disk, task.position);
}

// The extents to repair in the order to repair them, without those an interrupted run did.
// A rebuild cursor is a position in that order; every extent keyed in place at or before it
// had all its chunks rebuilt (Run never moves it past one that failed), and the chunks on
// missing disks that moved are no longer lost, so only in-place chunks are skipped.
Result<std::vector<Task>> Repairer::PlanTasks(const std::string& cursor) {
  std::vector<ExtentRecord> extents;
  for (bool more = true; more;) {  // in pages: a mounted archive goes on meanwhile
    std::lock_guard lock(archive_.catalog_mutex());
    auto page = archive_.catalog().ExtentsAfter(extents.empty() ? 0 : extents.back().id, 4096);
    if (!page.ok()) return page.status();
    more = !page->empty();
    extents.insert(extents.end(), std::make_move_iterator(page->begin()), std::make_move_iterator(page->end()));
  }
  std::vector<Task> tasks;
  for (ExtentRecord& extent : extents) {
    Status valid = CheckExtentRecord(extent);
    if (!valid.ok()) {  // its fields cannot be trusted to read or rebuild it: counted as lost
      report_.extents_lost++;
      if (OnReplacedDisk(extent)) report_.replaced_extents_lost++;
      report_.problems.push_back(valid.message());
      continue;
    }
    Task task;
    for (size_t i = 0; i < extent.chunks.size() && options_.rebuild; i++) {
      if (lost_disks_.contains(extent.chunks[i].disk)) task.lost.push_back(i);
    }
    if (options_.rebuild && task.lost.empty()) continue;
    if (options_.rebuild) {
      auto in_place = std::find_if(task.lost.begin(), task.lost.end(),
                                   [&](size_t i) { return awaiting_.contains(extent.chunks[i].disk); });
      task.in_place = in_place != task.lost.end();
      const ChunkPlacement& key = extent.chunks[task.in_place ? *in_place : task.lost[0]];
      task.disk = key.disk;
      task.position = key.locator().address;
    }
    task.extent = std::move(extent);
    tasks.push_back(std::move(task));
  }
  std::sort(tasks.begin(), tasks.end(), [](const Task& a, const Task& b) { return a.key() < b.key(); });
  report_.extents_total = tasks.size();
  std::function<bool(Task&)> done = [](Task&) { return false; };
  if (!options_.rebuild && !cursor.empty()) {
    uint64_t last = std::strtoull(cursor.c_str(), nullptr, 10);
    done = [last](Task& t) { return t.extent.id <= last; };
  } else if (options_.rebuild && cursor.starts_with(RebuildCursorPrefix() + " ")) {
    unsigned disk = 0;
    unsigned long long position = 0;
    if (std::sscanf(cursor.c_str() + RebuildCursorPrefix().size(), " %u %llu", &disk, &position) == 2) {
      done = [&, disk, position](Task& t) {
        if (!t.in_place || std::tie(t.disk, t.position) > std::tie(disk, position)) return false;
        std::erase_if(t.lost, [&](size_t i) { return awaiting_.contains(t.extent.chunks[i].disk); });
        return t.lost.empty();
      };
    }
  }
  size_t before = tasks.size();
  std::erase_if(tasks, done);
  report_.extents_done = before - tasks.size();
  return tasks;
}

// Reads what the extent needs (a rebuild: the first chunks that read well, as many as it
// takes; a scrub: every chunk), recreates its lost and bad chunks, checks each against its
// CRC and digest, and writes them back.
void Repairer::RepairExtent(Task& task, BatchWrites& writes, RepairReport& report) {
  ExtentRecord& extent = task.extent;
  const Redundancy& r = extent.redundancy;
  const uint64_t chunk_length = r.ChunkLength(extent.payload_length);
  ChunkSet chunks(extent.chunks.size());
  std::vector<size_t> bad = task.lost;
  size_t have = 0;
  ExtentHeader header;  // of a chunk read: the template for the ones written
  std::vector<std::string> failures;
  for (size_t i = 0; i < extent.chunks.size(); i++) {
    if (std::find(task.lost.begin(), task.lost.end(), i) != task.lost.end()) continue;
    if (options_.rebuild && have == ChunksNeeded(r)) break;
    bool idr_repaired = false;
    auto bytes = archive_.extents().ReadChunk(extent, i, &idr_repaired, &header);
    archive_.extents().DropCachedChunk(extent, i);  // a scrub or rebuild streams through the disks
    report.bytes_read += chunk_length;
    if (bytes.ok()) {
      chunks[i] = std::move(*bytes);
      have++;
      if (!idr_repaired) continue;  // else good bytes from a bad spot: rewrite them
    }
    bad.push_back(i);
    failures.push_back(fmt::format("extent {} chunk {} (disk {}): {}", extent.id, i, extent.chunks[i].disk,
                                   bytes.ok() ? std::string(kRebuiltBelow) : bytes.status().message()));
  }
  if (bad.empty()) return;
  auto current = ExtentStillCurrent(archive_, extent);
  if (!current.ok()) {  // a failing query is no answer: the extent is tried again next run
    task.failed = true;
    std::lock_guard lock(mutex_);
    if (stop_error_.ok()) stop_error_ = current.status();
    return;
  }
  if (!*current) return;  // a mounted archive dropped or moved it meanwhile
  for (const auto& failure : failures) LogWarning("{}: {}", options_.rebuild ? "rebuild" : "scrub", failure);
  report.chunks_bad += bad.size();
  Status st = RebuildChunks(chunks, r, extent.payload_length, bad);
  // A reconstruction is written only once it matches what the catalog says the chunk held.
  for (size_t i = 0; i < bad.size() && st.ok(); i++) {
    const ChunkPlacement& want = extent.chunks[bad[i]];
    if (Crc32c(*chunks[bad[i]]) != want.crc ||
        (r.checksum != ChecksumType::kCrc32c && ComputeDigest(r.checksum, *chunks[bad[i]]) != want.digest)) {
      st = Status::Corruption(fmt::format("rebuilt chunk {} does not match its checksum", bad[i]));
    }
  }
  if (!st.ok()) {
    task.failed = true;
    report.extents_lost++;
    if (OnReplacedDisk(extent)) report.replaced_extents_lost++;
    report.problems.push_back(fmt::format("extent {}: {}", extent.id, st.message()));
    return;
  }
  for (size_t i : bad) {
    auto written = WriteChunk(extent, i, header, *chunks[i], writes);
    if (written.status().IsNoSpace()) {
      // No disk may take it now (its own is missing, and every other failure domain holds a
      // chunk of the extent or is full): the extent stays degraded, reported, and the run
      // goes on (a rebuild comes back to it).
      task.failed = true;
      report.problems.push_back(fmt::format("extent {} chunk {}: not rewritten: {}", extent.id, i,
                                            written.status().message()));
      continue;
    }
    if (!written.ok()) {
      std::lock_guard lock(mutex_);
      if (stop_error_.ok()) {
        stop_error_ =
            Status::IOError(fmt::format("extent {} chunk {}: {}", extent.id, i, written.status().message()));
      }
      return;
    }
    report.chunks_repaired += *written;
  }
}

// Whether the catalog still has the extent with these chunks (a mounted archive changes).

// Writes chunk `index` in place when its disk is there (false if the extent changed
// meanwhile), else on a disk in a failure domain holding no other chunk of the extent
// (recorded in the catalog at the batch's commit).
Result<bool> Repairer::WriteChunk(ExtentRecord& extent, size_t index, const ExtentHeader& header,
                                  std::span<const uint8_t> bytes, BatchWrites& writes) {
  const ChunkPlacement placement = extent.chunks[index];
  if (!archive_.IsOut(placement.disk)) {
    auto written = archive_.extents().RewriteChunk(extent, index, header, bytes);
    if (written.ok() && *written) {
      std::lock_guard lock(mutex_);
      writes.disks.insert(placement.disk);
    }
    return written;
  }
  auto target = archive_.extents().ReserveRelocation(extent, index);
  if (!target.ok()) return target.status();
  Status st = archive_.extents().WriteChunkAt(*target, HeaderForChunk(header, index, *target, bytes.size()), bytes);
  if (!st.ok()) {
    archive_.extents().ReleaseUncommittedChunk(*target);
    return st;
  }
  std::lock_guard lock(mutex_);
  writes.disks.insert(target->disk);
  writes.moved.push_back({extent.id, index, placement, *target});
  extent.chunks[index] = *target;
  return true;
}

// Makes a batch's writes durable, then records moved chunks and the cursor in one commit.
// Room of moves that are not recorded goes back to its store.
Status Repairer::Commit(BatchWrites& writes, const std::string& cursor) {
  Status st;
  for (uint32_t d : writes.disks) {
    if (st.ok()) st = archive_.extents().SyncDisk(d);
  }
  std::unique_lock lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  std::vector<const BatchWrites::Move*> recorded;
  if (st.ok()) {
    st = InTransaction(catalog, [&]() -> Status {
      for (const BatchWrites::Move& move : writes.moved) {
        auto now = catalog.GetExtent(move.extent_id);  // unchanged, or the move is not needed any more
        if (!now.ok() && !now.status().IsNotFound()) return now.status();
        if (now.ok() && move.index < now->chunks.size() && now->chunks[move.index] == move.from) {
          CAIRN_RETURN_IF_ERROR(catalog.SetExtentChunk(move.extent_id, move.index, move.to));
          recorded.push_back(&move);
        }
      }
      return catalog.SetMeta(options_.rebuild ? kRebuildCursor : kScrubCursor, cursor);
    });
  }
  if (!st.ok()) recorded.clear();
  std::vector<ChunkPlacement> unrecorded;
  for (const BatchWrites::Move& move : writes.moved) {
    if (std::find(recorded.begin(), recorded.end(), &move) == recorded.end()) unrecorded.push_back(move.to);
  }
  writes = BatchWrites{};
  Archive::PendingSync pending;
  if (st.ok()) st = archive_.Commit(Archive::SyncWhen::kAlways, &pending);
  lock.unlock();
  for (const ChunkPlacement& to : unrecorded) archive_.extents().ReleaseUncommittedChunk(to);  // discards: after the lock
  CAIRN_RETURN_IF_ERROR(st);
  return archive_.MakeDurable(std::move(pending));
}

// Repairs tasks [begin, end) on up to one thread per core; reads of different extents overlap.
void Repairer::RunBatch(std::vector<Task>& tasks, size_t begin, size_t end, BatchWrites& writes) {
  std::atomic<size_t> next = begin;
  auto work = [&] {
    for (size_t i; (i = next++) < end;) {
      RepairReport part;
      try {
        RepairExtent(tasks[i], writes, part);
      } catch (const std::exception& e) {  // e.g. out of memory: stop after this batch, keep the daemon
        std::lock_guard lock(mutex_);
        if (stop_error_.ok()) stop_error_ = Status::IOError(fmt::format("extent {}: {}", tasks[i].extent.id, e.what()));
      }
      std::lock_guard lock(mutex_);
      report_.bytes_read += part.bytes_read;
      report_.chunks_bad += part.chunks_bad;
      report_.chunks_repaired += part.chunks_repaired;
      report_.extents_lost += part.extents_lost;
      report_.replaced_extents_lost += part.replaced_extents_lost;
      report_.extents_done++;
      for (auto& p : part.problems) report_.problems.push_back(std::move(p));
    }
  };
  size_t threads = options_.threads ? options_.threads : std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 4);
  std::vector<std::jthread> workers;
  for (size_t t = 1; t < std::min(threads, end - begin); t++) workers.emplace_back(work);
  work();
  workers.clear();  // joins
}

// Sleeps while reading is ahead of options_.rate, waking to notice a stop.
Result<RepairReport> Repairer::Run() {
  std::string cursor;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    auto saved = archive_.catalog().GetMeta(options_.rebuild ? kRebuildCursor : kScrubCursor);
    if (!saved.ok() && !saved.status().IsNotFound()) return saved.status();
    if (saved.ok()) cursor = *saved;
  }
  auto planned = PlanTasks(cursor);
  if (!planned.ok()) return planned.status();
  std::vector<Task> tasks = std::move(*planned);
  report_.finished = true;
  // A rebuild that could not repair an extent keeps its cursor before it: the next run retries
  // it. A scrub reports it (lost) and goes on: held there, it would never again check the
  // extents before it, a pass never ending.
  bool failures = false;
  BatchWrites writes;
  for (size_t begin = 0; begin < tasks.size();) {
    if (pace_.Over()) {
      report_.finished = false;
      break;
    }
    size_t end = begin;
    for (uint64_t bytes = 0; end < tasks.size() && bytes < options_.batch_bytes; end++) {
      const ExtentRecord& e = tasks[end].extent;
      bytes += e.redundancy.ChunkLength(e.payload_length) *
               (options_.rebuild ? ChunksNeeded(e.redundancy) : e.chunks.size());
    }
    RunBatch(tasks, begin, end, writes);
    if (!stop_error_.ok()) {  // what did get written is kept; the cursor stays where it was
      CAIRN_RETURN_IF_ERROR(Commit(writes, cursor));
      return stop_error_;
    }
    for (size_t i = begin; i < end && !failures; i++) {
      failures = options_.rebuild && tasks[i].failed;
      if (!failures) cursor = CursorAfter(tasks[i]);
    }
    CAIRN_RETURN_IF_ERROR(Commit(writes, cursor));
    begin = end;
    if (options_.progress && !options_.progress(report_)) {
      report_.finished = false;  // cancelled; the next run continues after this batch
      break;
    }
    pace_.Throttle(report_.bytes_read);
  }
  // A complete pass starts from the beginning next time.
  if (report_.finished && !failures) CAIRN_RETURN_IF_ERROR(Commit(writes, ""));
  return std::move(report_);
}

}  // namespace

Result<bool> ExtentStillCurrent(Archive& archive, const ExtentRecord& extent) {
  std::lock_guard lock(archive.catalog_mutex());
  auto now = archive.catalog().GetExtent(extent.id);
  if (!now.ok() && !now.status().IsNotFound()) return now.status();
  return now.ok() && now->chunks == extent.chunks;
}

Status ForgetRebuildProgress(Archive& archive) {
  {
    std::lock_guard lock(archive.catalog_mutex());
    CAIRN_RETURN_IF_ERROR(
        InTransaction(archive.catalog(), [&] { return archive.catalog().SetMeta(kRebuildCursor, ""); }));
  }
  return archive.CommitDurably();
}

Result<RepairReport> RepairArchive(Archive& archive, const RepairOptions& options) {
  RepairPace pace(options);  // one budget and one rate for all the phases
  RepairReport arrays;
  // A rebuild first fills the lonestar disks from their parity (the chunks of pool disks
  // come from other chunks); a scrub checks every chunk, then every parity relation, and
  // one that stopped during the parity goes on with it.
  if (options.rebuild) {
    CAIRN_RETURN_IF_ERROR(RebuildArrays(archive, options, pace, &arrays));
    pace.PhaseDone(arrays.bytes_read);
  } else {
    auto under_way = ParityScrubUnderWay(archive);
    if (!under_way.ok()) return under_way.status();
    if (*under_way) {
      Status checked = ScrubArrays(archive, options, pace, &arrays);
      if (!checked.ok()) {  // one that keeps failing there must not keep the next scrubs from the extents
        if (Status restarted = RestartParityScrub(archive); !restarted.ok()) {
          LogError("scrub: the parity check stays where it failed: {}", restarted.message());
        }
        return checked;
      }
      return arrays;
    }
  }
  auto report = Repairer(archive, options, pace).Run();
  if (!report.ok()) return report;
  if (!options.rebuild && report->finished) {
    pace.PhaseDone(report->bytes_read);
    CAIRN_RETURN_IF_ERROR(ScrubArrays(archive, options, pace, &arrays));
  }
  report->bytes_read += arrays.bytes_read;
  report->chunks_bad += arrays.chunks_bad;  // chunks in rebuilt bucket ranges that did not verify
  report->chunks_repaired += arrays.chunks_repaired;
  report->extents_lost += arrays.extents_lost;
  report->parity_bad += arrays.parity_bad;
  report->parity_repaired += arrays.parity_repaired;
  report->parity_buckets_rebuilt += arrays.parity_buckets_rebuilt;
  report->array_bytes_rebuilt += arrays.array_bytes_rebuilt;
  report->problems.insert(report->problems.end(), arrays.problems.begin(), arrays.problems.end());
  report->finished = report->finished && arrays.finished;
  if (options.rebuild) {  // a pool's chunks move off a missing disk; a bucket's data waits for its replacement
    for (const auto& [disk, why] : archive.missing_disks()) {
      if (archive.AwaitsRebuild(disk)) continue;  // replaced, its new disk missing: RebuildArrays says so
      if (LoneStarArray* array = archive.array_of(disk).first) {
        report->problems.push_back(fmt::format(
            "disk {} of lonestar group {} is out of service ({}): rebuild fills its replacement, and until then the "
            "group runs degraded (a bucket's data is read through its parity)",
            disk, array->name(), why));
      }
    }
  }
  return report;
}

std::string RepairSummary(const RepairReport& report, bool rebuild) {
  std::string arrays;
  if (report.array_bytes_rebuilt > 0) {
    arrays += fmt::format(", {} of lonestar disks rebuilt", FormatSize(report.array_bytes_rebuilt));
  }
  if (report.parity_bad > 0) {
    arrays += fmt::format(", {} lonestar range(s) whose parity did not add up: {} parity range(s) recomputed, {} "
                          "bucket range(s) rebuilt from parity, {} left alone",
                          report.parity_bad, report.parity_repaired - report.parity_buckets_rebuilt,
                          report.parity_buckets_rebuilt, report.parity_bad - report.parity_repaired);
  }
  return fmt::format("{}: {} of {} extents {}, {} read, {} bad chunk(s), {} repaired, {} extent(s) lost{}{}",
                     rebuild ? "rebuild" : "scrub", report.extents_done, report.extents_total,
                     rebuild ? "checked" : "verified", FormatSize(report.bytes_read), report.chunks_bad,
                     report.chunks_repaired, report.extents_lost, arrays,
                     report.finished ? "" : " (stopped early; run again to continue)");
}

std::string RepairReportLine(const RepairReport& r) {
  return fmt::format("report {} {} {} {} {} {} {} {} {} {} {}", r.extents_total, r.extents_done, r.bytes_read,
                     r.chunks_bad, r.chunks_repaired, r.extents_lost, r.finished ? 1 : 0, r.parity_bad,
                     r.parity_repaired, r.array_bytes_rebuilt, r.parity_buckets_rebuilt);
}

bool ParseRepairReportLine(const std::string& line, RepairReport* r) {
  unsigned long long total, done, bytes, bad, repaired, lost, parity_bad, parity_repaired, rebuilt;
  unsigned long long buckets_rebuilt = 0;  // stays 0 from a daemon older than that count
  int finished;
  int fields = std::sscanf(line.c_str(), "report %llu %llu %llu %llu %llu %llu %d %llu %llu %llu %llu", &total, &done,
                           &bytes, &bad, &repaired, &lost, &finished, &parity_bad, &parity_repaired, &rebuilt,
                           &buckets_rebuilt);
  if (fields != 10 && fields != 11) return false;
  *r = RepairReport{total, done, bytes, bad, repaired, lost, std::move(r->problems), finished != 0, parity_bad,
                    parity_repaired, rebuilt, buckets_rebuilt};
  return true;
}

}  // namespace cairn
