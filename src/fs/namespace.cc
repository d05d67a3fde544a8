#include "fs/namespace.h"

#include <linux/fs.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "fs/catalog_lookups.h"
#include "fs/key_guards.h"
#include "fs/posix_acl.h"
#include "pipeline/segment_map_update.h"
#include "util/clock.h"
#include "util/log.h"

namespace cairn {
namespace {

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

Status Namespace::CheckName(const std::string& name) {
  if (name.empty() || name.size() > 255) {
    return Status::Posix(ENAMETOOLONG, fmt::format("a name is 1..255 bytes, not {}", name.size()));
  }
  if (name.find('/') != std::string::npos) return Status::Posix(EINVAL, "name contains '/'");
  return Status::OK();
}

Result<InodeRecord> Namespace::Lookup(uint64_t parent, const std::string& name) {
  CAIRN_RETURN_IF_ERROR(CheckName(name));
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  // "." of any inode: how the kernel finds a file by an NFS handle once it has forgotten it.
  auto dir = name == "." ? GetInodeOrENOENT(catalog, parent) : GetDir(catalog, parent);
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

void Namespace::Forget(uint64_t ino, uint64_t count) {
  std::lock_guard lock(archive_.catalog_mutex());
  auto it = state_.live.find(ino);
  if (it == state_.live.end()) return;
  it->second.nlookup -= std::min(count, it->second.nlookup);
  if (it->second.nlookup == 0 && it->second.nopen == 0) {
    state_.live.erase(it);
    FreeIfUnreferenced(ino);
  }
}

Status Namespace::ForgetAll() {
  std::lock_guard lock(archive_.catalog_mutex());
  state_.live.clear();
  return FreeOrphans();
}

Status Namespace::FreeOrphans() {
  auto orphans = archive_.catalog().InodesWhere("nlink = 0 AND ino != 1");
  if (!orphans.ok()) return orphans.status();
  for (uint64_t ino : *orphans) CAIRN_RETURN_IF_ERROR(MaybeDelete(ino));
  return Status::OK();
}

Result<InodeRecord> Namespace::GetAttr(uint64_t ino) {
  std::lock_guard lock(archive_.catalog_mutex());
  return GetInodeOrENOENT(archive_.catalog(), ino);
}

Result<InodeRecord> Namespace::SetAttr(uint64_t ino, const SetAttrRequest& request, KeyCheck* keys) {
  std::lock_guard lock(archive_.catalog_mutex());
  return SetAttrLocked(ino, request, {}, keys);
}

Result<InodeRecord> Namespace::SetAttrLocked(uint64_t ino, const SetAttrRequest& request, const ResizeFn& resize,
                                             KeyCheck* keys) {
  Catalog& catalog = archive_.catalog();
  InodeRecord inode;
  Status st = InTransaction(catalog, [&]() -> Status {
    auto record = GetInodeOrENOENT(catalog, ino);
    if (!record.ok()) return record.status();
    inode = *record;
    auto guarding = keys ? KeysGuarding(archive_, ino) : std::vector<std::string>();
    if (!guarding.ok()) return guarding.status();
    int64_t now = NowNs();
    if (request.mode) {
      inode.mode = (inode.mode & S_IFMT) | (*request.mode & 07777);
      auto acl = IfFound(catalog.GetXattr(ino, kAclAccessXattr));
      if (!acl.ok()) return acl.status();
      if (*acl && AclApplyChmod(**acl, inode.mode)) CAIRN_RETURN_IF_ERROR(catalog.SetXattr(ino, kAclAccessXattr, **acl));
    }
    if (request.uid) inode.uid = *request.uid;
    if (request.gid) inode.gid = *request.gid;
    if (request.uid || request.gid) {  // rules may look at the owner
      catalog.NotePolicyChange();  // of a file whose first persist is under way too
      if (inode.layout_id != 0) CAIRN_RETURN_IF_ERROR(catalog.QueuePolicyCheck(ino));
    }
    if (request.size && *request.size != inode.size) CAIRN_RETURN_IF_ERROR(resize(inode, now));
    if (request.atime_ns) inode.atime_ns = *request.atime_ns == SetAttrRequest::kTimeNow ? now : *request.atime_ns;
    if (request.mtime_ns) inode.mtime_ns = *request.mtime_ns == SetAttrRequest::kTimeNow ? now : *request.mtime_ns;
    inode.ctime_ns = request.ctime_ns ? *request.ctime_ns : now;
    CAIRN_RETURN_IF_ERROR(catalog.UpdateInode(inode));
    // Refused, the transaction takes the change back.
    return keys ? keys->Check(archive_, ino, std::move(*guarding), "setattr") : Status::OK();
  });
  if (!st.ok()) return st;
  return inode;
}

Result<std::string> Namespace::ReadLink(uint64_t ino) {
  std::lock_guard lock(archive_.catalog_mutex());
  auto inode = GetInodeOrENOENT(archive_.catalog(), ino);
  if (!inode.ok()) return inode.status();
  if (!S_ISLNK(inode->mode)) return Status::Posix(EINVAL, "not a symlink");
  return inode->symlink;
}

Result<InodeRecord> Namespace::MakeNode(uint64_t parent, const std::string& name, uint32_t mode, uint64_t rdev,
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
    // What the kernel is told now must be what lookups and listings say later: it takes an
    // inode whose generation changed for a stale one and fails its I/O.
    node.generation = catalog.new_inode_generation();
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

Result<InodeRecord> Namespace::Link(uint64_t ino, uint64_t new_parent, const std::string& new_name,
                                    KeyCheck* keys) {
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
    GuardedInodes guarded(archive_, state_, keys);
    CAIRN_RETURN_IF_ERROR(guarded.Before(ino));
    int64_t now = NowNs();
    CAIRN_RETURN_IF_ERROR(catalog.InsertEntry(new_parent, new_name, ino));
    inode.nlink++;
    inode.ctime_ns = now;
    CAIRN_RETURN_IF_ERROR(catalog.UpdateInode(inode));
    // Locks and pins above every name apply: the new name may change the policy.
    if (inode.layout_id != 0) CAIRN_RETURN_IF_ERROR(catalog.QueuePolicyCheck(ino));
    CAIRN_RETURN_IF_ERROR(guarded.After("link"));
    dir->mtime_ns = dir->ctime_ns = now;
    return catalog.UpdateInode(*dir);
  });
  if (!st.ok()) return st;
  AddLookup(ino);
  return inode;
}

Status Namespace::RemoveName(uint64_t parent, const std::string& name, bool directory, uint64_t expected,
                             KeyCheck* keys) {
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
    if (expected != 0 && *ino != expected) {
      return Status::Busy(fmt::format("{} names inode {} now, not inode {}", name, *ino, expected));
    }
    auto inode = catalog.GetInode(*ino);
    if (!inode.ok()) return inode.status();
    if (IsDir(*inode) != directory) return Status::Posix(directory ? ENOTDIR : EISDIR, name);
    if (directory) CAIRN_RETURN_IF_ERROR(RefuseNonEmpty(catalog, *ino, name));
    GuardedInodes guarded(archive_, state_, keys);
    CAIRN_RETURN_IF_ERROR(guarded.Before(*ino));
    CAIRN_RETURN_IF_ERROR(KeepPolicyIfLastName(*inode));
    int64_t now = NowNs();
    CAIRN_RETURN_IF_ERROR(catalog.DeleteEntry(parent, name));
    CAIRN_RETURN_IF_ERROR(DropLink(*inode, now));
    CAIRN_RETURN_IF_ERROR(guarded.After(directory ? "rmdir" : "unlink"));
    if (directory) dir->nlink--;
    dir->mtime_ns = dir->ctime_ns = now;
    victim = *ino;
    return catalog.UpdateInode(*dir);
  }));
  FreeIfUnreferenced(victim);  // the name is gone, committed: that is the answer
  return Status::OK();
}

Status Namespace::Rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                         const std::string& new_name, unsigned flags, KeyCheck* keys) {
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
    if (flags & RENAME_EXCHANGE) {
      auto loop_back = moves_into_itself(*dst, parent);
      if (!loop_back.ok()) return loop_back.status();
      if (*loop_back) return Status::Posix(EINVAL, "cannot move a directory into itself");
    } else if (dst) {
      if (IsDir(*src) && !IsDir(*dst)) return Status::Posix(ENOTDIR, new_name);
      if (!IsDir(*src) && IsDir(*dst)) return Status::Posix(EISDIR, new_name);
      if (IsDir(*dst)) CAIRN_RETURN_IF_ERROR(RefuseNonEmpty(catalog, dst->ino, new_name));
    }
    GuardedInodes guarded(archive_, state_, keys);
    CAIRN_RETURN_IF_ERROR(guarded.Before(src->ino));
    if (dst) CAIRN_RETURN_IF_ERROR(guarded.Before(dst->ino));  // moved too, or one name fewer
    int64_t now = NowNs();
    bool same_dir = parent == new_parent;
    if (flags & RENAME_EXCHANGE) {
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
        CAIRN_RETURN_IF_ERROR(KeepPolicyIfLastName(*dst));
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
    CAIRN_RETURN_IF_ERROR(guarded.After("rename"));
    from_dir->mtime_ns = from_dir->ctime_ns = now;
    if (same_dir) {  // one directory, two copies of its record: to_dir holds the changes
      to_dir->mtime_ns = to_dir->ctime_ns = now;
      return catalog.UpdateInode(*to_dir);
    }
    CAIRN_RETURN_IF_ERROR(catalog.UpdateInode(*from_dir));
    to_dir->mtime_ns = to_dir->ctime_ns = now;
    return catalog.UpdateInode(*to_dir);
  }));
  if (victim) FreeIfUnreferenced(victim);  // the rename is committed: that is the answer
  return Status::OK();
}

Result<std::vector<DirEntry>> Namespace::ReadDir(uint64_t dir, uint64_t cookie, size_t limit, uint64_t* resume) {
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  auto record = GetDir(catalog, dir);
  if (!record.ok()) return record.status();
  std::vector<DirEntry> out;
  auto entries = catalog.ListEntries(dir, cookie, limit);
  if (!entries.ok()) return entries.status();
  if (resume) *resume = limit > 0 && entries->size() == limit ? entries->back().cookie : 0;
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

Result<uint64_t> Namespace::LookupPath(const std::string& path) {
  std::lock_guard lock(archive_.catalog_mutex());
  uint64_t ino = kRootInode;
  std::istringstream names(path);
  std::string name;
  while (std::getline(names, name, '/')) {
    if (name.empty() || name == ".") continue;
    auto next = archive_.catalog().Lookup(ino, name);
    if (!next.ok() && !next.status().IsNotFound()) return next.status();
    if (!next.ok()) return Status::NotFound(fmt::format("{}: no such file or directory in the archive", path));
    ino = *next;
  }
  return ino;
}

void Namespace::FreeIfUnreferenced(uint64_t ino) {
  Status st = MaybeDelete(ino);
  if (!st.ok()) LogError("inode {}: cannot free it now (the next mount does): {}", ino, st.message());
}

Status Namespace::MaybeDelete(uint64_t ino) {
  Catalog& catalog = archive_.catalog();
  auto inode = catalog.GetInode(ino);
  if (!inode.ok()) return inode.status().IsNotFound() ? Status::OK() : inode.status();  // gone already
  if (inode->nlink > 0 || ino == kRootInode) return Status::OK();
  if (KernelHolds(ino)) return Status::OK();
  CAIRN_RETURN_IF_ERROR(InTransaction(catalog, [&] {
    CAIRN_RETURN_IF_ERROR(DropSegmentsFrom(archive_, ino, 0));
    return catalog.DeleteInode(ino);
  }));
  archive_.ForgetUnlinked(ino);
  state_.EraseDirty(ino);
  state_.persist_queue.erase(ino);
  state_.DropCached(ino);
  archive_.file_keys().Forget(ino);
  archive_.RemoveCacheAfterFlush(ino);
  return Status::OK();
}

Status Namespace::KeepPolicyIfLastName(const InodeRecord& inode) {
  if (!S_ISREG(inode.mode) || inode.nlink != 1) return Status::OK();
  // As long as the kernel knows the file, a program may open it again (through
  // /proc/PID/fd) and write to it: it is not freed yet (MaybeDelete).
  if (!KernelHolds(inode.ino) && !state_.dirty.contains(inode.ino)) return Status::OK();  // freed with its name
  auto policy = ResolvePolicy(archive_.catalog(), inode.ino, archive_.policy_context());
  if (!policy.ok()) return policy.status();
  archive_.KeepPolicyOfUnlinked(inode.ino, std::move(*policy));
  return Status::OK();
}

bool Namespace::KernelHolds(uint64_t ino) const {
  auto live = state_.live.find(ino);
  return live != state_.live.end() && (live->second.nlookup > 0 || live->second.nopen > 0);
}

Status Namespace::DropLink(InodeRecord& inode, int64_t now) {
  inode.nlink = IsDir(inode) ? 0 : inode.nlink - std::min<uint64_t>(1, inode.nlink);
  inode.ctime_ns = now;
  CAIRN_RETURN_IF_ERROR(archive_.catalog().UpdateInode(inode));
  // The name may have taken a lock or pin with it: the remaining names' policy may differ.
  if (inode.nlink > 0 && inode.layout_id != 0) return archive_.catalog().QueuePolicyCheck(inode.ino);
  return Status::OK();
}

}  // namespace cairn
