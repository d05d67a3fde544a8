// The member table (format v3 and later): the metadata of every file whose data an extent holds, and
// of those files' directories, at the end of the extent's payload, so `cairn recover` can
// rebuild a lost catalog from the disks alone. Layout in man/cairn-format.5.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cairn/status.h"

namespace cairn {

constexpr char kMemberTableMagic[8] = {'C', 'A', 'I', 'R', 'N', 'M', 'B', 'R'};

// Where segment `index` of the file lies in the extent's payload.
struct MemberSegment {
  uint64_t index = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  bool operator==(const MemberSegment&) const = default;
};

// Segments `first` to `first + count - 1` of the file are holes (all zeros, no extent) from
// this extent's writing on: a newer record than any data an older extent holds for them.
struct MemberHoleRun {
  uint64_t first = 0;
  uint64_t count = 0;
  bool operator==(const MemberHoleRun&) const = default;
};

// One inode as the catalog had it when the extent was written: a file with segments in the
// extent, a directory above such a file, or an entry of such a directory that has no data
// of its own (subdirectory, symlink, special file, empty file; no segments).
struct MemberNode {
  uint64_t ino = 0;
  uint32_t mode = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size = 0;
  uint64_t rdev = 0;
  int64_t atime_ns = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t generation = 0;         // the catalog's epoch when the inode was made (FUSE generation)
  uint64_t segment_size = 0;       // files: how the file is cut into segments
  std::string symlink;             // target, for symlinks
  // Directories: more entries without data than the table could take (see member_metadata.h).
  bool entries_truncated = false;
  std::vector<std::string> paths;  // every name (hard links), relative to the root, no leading '/'
  std::vector<std::pair<std::string, std::string>> xattrs;  // all of them, by name
  std::vector<MemberSegment> segments;
  std::vector<MemberHoleRun> holes;  // ascending, not overlapping
  bool operator==(const MemberNode&) const = default;
};

struct MemberTable {
  std::vector<MemberNode> nodes;
  bool operator==(const MemberTable&) const = default;
};

// Member tables of extents of this format version and later record generations and hole runs.
constexpr uint32_t kFirstFormatWithHoleRuns = 4;

// Encodes in the layout of the current format version.
std::vector<uint8_t> EncodeMemberTable(const MemberTable& table);
// Decodes the table of an extent of `format_version` (3 or later). Checks magic, every
// length against the bytes there are, and the CRC; `where` names the extent in messages.
Result<MemberTable> DecodeMemberTable(std::span<const uint8_t> bytes, uint32_t format_version,
                                      const std::string& where);

}  // namespace cairn
