// The lonestar part of cairn rebuild and cairn scrub: rebuilding the defect ranges of each
// group's disks from their parity groups (replaced disks, ranges a crash left undefined, all
// parity after a lost journal) and checking that every parity group XORs to zero, rewriting
// where it does not the one disk wrong there (a bucket from its parity, a parity disk from
// its group) and leaving alone what no single disk explains. Both resume where they stopped:
// the defects live in each group's journal, the parity check's position in the catalog.
#pragma once

#include "archive/archive.h"
#include "maintenance/repair.h"
#include "maintenance/repair_pace.h"

namespace cairn {

// Rebuilds, 64 MiB at a time, every defect range of a disk that is there; report->finished
// once none is left. The bytes rebuilt count as read. Then reads back every chunk in the
// bucket ranges it rebuilt: one that fails its checks (a member of its parity group is
// damaged there) is rewritten from the grid's other ways (chunks_bad, chunks_repaired), or
// counted in extents_lost with a problem.
Status RebuildArrays(Archive& archive, const RepairOptions& options, RepairPace& pace, RepairReport* report);
// Checks every parity relation of every group, repairing the disk wrong where one fails and a
// single disk explains it (reported as problems, counted in parity_bad, parity_repaired and
// parity_buckets_rebuilt). A check begun is recorded at once, so that a scrub out of time or
// stopped goes on with it next time (ParityScrubUnderWay) rather than with the extents.
Status ScrubArrays(Archive& archive, const RepairOptions& options, RepairPace& pace, RepairReport* report);
// Whether a parity check ScrubArrays began has not gone through every group yet.
Result<bool> ParityScrubUnderWay(Archive& archive);
// Forgets where the parity check is: the next scrub begins with the extents.
Status RestartParityScrub(Archive& archive);

}  // namespace cairn
