// Range checks for catalog rows, run where rows are loaded and before anything divides,
// allocates or loops by their fields: a damaged or hand-edited row is Corruption naming
// the table, the row, the field and its value (fsck reports it, the daemon answers EIO).
#pragma once

#include <cstdint>

#include "catalog/catalog.h"

namespace cairn {

// The largest file cairn stores (16 TiB, as ext4 with 4 KiB blocks); larger writes and
// truncates are EFBIG, and a larger inodes.size is damage.
constexpr uint64_t kMaxFileSize = 1ull << 44;
// The smallest segment_size cairn.conf accepts.
constexpr uint64_t kMinSegmentSize = 4096;

// size at most kMaxFileSize; segment_size 0 (never persisted) or kMinSegmentSize..kMaxSegmentSize.
Status CheckInodeRecord(const InodeRecord& inode);
// A segment of `inode`: the file has a segment size, the segment starts before the end of
// the file, holds at most what the file leaves for it (a dirty file: at most segment_size),
// and its bytes lie within the largest extent payload. The inode's own fields are
// CheckInodeRecord's business.
Status CheckSegmentRecord(const SegmentRecord& segment, const InodeRecord& inode);
// CheckInodeRecord, then the file's segment rows as a whole (Catalog::SummarizeSegments):
// none past the end of the file, none longer than segment_size or than the file leaves for
// the last one, and with `complete` (a clean, persisted file) every segment the size calls
// for. One aggregate query, however many segments the file has.
Status CheckSegmentSummary(const InodeRecord& inode, const SegmentSummary& segments, bool complete);
// A known kind, a valid redundancy (CheckRedundancy), payload_length at most
// kMaxStoredPayload and logical_length at most kMaxExtentPayload as its chain allows
// (CheckStoredLength), one chunk per chunk_count(), each block aligned and allocated as
// ExtentAllocation() says.
Status CheckExtentRecord(const ExtentRecord& extent);
// A policy stamp: 1..kMaxPolicyStamp printable characters.
Status CheckLayoutStamp(uint64_t id, std::string_view stamp);

}  // namespace cairn
