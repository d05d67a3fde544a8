#include "pipeline/segment_map_update.h"

#include "pipeline/segment_writer.h"

namespace cairn {

Status DropSegments(Archive& archive, uint64_t ino, const std::vector<SegmentRecord>& segments) {
  for (const SegmentRecord& segment : segments) {
    CAIRN_RETURN_IF_ERROR(archive.UnrefExtent(segment.referenced_extent()));
    CAIRN_RETURN_IF_ERROR(archive.catalog().DeleteSegment(ino, segment.index));
  }
  return Status::OK();
}

Status DropSegmentsFrom(Archive& archive, uint64_t ino, uint64_t first) {
  auto segments = archive.catalog().GetSegments(ino);
  if (!segments.ok()) return segments.status();
  std::erase_if(*segments, [first](const SegmentRecord& segment) { return segment.index < first; });
  return DropSegments(archive, ino, *segments);
}

Status SegmentMapUpdate::Put(const NewSegment& segment) {
  CAIRN_RETURN_IF_ERROR(archive_.catalog().PutSegment(PlacedSegment(
      segment.ino, segment.index, segment.hole, extents_[segment.extent].id, segment.offset, segment.length, cached_)));
  refs_[segment.extent]++;
  return Status::OK();
}

Status SegmentMapUpdate::Replace(const NewSegment& segment) {
  auto old = archive_.catalog().GetSegment(segment.ino, segment.index);
  if (!old.ok()) return old.status();
  if (*old) CAIRN_RETURN_IF_ERROR(archive_.UnrefExtent((*old)->referenced_extent()));
  return Put(segment);
}

Status SegmentMapUpdate::InsertReferenced() {
  for (size_t i = 0; i < extents_.size(); i++) {
    extents_[i].refs = refs_[i];
    if (refs_[i] > 0) CAIRN_RETURN_IF_ERROR(archive_.catalog().InsertExtent(extents_[i]));
  }
  return Status::OK();
}

Status SegmentMapUpdate::SetLayout(InodeRecord& inode, const WritePlan& plan) {
  auto layout = archive_.catalog().InternLayout(plan.policy_stamp);
  if (!layout.ok()) return layout.status();
  inode.segment_size = plan.segment_size;
  inode.layout_id = *layout;
  return Status::OK();
}

void SegmentMapUpdate::Finish(bool committed) {
  for (size_t i = 0; i < extents_.size(); i++) {
    if (!committed || refs_[i] == 0) archive_.extents().ReleaseUncommitted(extents_[i]);
  }
}

}  // namespace cairn
