#include "catalog/record_checks.h"

#include <sys/stat.h>

#include <algorithm>

#include <fmt/format.h>

namespace cairn {
namespace {

template <typename... Args>
Status Bad(fmt::format_string<Args...> format, Args&&... args) {
  return Status::Corruption("catalog: " + fmt::format(format, std::forward<Args>(args)...));
}

// The bytes segment `index` may hold. A dirty file may still have the rows of its longer
// old version (truncated, not yet persisted again): its segments are only bounded by
// segment_size. REQUIRES: index lies within the file.
uint64_t RoomFor(const InodeRecord& inode, uint64_t index) {
  if (inode.dirty) return inode.segment_size;
  return std::min(inode.segment_size, inode.size - index * inode.segment_size);
}

// The segments a file of inode.size bytes has. REQUIRES: inode.segment_size != 0.
uint64_t SegmentCount(const InodeRecord& inode) {
  return inode.size / inode.segment_size + (inode.size % inode.segment_size != 0);
}

}  // namespace

Status CheckInodeRecord(const InodeRecord& r) {
  if (r.size > kMaxFileSize) {
    return Bad("inodes row {}: size {} is above the largest file cairn stores ({} bytes)", r.ino, r.size,
               kMaxFileSize);
  }
  if (r.segment_size != 0 && (r.segment_size < kMinSegmentSize || r.segment_size > kMaxSegmentSize)) {
    return Bad("inodes row {}: segment_size {} is out of range (0, or {}..{})", r.ino, r.segment_size,
               kMinSegmentSize, kMaxSegmentSize);
  }
  return Status::OK();
}

Status CheckSegmentRecord(const SegmentRecord& s, const InodeRecord& inode) {
  uint64_t segment_size = inode.segment_size;
  if (!S_ISREG(inode.mode) || segment_size == 0) {
    return Bad("segments row ({}, {}): inode {} has segments but is not a persisted regular file", s.ino, s.index,
               s.ino);
  }
  if (s.index >= SegmentCount(inode)) {
    return Bad("segments row ({}, {}): inode {}: segment {} lies past the end of the file ({} bytes)", s.ino, s.index,
               s.ino, s.index, inode.size);
  }
  uint64_t room = RoomFor(inode, s.index);
  if (s.length > room) {
    return Bad("segments row ({}, {}): inode {}: segment {} is {} bytes, more than the file leaves for it ({} of "
               "segment_size {})",
               s.ino, s.index, s.ino, s.index, s.length, room, segment_size);
  }
  if (s.length > kMaxExtentPayload || s.extent_offset > kMaxExtentPayload - s.length) {
    return Bad("segments row ({}, {}): extent_offset {} is beyond the largest extent payload ({} bytes)", s.ino,
               s.index, s.extent_offset, kMaxExtentPayload);
  }
  return Status::OK();
}

Status CheckSegmentSummary(const InodeRecord& inode, const SegmentSummary& segments, bool complete) {
  CAIRN_RETURN_IF_ERROR(CheckInodeRecord(inode));
  if (segments.count == 0) return Status::OK();
  uint64_t segment_size = inode.segment_size;
  if (!S_ISREG(inode.mode) || segment_size == 0) {
    return Bad("segments of inode {}: {} rows, but it is not a persisted regular file", inode.ino, segments.count);
  }
  if (segments.negative > 0) {
    return Bad("segments of inode {}: {} rows with a negative idx, length or extent_offset", inode.ino,
               segments.negative);
  }
  uint64_t want = SegmentCount(inode);
  if (segments.last_index >= want) {
    return Bad("segments row ({}, {}): inode {}: segment {} lies past the end of the file ({} bytes)", inode.ino,
               segments.last_index, inode.ino, segments.last_index, inode.size);
  }
  if (segments.max_length > segment_size) {
    return Bad("segments of inode {}: a segment of {} bytes is longer than segment_size {}", inode.ino,
               segments.max_length, segment_size);
  }
  uint64_t room = RoomFor(inode, segments.last_index);
  if (segments.last_length > room) {
    return Bad("segments row ({}, {}): inode {}: segment {} is {} bytes, more than the file leaves for it ({})",
               inode.ino, segments.last_index, inode.ino, segments.last_index, segments.last_length, room);
  }
  if (segments.max_extent_offset > kMaxExtentPayload) {
    return Bad("segments of inode {}: extent_offset {} is beyond the largest extent payload ({} bytes)", inode.ino,
               segments.max_extent_offset, kMaxExtentPayload);
  }
  if (complete && segments.count != want) {
    return Bad("inodes row {}: a clean file of {} bytes has {} of {} segments", inode.ino, inode.size, segments.count,
               want);
  }
  return Status::OK();
}

Status CheckExtentRecord(const ExtentRecord& e) {
  if (!e.undecodable.empty()) return Bad("extents row {}: {}", e.id, e.undecodable);
  if (e.kind != static_cast<int>(ExtentKind::kFileSegment) && e.kind != static_cast<int>(ExtentKind::kPack)) {
    return Bad("extents row {}: kind {} is unknown (1 segment, 2 pack)", e.id, e.kind);
  }
  Status redundancy = CheckRedundancy(e.redundancy);
  if (!redundancy.ok()) return Bad("extents row {}: {}", e.id, redundancy.message());
  if (e.payload_length > kMaxStoredPayload) {
    return Bad("extents row {}: payload_length {} is above the maximum of {}", e.id, e.payload_length,
               kMaxStoredPayload);
  }
  if (e.logical_length > kMaxExtentPayload) {
    return Bad("extents row {}: logical_length {} is above the maximum of {}", e.id, e.logical_length,
               kMaxExtentPayload);
  }
  if (e.chain_stamp.size() > kMaxChainStamp) {
    return Bad("extents row {}: chain of {} bytes (at most {})", e.id, e.chain_stamp.size(), kMaxChainStamp);
  }
  Status lengths = CheckStoredLength(e.payload_length, e.logical_length, e.chain_stamp,
                                     fmt::format("catalog: extents row {}", e.id));
  if (!lengths.ok()) return lengths;
  if (e.chunks.size() != e.redundancy.chunk_count()) {
    return Bad("extents row {}: {} chunks recorded, its redundancy needs {}", e.id, e.chunks.size(),
               e.redundancy.chunk_count());
  }
  uint64_t want = ExtentAllocation(e.redundancy.ChunkLength(e.payload_length), e.redundancy.idr_scramble);
  for (size_t i = 0; i < e.chunks.size(); i++) {
    const ChunkPlacement& c = e.chunks[i];
    if (c.offset < kBlockSize || c.offset % kBlockSize != 0) {
      return Bad("extents row {}: chunk {} at offset {} on disk {} is not block aligned after the superblock", e.id,
                 i, c.offset, c.disk);
    }
    if (c.alloc_length != want) {
      return Bad("extents row {}: chunk {} allocated {} bytes for a {}-byte payload ({} expected)", e.id, i,
                 c.alloc_length, e.payload_length, want);
    }
  }
  return Status::OK();
}

Status CheckLayoutStamp(uint64_t id, std::string_view stamp) {
  if (stamp.empty() || stamp.size() > kMaxPolicyStamp) {
    return Bad("layouts row {}: stamp of {} bytes (1..{} allowed)", id, stamp.size(), kMaxPolicyStamp);
  }
  auto bad = std::find_if(stamp.begin(), stamp.end(), [](char c) { return c < 0x20 || c > 0x7e; });
  if (bad != stamp.end()) {
    return Bad("layouts row {}: stamp has byte 0x{:02x} at {} (printable ASCII only)", id,
               static_cast<uint8_t>(*bad), bad - stamp.begin());
  }
  return Status::OK();
}

}  // namespace cairn
