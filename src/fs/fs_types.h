// What the calls of Filesystem and its parts take and return: the caller's credentials, a
// setattr request, an open file, a directory entry, statfs numbers. No FUSE types.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "policy/write_plan.h"

namespace cairn {

// Who asks: the FUSE request's credentials.
struct Caller {
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t umask = 022;
  // Reads the caller's supplementary groups (a read of /proc: asked only where they matter);
  // unset: none.
  std::function<std::vector<uint32_t>()> supplementary_groups;

  // gid, then the supplementary groups.
  std::vector<uint32_t> groups() const {
    std::vector<uint32_t> all{gid};
    if (supplementary_groups) {
      for (uint32_t g : supplementary_groups()) {
        if (g != gid) all.push_back(g);
      }
    }
    return all;
  }
};

struct SetAttrRequest {
  std::optional<uint32_t> mode;
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::optional<uint64_t> size;
  std::optional<int64_t> atime_ns;  // kTimeNow for "now"
  std::optional<int64_t> mtime_ns;
  std::optional<int64_t> ctime_ns;
  static constexpr int64_t kTimeNow = INT64_MIN;
};

// One open file. Owned by the Filesystem between Open/Create and Release.
struct FileHandle {
  uint64_t ino = 0;
  bool writable = false;  // the cache file itself is taken from the staging cache's FdCache per call
  // The furthest any read through this handle got: a read that starts near it is taken as
  // sequential (FileData::Read).
  std::atomic<uint64_t> read_end{0};
  // Where its data goes and in how many copies, for the free-space check of its writes:
  // resolved at a write, again after any policy change (Catalog::policy_changes() then:
  // plan_at); null when it could not be (the persister reports that). Guarded by the file's
  // data lock.
  std::shared_ptr<const WritePlan> plan;
  uint64_t plan_at = 0;
};

struct DirEntry {
  uint64_t cookie = 0;
  std::string name;
  InodeRecord attr;
};

struct FsStats {
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
  uint64_t inodes = 0;
};

}  // namespace cairn
