// Filesystem implements POSIX semantics over the catalog, the staging cache and the
// disks: names, attributes, links, xattrs, and the data path (cache-first reads, fetch
// of evicted segments, copy-on-write re-persisting). It never sees FUSE types, so unit
// tests drive it directly. Thread-safe; see file_state.h for the lock order.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "archive/archive.h"
#include "pipeline/file_state.h"
#include "pipeline/persister.h"
#include "pipeline/reconciler.h"
#include "pipeline/segment_store.h"

namespace cairn {

// Who asks: the FUSE request's credentials.
struct Caller {
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t umask = 022;
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

class Filesystem {
 public:
  explicit Filesystem(Archive& archive);
  ~Filesystem();

  // Purges orphans left by a crash and queues files left dirty. Starts no thread, so it
  // runs before the daemon forks and its errors reach the user.
  Status Recover();
  // Starts the catalog's WAL checkpoints and the persister and reconciler threads.
  Status StartBackground();
  // Stops the reconciler, persists everything still dirty and stops the persister.
  Status Stop();

  // Entry-returning calls add one kernel lookup reference to the inode they return.
  Result<InodeRecord> Lookup(uint64_t parent, const std::string& name);
  void Forget(uint64_t ino, uint64_t count);
  Result<InodeRecord> GetAttr(uint64_t ino);
  Result<InodeRecord> SetAttr(uint64_t ino, const SetAttrRequest& request);
  Result<std::string> ReadLink(uint64_t ino);
  // mknod/mkdir/symlink: `mode` carries the file type; `target` is the symlink's.
  Result<InodeRecord> MakeNode(uint64_t parent, const std::string& name, uint32_t mode, uint64_t rdev,
                               const Caller& caller, const std::string& target = {});
  Result<InodeRecord> Link(uint64_t ino, uint64_t new_parent, const std::string& new_name);
  Status Unlink(uint64_t parent, const std::string& name) { return RemoveName(parent, name, false); }
  Status Rmdir(uint64_t parent, const std::string& name) { return RemoveName(parent, name, true); }
  // flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE.
  Status Rename(uint64_t parent, const std::string& name, uint64_t new_parent, const std::string& new_name,
                unsigned flags);

  Result<FileHandle*> Open(uint64_t ino, int flags);
  Result<FileHandle*> Create(uint64_t parent, const std::string& name, uint32_t mode, int flags,
                             const Caller& caller, InodeRecord* attr);
  Result<size_t> Read(FileHandle* fh, uint64_t offset, std::span<uint8_t> dst);
  Result<size_t> Write(FileHandle* fh, uint64_t offset, std::span<const uint8_t> src);
  // Makes the file's data and attributes durable (cache file + catalog) and queues it.
  Status Fsync(FileHandle* fh);
  // Makes every metadata change so far durable (fsync of a directory).
  Status SyncMetadata();
  void Release(FileHandle* fh);

  // Entries of `dir` after `cookie`, at most `limit`.
  Result<std::vector<DirEntry>> ReadDir(uint64_t dir, uint64_t cookie, size_t limit);

  // Names outside the namespaces cairn stores are EOPNOTSUPP (see xattr_namespace.h).
  Result<std::vector<uint8_t>> GetXattr(uint64_t ino, const std::string& name);
  // flags: 0, XATTR_CREATE or XATTR_REPLACE.
  Status SetXattr(uint64_t ino, const std::string& name, std::span<const uint8_t> value, int flags);
  // trusted.* names are listed to root only, as ext4 lists them to CAP_SYS_ADMIN only.
  Result<std::vector<std::string>> ListXattrs(uint64_t ino, const Caller& caller);
  Status RemoveXattr(uint64_t ino, const std::string& name);

  Result<FsStats> StatFs();

  // Persists every dirty file now and waits (cairn persist).
  Status PersistAll() { return persister_.PersistAll(); }
  // Persists everything, then drops all clean files from the staging cache (cairn evict).
  Status EvictAll();

  // The inode at `path` inside the archive ("/a/b"; "/" is the root).
  Result<uint64_t> LookupPath(const std::string& path);
  // cairn policy apply: re-encodes the out-of-policy files at or below `path` now.
  Status ApplyPolicy(const std::string& path, const Reconciler::ProgressFn& report);
  // cairn rules reload and SIGHUP: re-reads ARCHIVE/rules; a broken file changes nothing.
  Status ReloadRules() { return archive_.LoadRules(); }
  // cairn rules dry-run: one line per regular file at or below `path` whose effective
  // policy `candidate` would change ("/a/f: segment_size=4194304->65536 (rule:x) ...");
  // `report` returns false to stop.
  Status DryRunRules(std::shared_ptr<const RuleSet> candidate, const std::string& path,
                     const std::function<bool(const std::string&)>& report);

  Archive& archive() { return archive_; }

 private:
  uint64_t SegmentSizeOf(const InodeRecord& inode) const;
  // unlink (directory = false) or rmdir (directory = true).
  Status RemoveName(uint64_t parent, const std::string& name, bool directory);
  // Adds a kernel reference. REQUIRES: catalog mutex.
  void AddLookup(uint64_t ino) { state_.live[ino].nlookup++; }
  // Frees an inode with no names left once nothing references it. REQUIRES: catalog mutex.
  Status MaybeDelete(uint64_t ino);
  // Unlinks one name of `ino` (already removed from its directory); a persisted file that
  // keeps other names is queued for a policy check. REQUIRES: catalog mutex, open transaction.
  Status DropLink(InodeRecord& inode, int64_t now);
  // Brings persisted segments [first, last] of `ino` back into the staging cache.
  // REQUIRES: data_lock(ino) held, catalog mutex NOT held.
  Status FetchSegments(uint64_t ino, int fd, uint64_t first, uint64_t last);
  // Evicts the clean files among `inos` from the staging cache, a durable commit per group.
  Status EvictFiles(const std::vector<uint64_t>& inos);
  // Drops the persisted, unmodified segments of a file that is still open from the cache.
  Status EvictCleanSegments(uint64_t ino);
  // Evicts least recently used clean files (then persisted parts of files still being
  // written) while the cache is over its budget.
  void EvictOverBudget();
  // Every call that takes a name checks it first: FUSE passes names of up to 1024 bytes,
  // so ENAMETOOLONG over 255 (NAME_MAX) is the filesystem's job, before any lookup.
  Status CheckName(const std::string& name) const;
  // Validates a user.cairn.* or trusted.cairn.* value set on `ino`: key, value, named
  // policy (defined; selectable by users), admin locks. Returns the canonical spelling,
  // or EINVAL/EPERM with the reason (also logged). REQUIRES: catalog mutex.
  Result<std::string> CheckPolicyXattr(uint64_t ino, const std::string& name, std::span<const uint8_t> value);
  // user.cairn.effective, .effective.source, .state, .location. REQUIRES: catalog mutex.
  Result<std::string> ComputedPolicyValue(uint64_t ino, const std::string& suffix);
  // Room left in the disk group new data goes to. Thread-safe.
  uint64_t FreeDiskBytes();

  Archive& archive_;
  FileState state_;
  SegmentStore store_;
  Persister persister_;
  Reconciler reconciler_;
};

}  // namespace cairn
