// Recover rebuilds a lost or damaged catalog from the disks alone (cairn recover):
//  1. takes the archive lock, held to the end so no daemon opens a half-made archive;
//     refuses when ARCHIVE/catalog.db exists, unless forced: then the old catalog (with its
//     -wal and -shm) and the staging cache are kept aside as catalog.db.bak-TIME and
//     cache.bak-TIME, never deleted; a new, empty catalog takes its place;
//  2. scans every disk for extents (ScanDisks) and reads each one's payload through the
//     normal read path (chunks joined and verified; an extent with chunks not found is
//     written again whole from the others), then decodes its member table;
//  3. newest wins, by extent id (ids only grow): a file's metadata and names come from the
//     newest extent that holds or records any of its segments, each segment from the newest
//     extent holding it or recording it as a hole, each directory's metadata from the
//     newest record of its path;
//  4. writes directories, files, names, xattrs, segments, extents and layouts in one
//     transaction and makes it durable; ids seen on the disks are never handed out again.
// What it cannot recover is listed in the report (man/cairn.8 says what is out of reach).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cairn/status.h"

namespace cairn {

struct RecoverOptions {
  bool force = false;  // replace an existing catalog (kept aside)
  std::function<void(const std::string&)> progress;
};

struct RecoverReport {
  uint64_t chunks_found = 0;
  uint64_t extents_found = 0;       // complete extents
  uint64_t extents_used = 0;        // holding the newest version of a segment
  uint64_t files = 0;
  uint64_t directories = 0;         // besides the root
  uint64_t directories_guessed = 0;  // no metadata recorded: mode 0755, owner 0:0, time now
  uint64_t bytes = 0;               // of file data recovered
  std::string catalog_backup;       // where the old catalog went, if there was one
  std::string cache_backup;         // where the old staging cache went, if it held files
  std::vector<std::string> lost;    // what could not be recovered, one line each
  std::vector<std::string> notes;   // what was mended on the way (extents rewritten)
};

Result<RecoverReport> RecoverCatalog(const std::string& dir, const RecoverOptions& options);

}  // namespace cairn
