// Namespace implements names and attributes over the catalog: lookup and forget (the
// kernel's references), getattr, setattr, readlink, mknod/mkdir/symlink, link, unlink,
// rmdir, rename and readdir, and frees an inode once no name, reference or open handle is
// left. Thread-safe: each call takes the catalog mutex (lock order: pipeline/file_state.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "archive/archive.h"
#include "fs/fs_types.h"
#include "fs/key_guards.h"
#include "pipeline/file_state.h"

namespace cairn {

class Namespace {
 public:
  Namespace(Archive& archive, FileState& state) : archive_(archive), state_(state) {}

  // Every call that takes a name checks it first: FUSE passes names of up to 1024 bytes,
  // so ENAMETOOLONG over 255 (NAME_MAX) is the filesystem's job, before any lookup.
  static Status CheckName(const std::string& name);

  // Entry-returning calls add one kernel lookup reference to the inode they return.
  Result<InodeRecord> Lookup(uint64_t parent, const std::string& name);
  void Forget(uint64_t ino, uint64_t count);
  // After the unmount: the kernel holds nothing any more and sends no forgets for what it
  // held. Files unlinked while open are freed now, not persisted for the next mount to free.
  Status ForgetAll();
  Result<InodeRecord> GetAttr(uint64_t ino);
  // setattr without a size (FileData::Truncate handles those); `keys`: the caller's check
  // (KeyCheckForSetAttr), null when none is needed.
  Result<InodeRecord> SetAttr(uint64_t ino, const SetAttrRequest& request, KeyCheck* keys);
  // Changes a file's size inside SetAttrLocked's transaction: the new size, the segment
  // map and the dirty state; `now` is the change's time.
  using ResizeFn = std::function<Status(InodeRecord& inode, int64_t now)>;
  // The transaction of setattr: the attributes of `request`, a size that differs from the
  // file's through `resize` (required then), refused (EACCES) when `keys` does not allow the
  // master keys guarding the file before and after. REQUIRES: catalog mutex held.
  Result<InodeRecord> SetAttrLocked(uint64_t ino, const SetAttrRequest& request, const ResizeFn& resize,
                                    KeyCheck* keys);
  Result<std::string> ReadLink(uint64_t ino);
  // mknod/mkdir/symlink: `mode` carries the file type; `target` is the symlink's.
  Result<InodeRecord> MakeNode(uint64_t parent, const std::string& name, uint32_t mode, uint64_t rdev,
                               const Caller& caller, const std::string& target = {});
  // Link, Unlink and Rename refuse (EACCES) a change that leaves other master keys guarding
  // a file or directory when `keys`, the caller's check (null for root), does not allow
  // them all, old and new (fs/key_guards.h).
  Result<InodeRecord> Link(uint64_t ino, uint64_t new_parent, const std::string& new_name, KeyCheck* keys = nullptr);
  Status Unlink(uint64_t parent, const std::string& name, KeyCheck* keys = nullptr) {
    return RemoveName(parent, name, false, 0, keys);
  }
  // Unlink, but only while `name` still names `ino` (Busy otherwise): takes back a file just made.
  Status UnlinkIf(uint64_t parent, const std::string& name, uint64_t ino) {
    return RemoveName(parent, name, false, ino);
  }
  Status Rmdir(uint64_t parent, const std::string& name) { return RemoveName(parent, name, true); }
  // flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE.
  Status Rename(uint64_t parent, const std::string& name, uint64_t new_parent, const std::string& new_name,
                unsigned flags, KeyCheck* keys = nullptr);
  // Entries of `dir` after `cookie`, at most `limit`; one whose inode is missing (a damaged
  // catalog) is logged and left out. *resume, if given, is the cookie the next batch starts
  // after (past the entries left out), or 0 when the directory has no more.
  Result<std::vector<DirEntry>> ReadDir(uint64_t dir, uint64_t cookie, size_t limit, uint64_t* resume = nullptr);
  // The inode at `path` inside the archive ("/a/b"; "/" is the root).
  Result<uint64_t> LookupPath(const std::string& path);

  // Frees an inode with no names left once nothing references it. REQUIRES: catalog mutex.
  Status MaybeDelete(uint64_t ino);
  // MaybeDelete of every inode without a name. REQUIRES: catalog mutex.
  Status FreeOrphans();
  // MaybeDelete after what made the inode unreferenced has happened: a failure is logged
  // (the next mount frees the orphan), not answered. REQUIRES: catalog mutex.
  void FreeIfUnreferenced(uint64_t ino);

 private:
  // unlink (directory = false) or rmdir (directory = true); of inode `expected` only, unless 0.
  Status RemoveName(uint64_t parent, const std::string& name, bool directory, uint64_t expected = 0,
                    KeyCheck* keys = nullptr);
  // Adds a kernel reference. REQUIRES: catalog mutex.
  void AddLookup(uint64_t ino) { state_.live[ino].nlookup++; }
  // Whether the kernel still references `ino` (a lookup or an open handle): it is not freed
  // yet. REQUIRES: catalog mutex.
  bool KernelHolds(uint64_t ino) const;
  // Unlinks one name of `ino` (already removed from its directory); a persisted file that
  // keeps other names is queued for a policy check. REQUIRES: catalog mutex, open transaction.
  Status DropLink(InodeRecord& inode, int64_t now);
  // Before the last name of a regular file goes: a file that lives on without it (the kernel
  // still references it, or it has data not persisted yet) keeps the policy that name gave
  // it, to be persisted under (Archive::KeepPolicyOfUnlinked). REQUIRES: catalog mutex, the
  // name still in the catalog.
  Status KeepPolicyIfLastName(const InodeRecord& inode);

  Archive& archive_;
  FileState& state_;
};

}  // namespace cairn
