// Changes to the segment map, the catalog rows that point each segment of a file at its
// data: dropping segments (truncate, delete, re-encode) and pointing segments at extents
// just written (persist, re-encode), with the extents' reference counts kept true.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "archive/archive.h"
#include "policy/write_plan.h"

namespace cairn {

// Removes the rows of `segments` of file `ino` and their references to their extents; an
// extent left without any is deleted, its space freed once that deletion is durable
// (Archive::FreeAfterDurableCommit). REQUIRES: catalog mutex held, inside a transaction.
Status DropSegments(Archive& archive, uint64_t ino, const std::vector<SegmentRecord>& segments);
// DropSegments of every segment of `ino` at index `first` or above.
// REQUIRES: catalog mutex held, inside a transaction.
Status DropSegmentsFrom(Archive& archive, uint64_t ino, uint64_t first);

// Where WriteSegments put a segment of a file.
struct NewSegment {
  uint64_t ino = 0;
  uint64_t index = 0;
  uint64_t length = 0;
  size_t extent = 0;    // index into the extents written: the data, or the record of the hole
  uint64_t offset = 0;  // of the data in that extent's logical payload
  bool hole = false;    // all zeros: no extent of its own
};

// SegmentMapUpdate points segments of files at extents just written (WriteSegments), inside
// one catalog transaction of its user (the persister, the reconciler), and counts the
// segments that reference each extent. After the transaction, Finish hands back the room of
// the extents the catalog does not keep. Not thread-safe.
// REQUIRES: catalog mutex held from the first call through SetLayout; NOT held by Finish
// (it discards, which may wait for disks).
class SegmentMapUpdate {
 public:
  // `extents`: written and synced, not yet in the catalog; InsertReferenced sets their
  // references. `cached`: the new segments' data is in the staging cache too.
  SegmentMapUpdate(Archive& archive, std::vector<ExtentRecord>& extents, bool cached)
      : archive_(archive), extents_(extents), refs_(extents.size(), 0), cached_(cached) {}

  // Records `segment` where its file has no row (its old segments were dropped).
  Status Put(const NewSegment& segment);
  // Records `segment` over the row at its index, if any, whose extent loses a reference.
  Status Replace(const NewSegment& segment);
  // Inserts each extent that recorded segments reference, with that many references.
  // Once, after the last Put or Replace.
  Status InsertReferenced();
  // `inode` takes the segment size and layout (the interned policy stamp) of `plan`, which
  // its new segments were written with; the caller writes the record.
  Status SetLayout(InodeRecord& inode, const WritePlan& plan);
  // After the transaction committed (true) or rolled back: hands back the room of the
  // extents no recorded segment references, or of all of them.
  void Finish(bool committed);

 private:
  Archive& archive_;
  std::vector<ExtentRecord>& extents_;
  std::vector<uint64_t> refs_;  // by extent: segments recorded that reference it
  const bool cached_;
};

}  // namespace cairn
