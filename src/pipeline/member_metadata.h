// What a batch of extents records about its files in their member tables: each file's
// metadata and names, and the directories above them, read from the catalog at write time.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "backend/member_table.h"
#include "catalog/catalog.h"

namespace cairn {

constexpr size_t kMaxEntriesWithoutData = 1024;

struct DescribedInodes {
  std::map<uint64_t, MemberNode> nodes;                 // files and directories, without segments
  std::map<uint64_t, std::vector<uint64_t>> ancestors;  // file -> the directories above its names
  std::map<uint64_t, uint64_t> parents;                 // directory -> the directory holding it
  std::map<uint64_t, std::vector<uint64_t>> children;   // directory -> its entries without data
  size_t nested_entries = 0;                            // listed below those, against the limit
};

// The files `inos` (those deleted meanwhile are left out), their directories up to the
// root, and those directories' entries without data (symlinks, empty files, special files,
// subdirectories; the first kMaxEntriesWithoutData of each), and below those subdirectories
// the same, depth first, up to kMaxEntriesWithoutData entries in all (empty trees).
// REQUIRES: catalog mutex held.
Result<DescribedInodes> DescribeInodes(Catalog& catalog, const std::set<uint64_t>& inos);

// The member table of one extent holding `segments` (file, where its segment is) and
// recording `holes` (file, segment index), as runs. The entries without data of a
// directory go only into the first table that has the directory (`listed` remembers which
// did), so a batch records them once.
MemberTable MemberTableOf(const DescribedInodes& described,
                          const std::vector<std::pair<uint64_t, MemberSegment>>& segments,
                          const std::vector<std::pair<uint64_t, uint64_t>>& holes, std::set<uint64_t>& listed);

}  // namespace cairn
