// Repair recreates chunks of extents from their other chunks: scrub reads and verifies
// every chunk and rewrites the bad ones; rebuild recreates the chunks of replaced and
// missing disks. It runs on one thread per core, offline (cairn scrub, cairn rebuild) or in
// the daemon of a mounted archive, and an interrupted run continues after its last batch.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "archive/archive.h"

namespace cairn {

struct RepairReport {
  uint64_t extents_total = 0;    // scrub: all; rebuild: those with a chunk to recreate
  uint64_t extents_done = 0;     // including those an interrupted run had done
  uint64_t bytes_read = 0;       // of chunks read and verified
  uint64_t chunks_bad = 0;       // damaged, unreadable, missing or on a replaced disk
  uint64_t chunks_repaired = 0;  // rewritten in place or on another disk
  uint64_t extents_lost = 0;     // too few good chunks: listed in `problems`
  std::vector<std::string> problems;
  bool finished = false;         // false when it stopped early (budget, cancelled, unmounting)
  uint64_t parity_bad = 0;       // lonestar ranges whose parity groups did not XOR to zero (scrub)
  uint64_t parity_repaired = 0;  // of those, rewritten on the one disk wrong there from its group
  uint64_t array_bytes_rebuilt = 0;  // of lonestar disks, rebuilt from their parity groups (rebuild)
  uint64_t parity_buckets_rebuilt = 0;  // of parity_repaired, bucket ranges rebuilt from their parity
  // Of extents_lost, those with a chunk on a replaced disk: while there are any, that disk is
  // not filled. (Not in the report line: the process that rebuilt decides.)
  uint64_t replaced_extents_lost = 0;
};

struct RepairOptions {
  // false: scrub (verify every chunk); true: rebuild (recreate the chunks on replaced disks
  // awaiting a rebuild and on missing disks, without reading those).
  bool rebuild = false;
  int64_t budget_ns = 0;  // scrub stops after this long and resumes there next time; 0: no limit
  uint64_t rate = 0;      // bytes per second to read; 0: unlimited
  // Chunk bytes read between commits (sync, moved chunks recorded, cursor saved, progress).
  uint64_t batch_bytes = 64 << 20;
  size_t threads = 0;  // 0: one per core, at most 4
  std::function<bool(const RepairReport&)> progress;  // after every batch; false cancels
  std::function<bool()> should_stop;  // polled between batches and while throttled; true stops
};

// A rebuild takes the extents in the order of their lost chunks' offsets, the order the chunks
// were allocated, so that each surviving disk is read front to back; it reads only the chunks
// it needs and checks every recreated chunk against its CRC and digest before writing it.
// Safe beside a mounted archive's other work: a chunk is rewritten only while the catalog
// still has it there, and moved chunks are recorded only if their extent is unchanged.
// REQUIRES: the archive is opened with lock (degraded if disks are missing).
Result<RepairReport> RepairArchive(Archive& archive, const RepairOptions& options);

// Forgets where an interrupted rebuild stopped, for a disk replaced since: the new disk holds
// none of what that run rebuilt, whatever path it has. REQUIRES: the archive opened with lock.
Status ForgetRebuildProgress(Archive& archive);

// Whether the catalog still has `extent` with its chunks where they were (a mounted archive
// may delete or move it while a repair reads it); a failing query is an error.
Result<bool> ExtentStillCurrent(Archive& archive, const ExtentRecord& extent);

// The summary of a finished run as cairn rebuild / scrub prints it and the daemon logs it:
// "rebuild: 3 of 3 extents checked, 12.0 MiB read, ..." (lonestar parts only when there are any).
std::string RepairSummary(const RepairReport& report, bool rebuild);

// A report as one line of text and back (the control socket carries it; problems go apart).
std::string RepairReportLine(const RepairReport& report);
bool ParseRepairReportLine(const std::string& line, RepairReport* report);

}  // namespace cairn
