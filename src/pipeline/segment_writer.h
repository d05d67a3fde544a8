// Writes a batch of file segments as extents: each large segment alone, small ones
// packed together (one pack per write plan, so its stamp is true for every member, and per
// file when the plan encrypts: an encrypted extent holds one file's data, sealed with its key),
// all-zero ones as holes, recorded (no bytes) in the member table of their plan's pack, so
// recover knows they are newer than the data they replace; each extent's logical payload
// goes through its plan's transform chain on the way (codec/); then syncs the disks it
// wrote. Committing the result to the catalog, or handing the space back, is the caller's
// (persister, reconciler: SegmentMapUpdate in segment_map_update.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "archive/archive.h"
#include "policy/write_plan.h"

namespace cairn {

// One segment's bytes and the policy they are written with.
struct SegmentPiece {
  uint64_t ino = 0;
  uint64_t index = 0;
  uint64_t segment_size = 0;
  std::shared_ptr<const WritePlan> plan;
  std::vector<uint8_t> data;
  // A segment known to be all zeros without reading it (a hole in the staging cache)
  // leaves `data` empty and gives its length here; it is written as a hole.
  uint64_t hole_length = 0;
  // The bytes were read through the data key the file had (a re-encode): they are sealed
  // with that key or not at all, never with a new one (a crypto-erase since is final).
  bool had_data_key = false;

  uint64_t length() const { return data.empty() ? hole_length : data.size(); }
};

struct WrittenSegments {
  struct Placement {
    size_t piece;     // index into the pieces given
    size_t extent;    // index into `extents`: the piece's data, or the record of its hole
    uint64_t offset;  // of the piece in the extent's logical payload
    bool hole;        // all zeros: stored as no extent, referencing the one recording it
  };
  std::vector<ExtentRecord> extents;  // written and synced, not yet in the catalog
  std::vector<Placement> placements;  // one per piece written (skipped ones are not)
  // Files left out of the batch, with why: their data key cannot be had now (its master key
  // is not in the keystore, its key command fails), or their group has no room for an
  // extent of theirs as their plan asks. The other files' pieces are written; what was
  // written of theirs is in `extents` and `placements` too, for the caller not to commit.
  std::map<uint64_t, Status> left_out;
};

// The catalog row of a piece written to extent `extent_id` (for a hole: the extent
// recording it) at `offset`.
inline SegmentRecord PlacedSegment(uint64_t ino, uint64_t index, bool hole, uint64_t extent_id, uint64_t offset,
                                   uint64_t length, bool cached) {
  if (hole) return {ino, index, kHoleExtent, 0, length, cached, extent_id};
  return {ino, index, extent_id, offset, length, cached};
}

// Whether `plan` can be written: its group is in the archive (cairn.conf may have dropped it)
// and takes its redundancy (a parent's or a rule's placement may send rs-K-M to a lonestar
// group). WriteSegments would fail the whole batch on it.
Status CheckPlanFits(const Archive& archive, const WritePlan& plan);

// The write plan of `inode`: its layout's (kept until the reconciler changes it), or, before
// its first persist, its policy's; refused when it cannot be written (CheckPlanFits).
// REQUIRES: the catalog mutex held.
Result<std::shared_ptr<const WritePlan>> PlanOfInode(Archive& archive, const InodeRecord& inode);

// Whether the group `plan` sends data to (the first group without a plan) can take
// `bytes` more of it: each copy or parity chunk, in chunks as large as a whole segment's
// (room too small for one counts for nothing: a segment's chunk is never split).
bool GroupHasRoomFor(const Archive& archive, const WritePlan* plan, uint64_t bytes, uint64_t segment_size);

// `skip(piece)` pieces are left out (the persister's markers), and so are the pieces of files
// in `left_out`. On failure, everything written is released again. Thread-safe.
Result<WrittenSegments> WriteSegments(Archive& archive, const std::vector<SegmentPiece>& pieces,
                                      const std::function<bool(const SegmentPiece&)>& skip = {});

}  // namespace cairn
