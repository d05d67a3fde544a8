// The catalog lookups every part of the Filesystem makes, with POSIX errors: a missing
// inode, entry or directory is ENOENT (ENOTDIR for a file), while a failing query stays
// the error it is (EIO), never "no such file". Those given the Catalog REQUIRE the catalog
// mutex held.
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "archive/archive.h"
#include "catalog/catalog.h"

namespace cairn {

inline bool IsDir(const InodeRecord& r) { return S_ISDIR(r.mode); }

inline Result<InodeRecord> GetDir(Catalog& catalog, uint64_t ino) {
  auto dir = catalog.GetInode(ino);
  if (!dir.ok() && !dir.status().IsNotFound()) return dir.status();
  if (!dir.ok()) return Status::Posix(ENOENT, fmt::format("directory inode {} does not exist", ino));
  if (!IsDir(*dir)) return Status::Posix(ENOTDIR, fmt::format("inode {} is not a directory", ino));
  return dir;
}

inline Result<InodeRecord> GetInodeOrENOENT(Catalog& catalog, uint64_t ino) {
  auto inode = catalog.GetInode(ino);
  if (!inode.ok() && inode.status().IsNotFound()) return Status::Posix(ENOENT, fmt::format("inode {}", ino));
  return inode;
}

inline Result<uint64_t> LookupOrENOENT(Catalog& catalog, uint64_t parent, const std::string& name) {
  auto ino = catalog.Lookup(parent, name);
  if (!ino.ok() && ino.status().IsNotFound()) return Status::Posix(ENOENT, name);
  return ino;
}

// The value `found` holds, or none when it is NotFound; any other error stays an error.
template <typename T>
Result<std::optional<T>> IfFound(Result<T> found) {
  if (found.ok()) return std::optional<T>(std::move(*found));
  if (found.status().IsNotFound()) return std::optional<T>();
  return found.status();
}

// The segment size a file's staging cache is tracked in: its own once persisted, the
// archive's segment_size until then (its first persist decides, by its policy).
inline uint64_t SegmentSizeOf(const Archive& archive, const InodeRecord& inode) {
  return inode.segment_size ? inode.segment_size : archive.options().segment_size;
}

}  // namespace cairn
