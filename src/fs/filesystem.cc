#include "fs/filesystem.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <cerrno>
#include <ctime>

#include <sstream>

#include <fmt/format.h>

#include "catalog/record_checks.h"
#include "catalog/tree_walk.h"
#include "fs/posix_acl.h"
#include "fs/xattr_namespace.h"
#include "pipeline/segment_map_update.h"
#include "policy/resolver.h"
#include "policy/vocabulary.h"
#include "util/clock.h"
#include "util/log.h"

namespace cairn {
namespace {

bool IsDir(const InodeRecord& r) { return S_ISDIR(r.mode); }

Result<InodeRecord> GetDir(Catalog& catalog, uint64_t ino) {
  auto dir = catalog.GetInode(ino);
  if (!dir.ok() && !dir.status().IsNotFound()) return dir.status();
  if (!dir.ok()) return Status::Posix(ENOENT, fmt::format("directory inode {} does not exist", ino));
  if (!IsDir(*dir)) return Status::Posix(ENOTDIR, fmt::format("inode {} is not a directory", ino));
  return dir;
}

// A missing inode is ENOENT; a failing query stays the error it is (EIO), never "no such file".
Result<InodeRecord> GetInodeOrENOENT(Catalog& catalog, uint64_t ino) {
  auto inode = catalog.GetInode(ino);
  if (!inode.ok() && inode.status().IsNotFound()) return Status::Posix(ENOENT, fmt::format("inode {}", ino));
  return inode;
}

constexpr size_t kWalkStep = 256;  // inodes an admin walk looks at per hold of the catalog mutex

Result<uint64_t> LookupOrENOENT(Catalog& catalog, uint64_t parent, const std::string& name) {
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

// EEXIST when `parent` has an entry `name`; a failing lookup is an error, never "absent".
Status RefuseExisting(Catalog& catalog, uint64_t parent, const std::string& name) {
  auto existing = IfFound(catalog.Lookup(parent, name));
  if (!existing.ok()) return existing.status();
  return *existing ? Status::Posix(EEXIST, name) : Status::OK();
}

// ENOTEMPTY when directory `dir` has entries; a failing query is an error too, never "empty".
Status RefuseNonEmpty(Catalog& catalog, uint64_t dir, const std::string& name) {
  auto has_entries = catalog.HasEntries(dir);
  if (!has_entries.ok()) return has_entries.status();
  return *has_entries ? Status::Posix(ENOTEMPTY, name) : Status::OK();
}

}  // namespace

Filesystem::Filesystem(Archive& archive)
    : archive_(archive),
      store_(archive, archive.options().read_buffer_segments),
      persister_(archive, state_, store_),
      reconciler_(archive, state_, store_) {
  persister_.SetAfterBatch([this] { EvictOverBudget(); });
}

Filesystem::~Filesystem() = default;

uint64_t Filesystem::SegmentSizeOf(const InodeRecord& inode) const {
  return inode.segment_size ? inode.segment_size : archive_.options().segment_size;
}

Status Filesystem::CheckName(const std::string& name) const {
  if (name.empty() || name.size() > 255) {
    return Status::Posix(ENAMETOOLONG, fmt::format("a name is 1..255 bytes, not {}", name.size()));
  }
  if (name.find('/') != std::string::npos) return Status::Posix(EINVAL, "name contains '/'");
  return Status::OK();
}

Status Filesystem::Recover() {
  std::vector<std::pair<int64_t, std::pair<uint64_t, uint64_t>>> cached;  // mtime -> (ino, bytes)
  Archive::PendingSync pending;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    Catalog& catalog = archive_.catalog();
    // Files unlinked while open when the daemon stopped: nothing can reach them now.
    auto orphans = catalog.InodesWhere("nlink = 0 AND ino != 1");
    if (!orphans.ok()) return orphans.status();
    for (uint64_t ino : *orphans) CAIRN_RETURN_IF_ERROR(MaybeDelete(ino));
    // Dirty files, and files whose data never reached the disks (their creation was
    // committed but not the dirty mark): the staging cache holds their only copy.
    std::string incomplete = fmt::format(
        "dirty = 1 OR (mode & {} = {} AND size > 0 AND (size + COALESCE(NULLIF(segment_size, 0), {}) - 1) / "
        "COALESCE(NULLIF(segment_size, 0), {}) > (SELECT COUNT(*) FROM segments s WHERE s.ino = inodes.ino))",
        S_IFMT, S_IFREG, archive_.options().segment_size, archive_.options().segment_size);
    auto unpersisted = catalog.InodesWhere(incomplete.c_str());
    if (!unpersisted.ok()) return unpersisted.status();
    for (uint64_t ino : *unpersisted) {
      auto inode = catalog.GetInode(ino);
      auto segments = catalog.SummarizeSegments(ino);
      Status valid = !inode.ok()      ? inode.status()
                     : !segments.ok() ? segments.status()
                                      : CheckSegmentSummary(*inode, *segments, false);
      if (!valid.ok() && !valid.IsCorruption()) return valid;  // a failing query: not a damaged row
      if (!valid.ok()) {  // persisting it would loop or allocate by damaged sizes, or write zeros over data
        LogError("inode {} is left unpersisted, its catalog rows are damaged: {} (see cairn fsck)", ino,
                 valid.message());
        continue;
      }
      state_.dirty[ino].all_cached = true;
      state_.persist_queue[ino] = 0;
    }
    Status lookup;  // a failing query must not remove the cache's copy of a live file
    archive_.cache().ForEach([&](uint64_t ino, uint64_t bytes, int64_t mtime) {
      auto inode = catalog.GetInode(ino);
      if (!inode.ok() && !inode.status().IsNotFound()) {
        if (lookup.ok()) lookup = inode.status();
      } else if (!inode.ok()) {
        Status removed = archive_.cache().Remove(ino);
        if (!removed.ok()) LogError("staging cache: {}", removed.message());
      } else if (!state_.dirty.contains(ino)) {
        cached.push_back({mtime, {ino, bytes}});
      }
    });
    CAIRN_RETURN_IF_ERROR(lookup);
    std::sort(cached.begin(), cached.end());
    for (const auto& [mtime, entry] : cached) state_.TouchCached(entry.first, entry.second);
    CAIRN_RETURN_IF_ERROR(archive_.Commit(Archive::SyncWhen::kAlways, &pending));
    if (!state_.dirty.empty()) LogInfo("{} file(s) left dirty by the last run will be persisted", state_.dirty.size());
  }
  return archive_.MakeDurable(std::move(pending));
}

Status Filesystem::StartBackground() {
  {
    std::lock_guard lock(archive_.catalog_mutex());
    CAIRN_RETURN_IF_ERROR(archive_.catalog().StartCheckpoints());
  }
  persister_.Start();
  reconciler_.Start();
  return Status::OK();
}

Status Filesystem::Stop() {
  reconciler_.Stop();
  Status st = persister_.Stop();
  Status durable = archive_.CommitDurably();
  return st.ok() ? durable : st;
}

Result<InodeRecord> Filesystem::Lookup(uint64_t parent, const std::string& name) {
  CAIRN_RETURN_IF_ERROR(CheckName(name));
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  auto dir = GetDir(catalog, parent);
  if (!dir.ok()) return dir.status();
  uint64_t ino;
  if (name == ".") {
    ino = parent;
  } else if (name == "..") {
    auto up = catalog.ParentOf(parent);
    if (!up.ok()) return up.status();
    ino = *up;
  } else {
    auto found = LookupOrENOENT(catalog, parent, name);
    if (!found.ok()) return found.status();
    ino = *found;
  }
  auto inode = catalog.GetInode(ino);
  if (!inode.ok()) return inode.status();
  AddLookup(ino);
  return inode;
}

void Filesystem::Forget(uint64_t ino, uint64_t count) {
  std::lock_guard lock(archive_.catalog_mutex());
  auto it = state_.live.find(ino);
  if (it == state_.live.end()) return;
  it->second.nlookup -= std::min(count, it->second.nlookup);
  if (it->second.nlookup == 0 && it->second.nopen == 0) {
    state_.live.erase(it);
    Status st = MaybeDelete(ino);
    if (!st.ok()) LogError("inode {}: cannot free: {}", ino, st.message());
  }
}

Result<InodeRecord> Filesystem::GetAttr(uint64_t ino) {
  std::lock_guard lock(archive_.catalog_mutex());
  return GetInodeOrENOENT(archive_.catalog(), ino);
}

Status Filesystem::MaybeDelete(uint64_t ino) {
  Catalog& catalog = archive_.catalog();
  auto inode = catalog.GetInode(ino);
  if (!inode.ok() || inode->nlink > 0 || ino == kRootInode) return Status::OK();
  auto live = state_.live.find(ino);
  if (live != state_.live.end() && (live->second.nlookup > 0 || live->second.nopen > 0)) return Status::OK();
  CAIRN_RETURN_IF_ERROR(InTransaction(catalog, [&] {
    CAIRN_RETURN_IF_ERROR(DropSegmentsFrom(archive_, ino, 0));
    return catalog.DeleteInode(ino);
  }));
  state_.EraseDirty(ino);
  state_.persist_queue.erase(ino);
  state_.DropCached(ino);
  archive_.RemoveCacheAfterFlush(ino);
  return Status::OK();
}

Status Filesystem::DropLink(InodeRecord& inode, int64_t now) {
  inode.nlink = IsDir(inode) ? 0 : inode.nlink - std::min<uint64_t>(1, inode.nlink);
  inode.ctime_ns = now;
  CAIRN_RETURN_IF_ERROR(archive_.catalog().UpdateInode(inode));
  // The name may have taken a lock or pin with it: the remaining names' policy may differ.
  if (inode.nlink > 0 && inode.layout_id != 0) return archive_.catalog().QueuePolicyCheck(inode.ino);
  return Status::OK();
}

Result<InodeRecord> Filesystem::MakeNode(uint64_t parent, const std::string& name, uint32_t mode, uint64_t rdev,
                                         const Caller& caller, const std::string& target) {
  CAIRN_RETURN_IF_ERROR(CheckName(name));
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  InodeRecord node;
  Status st = InTransaction(catalog, [&]() -> Status {
    auto dir = GetDir(catalog, parent);
    if (!dir.ok()) return dir.status();
    CAIRN_RETURN_IF_ERROR(RefuseExisting(catalog, parent, name));
    int64_t now = NowNs();
    node.mode = mode;
    node.uid = caller.uid;
    node.gid = caller.gid;
    node.rdev = rdev;
    node.nlink = S_ISDIR(mode) ? 2 : 1;
    node.atime_ns = node.mtime_ns = node.ctime_ns = now;
    node.symlink = target;
    if (S_ISLNK(mode)) {
      node.mode = S_IFLNK | 0777;
      node.size = target.size();
    }
    if (dir->mode & S_ISGID) {  // BSD group semantics for setgid directories
      node.gid = dir->gid;
      if (S_ISDIR(mode)) node.mode |= S_ISGID;
    }
    std::vector<uint8_t> access_acl;
    auto default_acl = IfFound(catalog.GetXattr(parent, kAclDefaultXattr));
    if (!default_acl.ok()) return default_acl.status();
    if (!S_ISLNK(mode)) {
      uint32_t perms = node.mode & 07777;
      if (*default_acl && (access_acl = **default_acl, AclApplyCreateMode(access_acl, &perms))) {
        node.mode = (node.mode & S_IFMT) | perms;
      } else {
        access_acl.clear();
        node.mode &= ~(caller.umask & 0777);
      }
    }
    auto ino = catalog.InsertInode(node);
    if (!ino.ok()) return ino.status();
    node.ino = *ino;
    CAIRN_RETURN_IF_ERROR(catalog.InsertEntry(parent, name, node.ino));
    if (!access_acl.empty() && !AclIsMinimal(access_acl)) {
      CAIRN_RETURN_IF_ERROR(catalog.SetXattr(node.ino, kAclAccessXattr, access_acl));
    }
    if (!access_acl.empty() && S_ISDIR(mode)) {
      CAIRN_RETURN_IF_ERROR(catalog.SetXattr(node.ino, kAclDefaultXattr, **default_acl));
    }
    if (S_ISDIR(mode)) dir->nlink++;
    dir->mtime_ns = dir->ctime_ns = now;
    return catalog.UpdateInode(*dir);
  });
  if (!st.ok()) return st;
  AddLookup(node.ino);
  return node;
}

Result<InodeRecord> Filesystem::Link(uint64_t ino, uint64_t new_parent, const std::string& new_name) {
  CAIRN_RETURN_IF_ERROR(CheckName(new_name));
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  InodeRecord inode;
  Status st = InTransaction(catalog, [&]() -> Status {
    auto record = GetInodeOrENOENT(catalog, ino);
    if (!record.ok()) return record.status();
    inode = *record;
    if (IsDir(inode)) return Status::Posix(EPERM, "hard links to directories are not allowed");
    auto dir = GetDir(catalog, new_parent);
    if (!dir.ok()) return dir.status();
    CAIRN_RETURN_IF_ERROR(RefuseExisting(catalog, new_parent, new_name));
    int64_t now = NowNs();
    CAIRN_RETURN_IF_ERROR(catalog.InsertEntry(new_parent, new_name, ino));
    inode.nlink++;
    inode.ctime_ns = now;
    CAIRN_RETURN_IF_ERROR(catalog.UpdateInode(inode));
    // Locks and pins above every name apply: the new name may change the policy.
    if (inode.layout_id != 0) CAIRN_RETURN_IF_ERROR(catalog.QueuePolicyCheck(ino));
    dir->mtime_ns = dir->ctime_ns = now;
    return catalog.UpdateInode(*dir);
  });
  if (!st.ok()) return st;
  AddLookup(ino);
  return inode;
}

Status Filesystem::RemoveName(uint64_t parent, const std::string& name, bool directory) {
  CAIRN_RETURN_IF_ERROR(CheckName(name));
  if (directory && name == ".") return Status::Posix(EINVAL, "cannot remove '.'");
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  uint64_t victim = 0;
  CAIRN_RETURN_IF_ERROR(InTransaction(catalog, [&]() -> Status {
    auto dir = GetDir(catalog, parent);
    if (!dir.ok()) return dir.status();
    auto ino = LookupOrENOENT(catalog, parent, name);
    if (!ino.ok()) return ino.status();
    auto inode = catalog.GetInode(*ino);
    if (!inode.ok()) return inode.status();
    if (IsDir(*inode) != directory) return Status::Posix(directory ? ENOTDIR : EISDIR, name);
    if (directory) CAIRN_RETURN_IF_ERROR(RefuseNonEmpty(catalog, *ino, name));
    int64_t now = NowNs();
    CAIRN_RETURN_IF_ERROR(catalog.DeleteEntry(parent, name));
    CAIRN_RETURN_IF_ERROR(DropLink(*inode, now));
    if (directory) dir->nlink--;
    dir->mtime_ns = dir->ctime_ns = now;
    victim = *ino;
    return catalog.UpdateInode(*dir);
  }));
  return MaybeDelete(victim);
}

Status Filesystem::Rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                          const std::string& new_name, unsigned flags) {
  CAIRN_RETURN_IF_ERROR(CheckName(name));
  CAIRN_RETURN_IF_ERROR(CheckName(new_name));
  if ((flags & RENAME_EXCHANGE) && (flags & RENAME_NOREPLACE)) return Status::Posix(EINVAL, "conflicting flags");
  if (flags & ~(RENAME_EXCHANGE | RENAME_NOREPLACE)) return Status::Posix(EINVAL, "unsupported rename flags");
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  uint64_t victim = 0;
  CAIRN_RETURN_IF_ERROR(InTransaction(catalog, [&]() -> Status {
    auto from_dir = GetDir(catalog, parent);
    if (!from_dir.ok()) return from_dir.status();
    auto to_dir = GetDir(catalog, new_parent);
    if (!to_dir.ok()) return to_dir.status();
    auto src_ino = LookupOrENOENT(catalog, parent, name);
    if (!src_ino.ok()) return src_ino.status();
    auto src = catalog.GetInode(*src_ino);
    if (!src.ok()) return src.status();
    auto dst_ino = IfFound(catalog.Lookup(new_parent, new_name));
    if (!dst_ino.ok()) return dst_ino.status();
    std::optional<InodeRecord> dst;
    if (*dst_ino) {
      auto record = catalog.GetInode(**dst_ino);
      if (!record.ok()) return record.status();
      dst = *record;
    }
    if ((flags & RENAME_NOREPLACE) && dst) return Status::Posix(EEXIST, new_name);
    if ((flags & RENAME_EXCHANGE) && !dst) return Status::Posix(ENOENT, new_name);
    if (dst && dst->ino == src->ino) return Status::OK();  // two names of one inode: nothing to do
    // A directory must not move below itself.
    auto moves_into_itself = [&](const InodeRecord& moved, uint64_t target_dir) -> Result<bool> {
      if (!IsDir(moved)) return false;
      return catalog.IsWithin(target_dir, moved.ino);
    };
    auto loop = moves_into_itself(*src, new_parent);
    if (!loop.ok()) return loop.status();
    if (*loop) return Status::Posix(EINVAL, "cannot move a directory into itself");
    int64_t now = NowNs();
    bool same_dir = parent == new_parent;
    if (flags & RENAME_EXCHANGE) {
      auto loop_back = moves_into_itself(*dst, parent);
      if (!loop_back.ok()) return loop_back.status();
      if (*loop_back) return Status::Posix(EINVAL, "cannot move a directory into itself");
      CAIRN_RETURN_IF_ERROR(catalog.RepointEntry(parent, name, dst->ino));
      CAIRN_RETURN_IF_ERROR(catalog.RepointEntry(new_parent, new_name, src->ino));
      if (!same_dir && IsDir(*src) != IsDir(*dst)) {
        int delta = IsDir(*src) ? 1 : -1;
        to_dir->nlink += delta;
        from_dir->nlink -= delta;
      }
      dst->ctime_ns = now;
      CAIRN_RETURN_IF_ERROR(catalog.UpdateInode(*dst));
    } else {
      if (dst) {
        if (IsDir(*src) && !IsDir(*dst)) return Status::Posix(ENOTDIR, new_name);
        if (!IsDir(*src) && IsDir(*dst)) return Status::Posix(EISDIR, new_name);
        if (IsDir(*dst)) CAIRN_RETURN_IF_ERROR(RefuseNonEmpty(catalog, dst->ino, new_name));
        CAIRN_RETURN_IF_ERROR(catalog.DeleteEntry(new_parent, new_name));
        CAIRN_RETURN_IF_ERROR(DropLink(*dst, now));
        if (IsDir(*dst)) to_dir->nlink--;
        victim = dst->ino;
      }
      CAIRN_RETURN_IF_ERROR(catalog.MoveEntry(parent, name, new_parent, new_name));
      if (IsDir(*src) && !same_dir) {
        from_dir->nlink--;
        to_dir->nlink++;
      }
    }
    src->ctime_ns = now;
    CAIRN_RETURN_IF_ERROR(catalog.UpdateInode(*src));
    // A new name or directory may mean a new effective policy for what was persisted.
    for (const InodeRecord* moved : {&*src, (flags & RENAME_EXCHANGE) ? &*dst : nullptr}) {
      if (moved && (IsDir(*moved) || moved->layout_id != 0)) {
        CAIRN_RETURN_IF_ERROR(catalog.QueuePolicyCheck(moved->ino));
      }
    }
    from_dir->mtime_ns = from_dir->ctime_ns = now;
    if (same_dir) {  // one directory, two copies of its record: to_dir holds the changes
      to_dir->mtime_ns = to_dir->ctime_ns = now;
      return catalog.UpdateInode(*to_dir);
    }
    CAIRN_RETURN_IF_ERROR(catalog.UpdateInode(*from_dir));
    to_dir->mtime_ns = to_dir->ctime_ns = now;
    return catalog.UpdateInode(*to_dir);
  }));
  return victim ? MaybeDelete(victim) : Status::OK();
}

Result<InodeRecord> Filesystem::SetAttr(uint64_t ino, const SetAttrRequest& request) {
  std::unique_lock<std::shared_mutex> data_lock;
  if (request.size && *request.size > kMaxFileSize) {
    return Status::Posix(EFBIG, fmt::format("files end at {} bytes", kMaxFileSize));
  }
  if (request.size) data_lock = std::unique_lock(state_.data_lock(ino));
  if (request.size) {
    // Shrinking into a persisted segment that is not cached: bring it back first, so the
    // bytes before the new end survive the copy-on-write re-persist.
    uint64_t boundary = 0;
    bool need_fetch = false;
    {
      std::lock_guard lock(archive_.catalog_mutex());
      auto inode = GetInodeOrENOENT(archive_.catalog(), ino);
      if (!inode.ok()) return inode.status();
      if (IsDir(*inode)) return Status::Posix(EISDIR, "cannot truncate a directory");
      if (!S_ISREG(inode->mode)) return Status::Posix(EINVAL, "cannot truncate a special file");
      CAIRN_RETURN_IF_ERROR(CheckInodeRecord(*inode));
      uint64_t segment_size = SegmentSizeOf(*inode);
      boundary = *request.size / segment_size;
      auto segment = archive_.catalog().GetSegment(ino, boundary);
      if (!segment.ok()) return segment.status();
      need_fetch =
          *request.size < inode->size && *request.size % segment_size != 0 && *segment && !(*segment)->cached;
    }
    if (need_fetch) {
      auto file = archive_.cache().Open(ino);
      if (!file.ok()) return file.status();
      CAIRN_RETURN_IF_ERROR(FetchSegments(ino, (*file)->fd(), boundary, boundary));
    }
  }
  std::unique_lock lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  InodeRecord inode;
  bool queue = false;
  bool truncate_cache = false;
  uint64_t old_size_for_cache = 0;
  Status st = InTransaction(catalog, [&]() -> Status {
    auto record = GetInodeOrENOENT(catalog, ino);
    if (!record.ok()) return record.status();
    inode = *record;
    int64_t now = NowNs();
    if (request.mode) {
      inode.mode = (inode.mode & S_IFMT) | (*request.mode & 07777);
      auto acl = IfFound(catalog.GetXattr(ino, kAclAccessXattr));
      if (!acl.ok()) return acl.status();
      if (*acl && AclApplyChmod(**acl, inode.mode)) CAIRN_RETURN_IF_ERROR(catalog.SetXattr(ino, kAclAccessXattr, **acl));
    }
    if (request.uid) inode.uid = *request.uid;
    if (request.gid) inode.gid = *request.gid;
    if ((request.uid || request.gid) && inode.layout_id != 0) {
      CAIRN_RETURN_IF_ERROR(catalog.QueuePolicyCheck(ino));  // rules may look at the owner
    }
    if (request.size && *request.size != inode.size) {
      uint64_t old_size = inode.size;
      old_size_for_cache = old_size;
      uint64_t new_size = *request.size;
      uint64_t segment_size = SegmentSizeOf(inode);
      uint64_t old_count = (old_size + segment_size - 1) / segment_size;
      uint64_t new_count = (new_size + segment_size - 1) / segment_size;
      DirtyFile& dirty = state_.dirty[ino];
      if (inode.segment_size == 0) {
        dirty.all_cached = true;  // segment size not decided yet (see Write)
      } else if (new_size < old_size) {
        CAIRN_RETURN_IF_ERROR(DropSegmentsFrom(archive_, ino, new_count));
        for (auto it = dirty.segments.lower_bound(new_count); it != dirty.segments.end();) it = dirty.segments.erase(it);
        if (new_size % segment_size != 0) dirty.segments.insert(new_size / segment_size);
      } else {
        for (uint64_t i = old_count; i < new_count; i++) dirty.segments.insert(i);
      }
      truncate_cache = true;
      if (dirty.segments.empty() && !dirty.all_cached) {
        state_.EraseDirty(ino);
        inode.dirty = false;
      } else {
        inode.dirty = true;
        dirty.last_write_ns = now;
        state_.DropCached(ino);
      }
      inode.size = new_size;
      inode.mtime_ns = now;
      queue = true;
    }
    if (request.atime_ns) inode.atime_ns = *request.atime_ns == SetAttrRequest::kTimeNow ? now : *request.atime_ns;
    if (request.mtime_ns) inode.mtime_ns = *request.mtime_ns == SetAttrRequest::kTimeNow ? now : *request.mtime_ns;
    inode.ctime_ns = request.ctime_ns ? *request.ctime_ns : now;
    return catalog.UpdateInode(inode);
  });
  if (!st.ok()) return st;
  if (queue) {
    auto live = state_.live.find(ino);
    bool writing = live != state_.live.end() && live->second.nwriters > 0;
    if (!writing && state_.dirty.contains(ino)) {
      state_.persist_queue[ino] = NowNs();
    }
  }
  if (!truncate_cache) return inode;
  // The new size is committed before the cache copy shrinks (the data lock, not the
  // catalog's, is held throughout), durably: a power loss must not bring back the old size
  // over a copy already cut, whose cut bytes may have been the only copy of fsync'd data.
  Archive::PendingSync pending;
  auto when = inode.size < old_size_for_cache ? Archive::SyncWhen::kAlways : Archive::SyncWhen::kNever;
  CAIRN_RETURN_IF_ERROR(archive_.Commit(when, &pending));
  lock.unlock();
  CAIRN_RETURN_IF_ERROR(archive_.MakeDurable(std::move(pending)));
  // Growing: cut first, so bytes a failed or crashed write left past the old end read
  // as zeros, as POSIX wants for the extension.
  if (old_size_for_cache < inode.size) CAIRN_RETURN_IF_ERROR(archive_.cache().Truncate(ino, old_size_for_cache));
  CAIRN_RETURN_IF_ERROR(archive_.cache().Truncate(ino, inode.size));
  return inode;
}

Result<std::string> Filesystem::ReadLink(uint64_t ino) {
  std::lock_guard lock(archive_.catalog_mutex());
  auto inode = GetInodeOrENOENT(archive_.catalog(), ino);
  if (!inode.ok()) return inode.status();
  if (!S_ISLNK(inode->mode)) return Status::Posix(EINVAL, "not a symlink");
  return inode->symlink;
}

Result<FileHandle*> Filesystem::Open(uint64_t ino, int flags) {
  bool writable = (flags & O_ACCMODE) != O_RDONLY;
  // Shared: an eviction (exclusive) is either finished or not begun while the handle
  // counts itself open and opens the cache file.
  std::shared_lock data(state_.data_lock(ino));
  {
    std::lock_guard lock(archive_.catalog_mutex());
    auto inode = GetInodeOrENOENT(archive_.catalog(), ino);
    if (!inode.ok()) return inode.status();
    if (IsDir(*inode) && writable) return Status::Posix(EISDIR, "directory opened for writing");
    if (S_ISREG(inode->mode) && inode->segment_size != 0) {
      // A damaged segment map would read as zeros where data is (or loop by a damaged size).
      bool clean = !inode->dirty && !state_.dirty.contains(ino);
      auto segments = archive_.catalog().SummarizeSegments(ino);
      if (!segments.ok()) return segments.status();
      CAIRN_RETURN_IF_ERROR(CheckSegmentSummary(*inode, *segments, clean));
    }
    LiveInode& live = state_.live[ino];
    live.nopen++;
    if (writable) live.nwriters++;
    if (auto it = state_.cached.find(ino); it != state_.cached.end()) state_.TouchCached(ino, it->second.second);
  }
  auto handle = std::make_unique<FileHandle>();
  handle->ino = ino;
  handle->writable = writable;
  // The handle keeps no descriptor (reads and writes take the shared one), but a cache file
  // that cannot be opened fails the open, not a later read. A reader of a file with
  // nothing staged creates no cache file.
  auto file = writable ? archive_.cache().Open(ino) : archive_.cache().OpenExisting(ino);
  if (!file.ok() && !file.status().IsNotFound()) {
    data.unlock();
    Release(handle.release());
    return file.status();
  }
  return handle.release();
}

Result<FileHandle*> Filesystem::Create(uint64_t parent, const std::string& name, uint32_t mode, int flags,
                                       const Caller& caller, InodeRecord* attr) {
  auto node = MakeNode(parent, name, S_IFREG | (mode & 07777), 0, caller);
  if (!node.ok()) return node.status();
  *attr = *node;
  auto handle = Open(node->ino, flags);
  if (!handle.ok()) Forget(node->ino, 1);
  return handle;
}

Status Filesystem::FetchSegments(uint64_t ino, int fd, uint64_t first, uint64_t last) {
  std::vector<uint64_t> fetched;
  std::vector<uint8_t> buffer;
  for (uint64_t index = first; index <= last; index++) {
    std::optional<SegmentRecord> segment;
    uint64_t segment_size;
    {
      std::lock_guard lock(archive_.catalog_mutex());
      auto found = archive_.catalog().GetSegment(ino, index);
      if (!found.ok()) return found.status();
      segment = std::move(*found);
      auto inode = GetInodeOrENOENT(archive_.catalog(), ino);
      if (!inode.ok()) return inode.status();
      if (segment) CAIRN_RETURN_IF_ERROR(CheckSegmentRecord(*segment, *inode));
      segment_size = SegmentSizeOf(*inode);
    }
    if (!segment || segment->cached) continue;
    buffer.resize(segment->length);
    CAIRN_RETURN_IF_ERROR(store_.Read(*segment, 0, buffer));
    CAIRN_RETURN_IF_ERROR(StagingCache::WriteAt(fd, index * segment_size, buffer));
    fetched.push_back(index);
  }
  if (fetched.empty()) return Status::OK();
  if (::fdatasync(fd) != 0) return Status::FromErrno("staging cache: fdatasync", errno);
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  return InTransaction(catalog, [&]() -> Status {
    for (uint64_t index : fetched) CAIRN_RETURN_IF_ERROR(catalog.SetSegmentCached(ino, index, true));
    return Status::OK();
  });
}

Result<size_t> Filesystem::Read(FileHandle* fh, uint64_t offset, std::span<uint8_t> dst) {
  // Shared: a segment's cache copy cannot be evicted between the lookup and the read.
  std::shared_lock data(state_.data_lock(fh->ino));
  uint64_t segment_size;
  uint64_t length;
  std::vector<std::optional<SegmentRecord>> segments;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    auto inode = GetInodeOrENOENT(archive_.catalog(), fh->ino);
    if (!inode.ok()) return inode.status();
    CAIRN_RETURN_IF_ERROR(CheckInodeRecord(*inode));
    if (offset >= inode->size || dst.empty()) return size_t{0};
    length = std::min<uint64_t>(dst.size(), inode->size - offset);
    segment_size = SegmentSizeOf(*inode);
    for (uint64_t i = offset / segment_size; i <= (offset + length - 1) / segment_size; i++) {
      auto segment = archive_.catalog().GetSegment(fh->ino, i);
      if (!segment.ok()) return segment.status();
      segments.push_back(std::move(*segment));
      if (segments.back()) CAIRN_RETURN_IF_ERROR(CheckSegmentRecord(*segments.back(), *inode));
    }
  }
  uint64_t done = 0;
  SharedFile file;
  for (const auto& segment : segments) {
    uint64_t position = offset + done;
    uint64_t in_segment = position % segment_size;
    uint64_t n = std::min(length - done, segment_size - in_segment);
    std::span<uint8_t> out = dst.subspan(done, n);
    if (segment && !segment->cached) {
      Status st = store_.Read(*segment, in_segment, out);
      if (st.IsCorruption()) {  // the log line names the file
        return Status::Corruption(fmt::format("inode {} segment {}: {}", fh->ino, segment->index, st.message()));
      }
      CAIRN_RETURN_IF_ERROR(st);
    } else {  // never-written bytes read as zeros, without a cache file too
      if (!file) {
        auto opened = archive_.cache().OpenExisting(fh->ino);
        if (!opened.ok() && !opened.status().IsNotFound()) return opened.status();
        file = opened.ok() ? std::move(*opened) : nullptr;
      }
      if (file) {
        CAIRN_RETURN_IF_ERROR(StagingCache::ReadAt(file->fd(), position, out));
      } else {
        std::fill(out.begin(), out.end(), 0);
      }
    }
    done += n;
  }
  return static_cast<size_t>(length);
}

Result<size_t> Filesystem::Write(FileHandle* fh, uint64_t offset, std::span<const uint8_t> src) {
  if (!fh->writable) return Status::Posix(EBADF, "file not open for writing");
  if (src.empty()) return size_t{0};
  if (offset > kMaxFileSize || src.size() > kMaxFileSize - offset) {
    return Status::Posix(EFBIG, fmt::format("files end at {} bytes", kMaxFileSize));
  }
  std::unique_lock data(state_.data_lock(fh->ino));
  uint64_t segment_size;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    auto inode = GetInodeOrENOENT(archive_.catalog(), fh->ino);
    if (!inode.ok()) return inode.status();
    CAIRN_RETURN_IF_ERROR(CheckInodeRecord(*inode));
    segment_size = SegmentSizeOf(*inode);
    uint64_t needed = state_.dirty_bytes + src.size();
    // Per segment, an extent header block and (format v3) a block for the member table.
    needed += (needed / segment_size + 2) * 2 * kBlockSize;
    if (FreeDiskBytes() < needed) {
      return Status::Posix(ENOSPC, "the disks cannot hold more than what already waits to be persisted");
    }
  }
  uint64_t first = offset / segment_size;
  uint64_t last = (offset + src.size() - 1) / segment_size;
  bool pinned = false;  // Release unpins it with the last writable handle
  auto file = archive_.cache().OpenForWriting(fh->ino, &pinned);
  if (!file.ok()) return file.status();
  CAIRN_RETURN_IF_ERROR(FetchSegments(fh->ino, (*file)->fd(), first, last));
  int64_t now = NowNs();
  {
    std::lock_guard lock(archive_.catalog_mutex());
    auto inode = GetInodeOrENOENT(archive_.catalog(), fh->ino);
    if (!inode.ok()) return inode.status();
    // Mark the segments dirty in memory before the cache changes, with the segment size
    // the file has now (a persist may have fixed it since we looked): a commit of the
    // persister in between then keeps the file dirty.
    DirtyFile& dirty = state_.MarkWritten(fh->ino, src.size());
    if (inode->segment_size == 0) {
      // Decided by the policy at first persist; until then the whole file is dirty.
      dirty.all_cached = true;
    } else {
      for (uint64_t i = offset / inode->segment_size; i <= (offset + src.size() - 1) / inode->segment_size; i++) {
        dirty.segments.insert(i);
      }
    }
    dirty.last_write_ns = now;
    state_.last_activity_ns = now;
    state_.DropCached(fh->ino);
    // Changing a persisted file in the cache: make the dirty mark durable first, or a
    // crash could leave a changed cache copy that the catalog believes is clean.
    if (inode->segment_size != 0 && !inode->dirty) {
      inode->dirty = true;
      CAIRN_RETURN_IF_ERROR(archive_.catalog().UpdateInode(*inode));
      CAIRN_RETURN_IF_ERROR(archive_.catalog().Flush());
    }
  }
  CAIRN_RETURN_IF_ERROR(StagingCache::WriteAt((*file)->fd(), offset, src));
  if (!pinned && ::fdatasync((*file)->fd()) != 0) {  // its descriptor may be gone by the next fsync
    return Status::FromErrno(fmt::format("staging cache file of inode {}: fdatasync", fh->ino), errno);
  }
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  CAIRN_RETURN_IF_ERROR(InTransaction(catalog, [&]() -> Status {
    auto inode = GetInodeOrENOENT(catalog, fh->ino);
    if (!inode.ok()) return inode.status();
    inode->size = std::max<uint64_t>(inode->size, offset + src.size());
    inode->mtime_ns = inode->ctime_ns = now;
    inode->dirty = true;
    return catalog.UpdateInode(*inode);
  }));
  return src.size();
}

Status Filesystem::Fsync(FileHandle* fh) {
  // While the file is being written, this is the descriptor the writes went through (pinned,
  // or Write synced them): it sees their write-back errors. No cache file: nothing staged.
  auto file = archive_.cache().OpenExisting(fh->ino);
  if (!file.ok() && !file.status().IsNotFound()) return file.status();
  if (file.ok() && ::fdatasync((*file)->fd()) != 0) {
    return Status::FromErrno(fmt::format("staging cache file of inode {}: fdatasync", fh->ino), errno);
  }
  Archive::PendingSync pending;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    CAIRN_RETURN_IF_ERROR(archive_.Commit(Archive::SyncWhen::kAlways, &pending));
    if (state_.dirty.contains(fh->ino)) {
      state_.persist_queue[fh->ino] = NowNs();
    }
  }
  return archive_.MakeDurable(std::move(pending));
}

Status Filesystem::SyncMetadata() { return archive_.CommitDurably(); }

void Filesystem::Release(FileHandle* fh) {
  std::unique_ptr<FileHandle> handle(fh);
  std::unique_lock lock(archive_.catalog_mutex());
  auto it = state_.live.find(handle->ino);
  if (it == state_.live.end()) return;
  LiveInode& live = it->second;
  live.nopen -= std::min<uint32_t>(1, live.nopen);
  if (handle->writable) {
    live.nwriters -= std::min<uint32_t>(1, live.nwriters);
    if (live.nwriters == 0) {
      archive_.cache().Unpin(handle->ino);
      state_.writers_closed.notify_all();
    }
  }
  if (live.nwriters == 0 && state_.dirty.contains(handle->ino)) {
    state_.persist_queue[handle->ino] = NowNs();  // the persister polls; a wakeup per close costs more
    state_.last_activity_ns = NowNs();
  }
  // Persisted while open (idle rule): it is clean now, so it may be evicted.
  bool clean_now = live.nwriters == 0 && handle->writable && !state_.dirty.contains(handle->ino) &&
                   !state_.cached.contains(handle->ino);
  if (live.nopen == 0 && live.nlookup == 0) {
    state_.live.erase(it);
    Status st = MaybeDelete(handle->ino);
    if (!st.ok()) LogError("inode {}: cannot free: {}", handle->ino, st.message());
  }
  lock.unlock();
  if (clean_now) persister_.TouchCached({handle->ino});
}

Result<std::vector<DirEntry>> Filesystem::ReadDir(uint64_t dir, uint64_t cookie, size_t limit) {
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  auto record = GetDir(catalog, dir);
  if (!record.ok()) return record.status();
  std::vector<DirEntry> out;
  auto entries = catalog.ListEntries(dir, cookie, limit);
  if (!entries.ok()) return entries.status();
  for (auto& entry : *entries) {
    auto inode = catalog.GetInode(entry.ino);
    if (!inode.ok() && !inode.status().IsNotFound()) return inode.status();
    if (!inode.ok()) {
      LogError("directory {}: entry '{}' points to missing inode {}", dir, entry.name, entry.ino);
      continue;
    }
    out.push_back({entry.cookie, std::move(entry.name), *inode});
  }
  return out;
}

Result<std::vector<uint8_t>> Filesystem::GetXattr(uint64_t ino, const std::string& name) {
  CAIRN_RETURN_IF_ERROR(CheckXattrNamespace(name));
  std::lock_guard lock(archive_.catalog_mutex());
  if (name.starts_with(kPolicyPrefix) && IsComputedPolicyKey(std::string_view(name).substr(kPolicyPrefix.size()))) {
    auto text = ComputedPolicyValue(ino, name.substr(kPolicyPrefix.size()));
    if (!text.ok()) return text.status();
    return std::vector<uint8_t>(text->begin(), text->end());
  }
  auto value = archive_.catalog().GetXattr(ino, name);
  if (!value.ok() && value.status().IsNotFound()) return Status::Posix(ENODATA, name);
  return value;
}

Status Filesystem::SetXattr(uint64_t ino, const std::string& name, std::span<const uint8_t> value, int flags) {
  CAIRN_RETURN_IF_ERROR(CheckXattrNamespace(name));
  bool policy_key = IsPolicyXattr(name);
  std::vector<uint8_t> canonical;
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  return InTransaction(catalog, [&]() -> Status {
    auto inode = GetInodeOrENOENT(catalog, ino);
    if (!inode.ok()) return inode.status();
    if (policy_key) {
      auto checked = CheckPolicyXattr(ino, name, value);
      if (!checked.ok()) return checked.status();
      canonical.assign(checked->begin(), checked->end());
      value = canonical;
    }
    // A new setting, or an attribute a rule may look at: the file may be out of policy now.
    if (policy_key || (name.starts_with("user.") && inode->layout_id != 0)) {
      CAIRN_RETURN_IF_ERROR(catalog.QueuePolicyCheck(ino));
    }
    auto existing = IfFound(catalog.GetXattr(ino, name));
    if (!existing.ok()) return existing.status();
    bool exists = existing->has_value();
    if ((flags & XATTR_CREATE) && exists) return Status::Posix(EEXIST, name);
    if ((flags & XATTR_REPLACE) && !exists) return Status::Posix(ENODATA, name);
    std::vector<uint8_t> bytes(value.begin(), value.end());
    if (name == kAclAccessXattr) {
      int perms = AclPermissionBits(bytes);
      if (perms < 0) return Status::Posix(EINVAL, "malformed POSIX ACL");
      inode->mode = (inode->mode & ~0777u) | static_cast<uint32_t>(perms);
      inode->ctime_ns = NowNs();
      if (AclIsMinimal(bytes)) {  // the mode now says everything the ACL said
        Status removed = catalog.RemoveXattr(ino, name);
        if (!removed.ok() && !removed.IsNotFound()) return removed;
        return catalog.UpdateInode(*inode);
      }
    } else if (name == kAclDefaultXattr) {
      if (!IsDir(*inode)) return Status::Posix(EACCES, "only directories have default ACLs");
      if (AclPermissionBits(bytes) < 0) return Status::Posix(EINVAL, "malformed POSIX ACL");
    }
    CAIRN_RETURN_IF_ERROR(catalog.SetXattr(ino, name, bytes));
    inode->ctime_ns = NowNs();
    return catalog.UpdateInode(*inode);
  });
}

Result<std::string> Filesystem::CheckPolicyXattr(uint64_t ino, const std::string& name,
                                                 std::span<const uint8_t> value) {
  bool trusted = name.starts_with(kTrustedPolicyPrefix);
  std::string_view suffix = std::string_view(name).substr(trusted ? kTrustedPolicyPrefix.size() : kPolicyPrefix.size());
  std::string text(value.begin(), value.end());
  auto refuse = [&](int error, const std::string& why) {
    LogWarning("setxattr {} refused: {}", name, Abbreviated(why, 400));  // why names the value
    return Status::Posix(error, why);
  };
  if (!trusted && IsComputedPolicyKey(suffix)) return refuse(EPERM, fmt::format("{} is computed by cairn", name));
  if (trusted && suffix == "lock") {
    auto keys = CanonicalLockValue(text);
    if (!keys.ok()) return refuse(EINVAL, keys.status().message());
    return keys;
  }
  auto key = ParsePolicyKey(suffix);
  Result<std::string> canonical = key.ok() ? CanonicalPolicyValue(*key, text) : Result<std::string>(key.status());
  if (!canonical.ok()) return refuse(EINVAL, canonical.status().message());
  if (*key == PolicyKey::kRaid) {
    Status fits = archive_.CheckRaidFits(*canonical);
    if (!fits.ok()) return refuse(EINVAL, fits.message());
  }
  if (*key == PolicyKey::kPlacement) {
    Status fits = archive_.CheckPlacementFits(*canonical);
    if (!fits.ok()) return refuse(EINVAL, fits.message());
  }
  Catalog& catalog = archive_.catalog();
  if (*key == PolicyKey::kPolicy) {
    PolicyContext context = archive_.policy_context();
    const NamedPolicy* policy = context.rules->FindPolicy(*canonical);
    if (!policy) {
      std::string menu;
      for (const auto& p : context.rules->policies()) menu += fmt::format("{}{}", menu.empty() ? "" : ", ", p.name);
      return refuse(EINVAL, fmt::format("no policy named '{}' in {} (defined: {})", *canonical,
                                        archive_.rules_path(), menu.empty() ? "none" : menu));
    }
    if (!trusted && !policy->selectable) {
      return refuse(EPERM, fmt::format("policy '{}' is not selectable by users; an admin can pin it with "
                                       "trusted.cairn.policy",
                                       *canonical));
    }
  }
  if (!trusted) {
    auto lock = LockCovering(catalog, ino, *key);
    if (!lock.ok()) return lock.status();
    if (!lock->empty()) return refuse(EPERM, fmt::format("{} is locked by the admin at {}", name, *lock));
  }
  return canonical;
}

Result<std::string> Filesystem::ComputedPolicyValue(uint64_t ino, const std::string& suffix) {
  Catalog& catalog = archive_.catalog();
  auto inode = GetInodeOrENOENT(catalog, ino);
  if (!inode.ok()) return inode.status();
  auto policy = ResolvePolicy(catalog, ino, archive_.policy_context());
  if (!policy.ok()) return policy.status();
  if (suffix == "effective") return policy->Effective();
  if (suffix == "effective.source") return policy->Sources();
  if (suffix == "state") {
    if (!S_ISREG(inode->mode)) return std::string("persisted");
    auto dirty = state_.dirty.find(ino);
    if (dirty != state_.dirty.end() || inode->dirty) {
      auto live = state_.live.find(ino);
      bool writing = live != state_.live.end() && live->second.nwriters > 0;
      return std::string(writing ? "cached" : "queued");
    }
    if (state_.migrating == ino) return std::string("migrating");
    if (inode->layout_id != 0) {
      auto stamp = catalog.LayoutStamp(inode->layout_id);
      if (!stamp.ok()) return stamp.status();
      if (!LayoutMatches(*stamp, *policy)) return std::string("out-of-policy");
    }
    return std::string("persisted");
  }
  if (suffix == "location") {
    std::string out;
    auto segments = catalog.GetSegments(ino);
    if (!segments.ok()) return segments.status();
    for (const SegmentRecord& segment : *segments) {
      std::string where = "hole";
      if (segment.extent_id != kHoleExtent) {
        auto extent = catalog.GetExtent(segment.extent_id);
        if (!extent.ok()) return extent.status();
        // Every chunk as its store describes it (diskN@OFFSET), joined by '/', then +LENGTH of
        // the segment. The segment's own bytes are pointed at when they are stored as they are,
        // in one chunk.
        where.clear();
        bool direct = extent->chunks.size() == 1 && extent->chain_stamp.empty();
        for (const ChunkPlacement& chunk : extent->chunks) {
          uint64_t at = direct ? segment.extent_offset : 0;
          std::string place = archive_.store(chunk.disk).Describe(chunk.locator(), at);
          where += fmt::format("{}{}", where.empty() ? "" : "/", place);
        }
        where += fmt::format("+{}", segment.length);
      }
      out += fmt::format("{}{}={}{}", out.empty() ? "" : " ", segment.index, where, segment.cached ? ",cached" : "");
    }
    return out.empty() ? std::string(S_ISREG(inode->mode) && inode->size > 0 ? "cache" : "none") : out;
  }
  // digest and scrubbed come with whole-file digests and scrubbing.
  return Status::Posix(ENODATA, fmt::format("user.cairn.{} is not computed by this build", suffix));
}

Result<std::vector<std::string>> Filesystem::ListXattrs(uint64_t ino, const Caller& caller) {
  std::lock_guard lock(archive_.catalog_mutex());
  auto inode = GetInodeOrENOENT(archive_.catalog(), ino);
  if (!inode.ok()) return inode.status();
  auto listed = archive_.catalog().ListXattrs(ino);
  if (!listed.ok()) return listed.status();
  std::vector<std::string> names = std::move(*listed);
  std::erase_if(names, [&](const std::string& name) { return !XattrListed(name, caller.uid == 0); });
  return names;
}

Status Filesystem::RemoveXattr(uint64_t ino, const std::string& name) {
  CAIRN_RETURN_IF_ERROR(CheckXattrNamespace(name));
  if (name.starts_with(kPolicyPrefix) && IsComputedPolicyKey(std::string_view(name).substr(kPolicyPrefix.size()))) {
    return Status::Posix(EPERM, fmt::format("{} is computed by cairn and cannot be removed", name));
  }
  bool policy_key = IsPolicyXattr(name);
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  return InTransaction(catalog, [&]() -> Status {
    auto inode = GetInodeOrENOENT(catalog, ino);
    if (!inode.ok()) return inode.status();
    Status st = catalog.RemoveXattr(ino, name);
    if (st.IsNotFound()) return Status::Posix(ENODATA, name);
    CAIRN_RETURN_IF_ERROR(st);
    if (policy_key || (name.starts_with("user.") && inode->layout_id != 0)) {
      CAIRN_RETURN_IF_ERROR(catalog.QueuePolicyCheck(ino));
    }
    inode->ctime_ns = NowNs();
    return catalog.UpdateInode(*inode);
  });
}

Result<uint64_t> Filesystem::LookupPath(const std::string& path) {
  std::lock_guard lock(archive_.catalog_mutex());
  uint64_t ino = kRootInode;
  std::istringstream names(path);
  std::string name;
  while (std::getline(names, name, '/')) {
    if (name.empty() || name == ".") continue;
    auto next = archive_.catalog().Lookup(ino, name);
    if (!next.ok()) return Status::NotFound(fmt::format("{}: no such file or directory in the archive", path));
    ino = *next;
  }
  return ino;
}

Status Filesystem::ApplyPolicy(const std::string& path, const Reconciler::ProgressFn& report) {
  auto ino = LookupPath(path);
  if (!ino.ok()) return ino.status();
  return reconciler_.Apply(*ino, report);
}

Status Filesystem::DryRunRules(std::shared_ptr<const RuleSet> candidate, const std::string& path,
                               const std::function<bool(const std::string&)>& report) {
  auto root = LookupPath(path);
  if (!root.ok()) return root.status();
  PolicyContext now = archive_.policy_context();
  PolicyContext then = now;
  then.rules = std::move(candidate);
  Catalog& catalog = archive_.catalog();
  Status st;
  std::vector<std::string> lines;
  auto compare = [&](const InodeRecord& inode) {
    if (!S_ISREG(inode.mode)) return true;
    auto before = ResolvePolicy(catalog, inode.ino, now);
    auto after = ResolvePolicy(catalog, inode.ino, then);
    if (!before.ok() || !after.ok()) {
      st = before.ok() ? after.status() : before.status();
      return false;
    }
    std::string changes;
    for (size_t i = 0; i < after->fields.size(); i++) {
      const ResolvedField& a = after->fields[i];
      const ResolvedField& b = before->fields[i];
      if (a.value == b.value && a.source == b.source) continue;
      changes += fmt::format(" {}={}->{}", PolicyKeyName(a.key), b.value, a.value);
      if (a.source != b.source) changes += fmt::format(" ({})", a.source);
    }
    if (changes.empty()) return true;
    auto stamp = inode.layout_id != 0 ? catalog.LayoutStamp(inode.layout_id) : Result<std::string>(std::string());
    auto path = stamp.ok() ? PathOf(catalog, inode.ino) : Result<std::string>(stamp.status());
    if (!path.ok()) {
      st = path.status();
      return false;
    }
    bool reencode = inode.layout_id != 0 && !LayoutMatches(*stamp, *after);
    lines.push_back(fmt::format("{}:{}{}", *path, changes, reencode ? " [persisted: would be re-encoded]" : ""));
    return true;
  };
  // A step at a time under the catalog mutex; the lines go out without it (a client that
  // reads slowly must not hold up the mount).
  TreeWalk walk(*root);
  for (bool more = true; more;) {
    {
      std::lock_guard lock(archive_.catalog_mutex());
      auto stepped = walk.Step(catalog, kWalkStep, compare);
      if (!stepped.ok()) return stepped.status();
      CAIRN_RETURN_IF_ERROR(st);
      more = *stepped;
    }
    for (const std::string& line : lines) {
      if (!report(line)) return Status::OK();
    }
    lines.clear();
  }
  return Status::OK();
}

uint64_t Filesystem::FreeDiskBytes() {
  return archive_.groups().front().free_bytes();
}

Result<FsStats> Filesystem::StatFs() {
  std::lock_guard lock(archive_.catalog_mutex());
  FsStats stats;
  stats.total_bytes = archive_.capacity();
  uint64_t free = archive_.free_bytes();  // of every group, as the total is
  stats.free_bytes = free > state_.dirty_bytes ? free - state_.dirty_bytes : 0;
  auto inodes = archive_.catalog().InodeCount();
  if (!inodes.ok()) return inodes.status();
  stats.inodes = *inodes;
  return stats;
}

Status Filesystem::EvictFiles(const std::vector<uint64_t>& inos) {
  constexpr size_t kGroup = 256;  // files per durable commit
  std::lock_guard batch(persister_.batch_mutex());
  for (size_t first = 0; first < inos.size(); first += kGroup) {
    std::vector<uint64_t> group(inos.begin() + first, inos.begin() + std::min(inos.size(), first + kGroup));
    auto held = state_.LockData(group);
    std::vector<uint64_t> evicted;
    Archive::PendingSync pending;
    {
      std::lock_guard lock(archive_.catalog_mutex());
      Catalog& catalog = archive_.catalog();
      for (uint64_t ino : group) {
        auto live = state_.live.find(ino);
        bool open = live != state_.live.end() && live->second.nopen > 0;
        auto inode = catalog.GetInode(ino);
        if (!inode.ok() && !inode.status().IsNotFound()) return inode.status();
        if (!inode.ok()) state_.DropCached(ino);
        if (open || state_.dirty.contains(ino) || !inode.ok()) continue;
        uint64_t segment_size = SegmentSizeOf(*inode);
        uint64_t count = (inode->size + segment_size - 1) / segment_size;
        auto segments = catalog.GetSegments(ino);
        if (!segments.ok()) return segments.status();
        if (segments->size() != count) continue;  // not fully persisted yet
        CAIRN_RETURN_IF_ERROR(catalog.SetSegmentsCached(ino, false));
        state_.DropCached(ino);
        evicted.push_back(ino);
      }
      if (evicted.empty()) continue;
      CAIRN_RETURN_IF_ERROR(archive_.Commit(Archive::SyncWhen::kAlways, &pending));
    }
    // The catalog must stop pointing at the cache, durably, before the cache copies go.
    CAIRN_RETURN_IF_ERROR(archive_.MakeDurable(std::move(pending)));
    for (uint64_t ino : evicted) CAIRN_RETURN_IF_ERROR(archive_.cache().Remove(ino));
  }
  return Status::OK();
}

Status Filesystem::EvictCleanSegments(uint64_t ino) {
  std::lock_guard batch(persister_.batch_mutex());
  std::unique_lock data(state_.data_lock(ino));
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // offset, length
  Archive::PendingSync pending;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    Catalog& catalog = archive_.catalog();
    auto inode = catalog.GetInode(ino);
    if (!inode.ok()) return inode.status().IsNotFound() ? Status::OK() : inode.status();
    auto dirty = state_.dirty.find(ino);
    if (dirty != state_.dirty.end() && dirty->second.all_cached) return Status::OK();
    uint64_t segment_size = SegmentSizeOf(*inode);
    CAIRN_RETURN_IF_ERROR(InTransaction(catalog, [&]() -> Status {
      auto segments = catalog.GetSegments(ino);
      if (!segments.ok()) return segments.status();
      for (const SegmentRecord& segment : *segments) {
        if (!segment.cached || (dirty != state_.dirty.end() && dirty->second.segments.contains(segment.index))) {
          continue;
        }
        CAIRN_RETURN_IF_ERROR(catalog.SetSegmentCached(ino, segment.index, false));
        ranges.emplace_back(segment.index * segment_size, segment_size);
      }
      return Status::OK();
    }));
    if (ranges.empty()) return Status::OK();
    CAIRN_RETURN_IF_ERROR(archive_.Commit(Archive::SyncWhen::kAlways, &pending));
  }
  CAIRN_RETURN_IF_ERROR(archive_.MakeDurable(std::move(pending)));
  for (const auto& [offset, length] : ranges) CAIRN_RETURN_IF_ERROR(archive_.cache().PunchHole(ino, offset, length));
  return Status::OK();
}

void Filesystem::EvictOverBudget() {
  std::vector<uint64_t> victims;
  std::vector<uint64_t> writing;
  uint64_t budget = archive_.options().cache_size;
  uint64_t writing_bytes = 0;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    for (const auto& [ino, live] : state_.live) {
      if (live.nwriters > 0) writing.push_back(ino);
    }
  }
  for (uint64_t ino : writing) writing_bytes += archive_.cache().Usage(ino);  // stat()s, without the mutex
  {
    std::lock_guard lock(archive_.catalog_mutex());
    uint64_t total = state_.cached_bytes + writing_bytes;
    if (total <= budget) return;
    uint64_t to_free = total - budget * 9 / 10;
    for (const auto& [tick, ino] : state_.lru_by_tick) {
      if (to_free == 0) break;
      uint64_t bytes = state_.cached[ino].second;
      victims.push_back(ino);
      to_free -= std::min(to_free, bytes);
    }
    if (to_free == 0) writing.clear();  // closed files alone bring the cache back under budget
  }
  if (Status st = EvictFiles(victims); !st.ok()) LogError("eviction failed: {}", st.message());
  // Files still being written: drop what is already persisted (a 10 GiB copy must not need
  // 10 GiB of cache).
  for (uint64_t ino : writing) {
    Status st = EvictCleanSegments(ino);
    if (!st.ok()) LogError("inode {}: eviction of persisted segments failed: {}", ino, st.message());
  }
}

Status Filesystem::EvictAll() {
  CAIRN_RETURN_IF_ERROR(PersistAll());
  std::vector<uint64_t> inos;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    for (const auto& [ino, entry] : state_.cached) inos.push_back(ino);
  }
  return EvictFiles(inos);
}

}  // namespace cairn
