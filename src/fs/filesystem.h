// Filesystem implements POSIX semantics over the catalog, the staging cache and the disks;
// it never sees FUSE types, so unit tests drive it directly. It owns the in-memory file
// state, the persister and reconciler threads, and the parts its calls go to: Namespace
// (names, attributes), FileData (the data path), Xattrs, CacheManager (eviction) and
// AdminWalks (rules dry-run, policy apply). Thread-safe; see pipeline/file_state.h for
// the lock order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "archive/archive.h"
#include "fs/admin_walks.h"
#include "fs/cache_manager.h"
#include "fs/file_data.h"
#include "fs/fs_types.h"
#include "fs/namespace.h"
#include "fs/xattrs.h"
#include "pipeline/file_state.h"
#include "pipeline/persister.h"
#include "pipeline/reconciler.h"
#include "pipeline/segment_store.h"

namespace cairn {

class Filesystem {
 public:
  explicit Filesystem(Archive& archive);
  ~Filesystem();

  // Purges orphans left by a crash, queues files left dirty and has segments whose cache
  // file is gone read from their extents. Starts no thread, so it runs before the daemon
  // forks and its errors reach the user.
  Status Recover();
  // Starts the catalog's WAL checkpoints and the persister and reconciler threads.
  Status StartBackground();
  // At the end of the session (unmounted): stops the reconciler and the persister's thread,
  // frees the files unlinked while open, and persists everything still dirty.
  Status Stop();

  // Names and attributes (Namespace). Entry-returning calls add one kernel lookup
  // reference to the inode they return.
  Result<InodeRecord> Lookup(uint64_t parent, const std::string& name) { return names_.Lookup(parent, name); }
  void Forget(uint64_t ino, uint64_t count) { names_.Forget(ino, count); }
  Result<InodeRecord> GetAttr(uint64_t ino) { return names_.GetAttr(ino); }
  // A size goes to FileData::Truncate, with the rest of the request. A user may not take a
  // file out of, or into, a rule that encrypts it with a key they were not granted.
  Result<InodeRecord> SetAttr(uint64_t ino, const SetAttrRequest& request, const Caller& caller) {
    std::optional<KeyCheck> keys = KeyCheckForSetAttr(archive_, request, caller);
    KeyCheck* check = keys ? &*keys : nullptr;
    return request.size ? data_.Truncate(ino, request, check) : names_.SetAttr(ino, request, check);
  }
  Result<std::string> ReadLink(uint64_t ino) { return names_.ReadLink(ino); }
  // mknod/mkdir/symlink: `mode` carries the file type; `target` is the symlink's.
  Result<InodeRecord> MakeNode(uint64_t parent, const std::string& name, uint32_t mode, uint64_t rdev,
                               const Caller& caller, const std::string& target = {}) {
    return names_.MakeNode(parent, name, mode, rdev, caller, target);
  }
  // A user may not give a file another master key by moving, linking or unlinking a name
  // unless granted the old and the new one (Namespace::Link).
  Result<InodeRecord> Link(uint64_t ino, uint64_t new_parent, const std::string& new_name, const Caller& caller) {
    auto keys = KeyCheck::For(archive_.file_keys(), caller);
    return names_.Link(ino, new_parent, new_name, keys ? &*keys : nullptr);
  }
  Status Unlink(uint64_t parent, const std::string& name, const Caller& caller) {
    auto keys = KeyCheck::For(archive_.file_keys(), caller);
    return names_.Unlink(parent, name, keys ? &*keys : nullptr);
  }
  Status Rmdir(uint64_t parent, const std::string& name) { return names_.Rmdir(parent, name); }
  // flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE.
  Status Rename(uint64_t parent, const std::string& name, uint64_t new_parent, const std::string& new_name,
                unsigned flags, const Caller& caller) {
    auto keys = KeyCheck::For(archive_.file_keys(), caller);
    return names_.Rename(parent, name, new_parent, new_name, flags, keys ? &*keys : nullptr);
  }
  // Returns once the extents being loaded ahead of readers are buffered (tests count disk reads).
  void WaitForLoadsAhead() { store_.WaitForLoadsAhead(); }
  // Entries of `dir` after `cookie`, at most `limit`; see Namespace::ReadDir.
  Result<std::vector<DirEntry>> ReadDir(uint64_t dir, uint64_t cookie, size_t limit, uint64_t* resume = nullptr) {
    return names_.ReadDir(dir, cookie, limit, resume);
  }
  // The inode at `path` inside the archive ("/a/b"; "/" is the root).
  Result<uint64_t> LookupPath(const std::string& path) { return names_.LookupPath(path); }

  // The data path (FileData).
  // EACCES when a master key guarding the file (fs/key_guards.h: the one its data is sealed
  // with, the one its policy encrypts under) is one the caller is not allowed to use.
  Result<FileHandle*> Open(uint64_t ino, int flags, const Caller& caller);
  // Makes the file and opens it; EACCES, and no file, as Open refuses it.
  Result<FileHandle*> Create(uint64_t parent, const std::string& name, uint32_t mode, int flags,
                             const Caller& caller, InodeRecord* attr);
  Status Read(FileHandle* fh, uint64_t offset, size_t size, ReadReply& reply) {
    return data_.Read(fh, offset, size, reply);
  }
  Result<size_t> Write(FileHandle* fh, uint64_t offset, std::span<const uint8_t> src) {
    return data_.Write(fh, offset, src);
  }
  // Makes the file's data and attributes durable (cache file + catalog) and queues it.
  Status Fsync(FileHandle* fh) { return data_.Fsync(fh); }
  // Makes every metadata change so far durable (fsync of a directory).
  Status SyncMetadata() { return data_.SyncMetadata(); }
  void Release(FileHandle* fh) { data_.Release(fh); }

  // cairn key: counts ("count"), re-wraps ("rewrap") or crypto-erases ("erase") the data
  // keys master key `key_name` wraps (Archive::ChangeFileKeys); how many. An erase also drops
  // what was kept of those files' plaintext for reads: the decoded extents, the staging
  // cache's copies of their persisted segments, and the kernel's pages (see
  // SetKernelCacheDropper). Their dirty data stays, never encrypted: persisting it fails
  // while the keystore lacks the key (cairn(8), KEYS).
  Result<uint64_t> ChangeFileKeys(const std::string& action, const std::string& key_name);
  // cairn key delete's warning: AttributesNamingKey (key_guards.h), under the catalog lock.
  Result<std::vector<std::string>> AttributesNamingKey(const std::string& key_name, size_t limit) {
    std::lock_guard lock(archive_.catalog_mutex());
    return cairn::AttributesNamingKey(archive_, key_name, limit);
  }
  // Set by the FUSE front end once mounted, and cleared (after a call under way returns)
  // before it unmounts: makes the kernel drop the pages and attributes it caches of an inode.
  void SetKernelCacheDropper(std::function<void(uint64_t ino)> drop);

  // Extended attributes (Xattrs). Names outside the namespaces cairn stores are EOPNOTSUPP
  // (see xattr_namespace.h).
  Result<std::vector<uint8_t>> GetXattr(uint64_t ino, const std::string& name) { return xattrs_.Get(ino, name); }
  // flags: 0, XATTR_CREATE or XATTR_REPLACE.
  Status SetXattr(uint64_t ino, const std::string& name, std::span<const uint8_t> value, int flags,
                  const Caller& caller) {
    return xattrs_.Set(ino, name, value, flags, caller);
  }
  // trusted.* names are listed to root only, as ext4 lists them to CAP_SYS_ADMIN only.
  Result<std::vector<std::string>> ListXattrs(uint64_t ino, const Caller& caller) { return xattrs_.List(ino, caller); }
  Status RemoveXattr(uint64_t ino, const std::string& name, const Caller& caller) {
    return xattrs_.Remove(ino, name, caller);
  }

  Result<FsStats> StatFs();

  // Persists every dirty file now and waits (cairn persist).
  Status PersistAll() { return persister_.PersistAll(); }
  // Persists everything, then drops all clean files from the staging cache (cairn evict).
  Status EvictAll() { return cache_.EvictAll(); }

  // cairn policy apply: re-encodes the out-of-policy files at or below `path` now.
  Status ApplyPolicy(const std::string& path, const Reconciler::ProgressFn& report) {
    return admin_.ApplyPolicy(path, report);
  }
  // cairn rules reload and SIGHUP: re-reads ARCHIVE/rules; a broken file changes nothing.
  Status ReloadRules() { return archive_.LoadRules(); }
  // cairn rules dry-run: one line per regular file at or below `path` whose effective
  // policy `candidate` would change ("/a/f: segment_size=4194304->65536 (rule:x) ...");
  // `report` returns false to stop.
  Status DryRunRules(std::shared_ptr<const RuleSet> candidate, const std::string& path,
                     const std::function<bool(const std::string&)>& report) {
    return admin_.DryRunRules(std::move(candidate), path, report);
  }

  Archive& archive() { return archive_; }

 private:
  // EACCES, logged with `operation`, unless `caller` may use every master key guarding `ino`.
  Status CheckKeyGrants(uint64_t ino, const Caller& caller, const char* operation);

  Archive& archive_;
  FileState state_;
  SegmentStore store_;
  Namespace names_;
  // Before the persister: its thread calls back into the cache manager (eviction after a
  // batch, clean files into the LRU) until the persister is destroyed.
  CacheManager cache_;
  Persister persister_;
  Reconciler reconciler_;
  FileData data_;
  Xattrs xattrs_;
  AdminWalks admin_;
  std::mutex kernel_cache_mutex_;  // held while the dropper runs, so clearing it waits
  std::function<void(uint64_t)> drop_kernel_cache_;  // guarded by kernel_cache_mutex_
};

}  // namespace cairn
