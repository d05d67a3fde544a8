#define FUSE_USE_VERSION 312
#include "fuse/fuse_ops.h"

#include <fuse_lowlevel.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>
#include <sstream>

#include <fmt/format.h>

#include "fuse/errno_map.h"
#include "util/cairn_mounts.h"
#include "util/log.h"

namespace cairn {
namespace {

// cairn is the only writer of its namespace, so the kernel may cache names and
// attributes for long (passthrough_hp does the same with its default timeout).
constexpr double kCacheTimeout = 86400.0;

Filesystem& Fs(fuse_req_t req) { return *static_cast<Filesystem*>(fuse_req_userdata(req)); }
FileHandle* Handle(fuse_file_info* fi) { return reinterpret_cast<FileHandle*>(fi->fh); }

constexpr int64_t kNsPerSecond = 1000000000;

// Seconds and nanoseconds of 0..999999999, also before 1970 (-1.5 s is -2 s + 0.5 s).
timespec ToTimespec(int64_t ns) {
  int64_t seconds = ns / kNsPerSecond, rest = ns % kNsPerSecond;
  if (rest < 0) {
    seconds--;
    rest += kNsPerSecond;
  }
  return {static_cast<time_t>(seconds), static_cast<long>(rest)};
}

struct stat ToStat(const InodeRecord& r) {
  struct stat st {};
  st.st_ino = r.ino;
  st.st_mode = r.mode;
  st.st_nlink = r.nlink;
  st.st_uid = r.uid;
  st.st_gid = r.gid;
  st.st_rdev = r.rdev;
  st.st_size = static_cast<off_t>(r.size);
  st.st_blksize = 1 << 20;
  st.st_blocks = static_cast<blkcnt_t>((r.size + 511) / 512);
  st.st_atim = ToTimespec(r.atime_ns);
  st.st_mtim = ToTimespec(r.mtime_ns);
  st.st_ctim = ToTimespec(r.ctime_ns);
  return st;
}

fuse_entry_param ToEntry(const InodeRecord& r) {
  fuse_entry_param e{};
  e.ino = r.ino;
  e.generation = r.generation;  // tells a number reused after a lost commit from the old file
  e.attr = ToStat(r);
  e.attr_timeout = kCacheTimeout;
  e.entry_timeout = kCacheTimeout;
  return e;
}

Caller CallerOf(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  // Used within the request only, so `req` is still valid when it is asked.
  auto supplementary = [req]() -> std::vector<uint32_t> {
    std::vector<gid_t> list(64);
    for (;;) {
      int n = fuse_req_getgroups(req, static_cast<int>(list.size()), list.data());
      if (n < 0) {  // no /proc, or the caller is gone: no supplementary groups, so less access
        LogWarning("cannot read the supplementary groups of pid {}: {}", fuse_req_ctx(req)->pid, std::strerror(-n));
        return {};
      }
      if (static_cast<size_t>(n) <= list.size()) return {list.begin(), list.begin() + n};
      list.resize(static_cast<size_t>(n));
    }
  };
  return Caller{ctx->uid, ctx->gid, ctx->umask, supplementary};
}

// Nanoseconds since 1970; a time past what they hold (before 1678, after 2262) is clamped to
// the nearest one they do, as the kernel clamps times to a filesystem's range.
int64_t ToNs(const timespec& ts) {
  constexpr int64_t kLastSecond = INT64_MAX / kNsPerSecond - 1;
  if (ts.tv_sec > kLastSecond) return INT64_MAX;
  if (ts.tv_sec < -kLastSecond) return SetAttrRequest::kTimeNow + 1;  // the earliest: kTimeNow is INT64_MIN
  return static_cast<int64_t>(ts.tv_sec) * kNsPerSecond + ts.tv_nsec;
}

void ReplyError(fuse_req_t req, const Status& st, const char* op) { fuse_reply_err(req, ErrnoFor(st, op)); }

void ReplyEntry(fuse_req_t req, const Result<InodeRecord>& r, const char* op) {
  if (r.ok()) {
    fuse_entry_param e = ToEntry(*r);
    fuse_reply_entry(req, &e);
  } else {
    ReplyError(req, r.status(), op);
  }
}

// Every handler runs its body through this, so no exception unwinds into libfuse (F7).
template <typename Body>
void Guarded(fuse_req_t req, const char* op, Body body) {
  try {
    body();
  } catch (const std::bad_alloc&) {
    fuse_reply_err(req, ENOMEM);
  } catch (const std::exception& e) {
    LogError("{}: internal error: {}", op, e.what());
    fuse_reply_err(req, EIO);
  }
}

// Forget's only answer is none, so an exception there is logged and the next inode forgotten.
void ForgetGuarded(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  try {
    Fs(req).Forget(ino, nlookup);
  } catch (const std::exception& e) {
    LogError("forget of inode {}: internal error: {}", ino, e.what());
  }
}

void OpInit(void* userdata, fuse_conn_info* conn) {
  auto want = [conn](unsigned cap) {
    if (conn->capable & cap) conn->want |= cap;
  };
  want(FUSE_CAP_WRITEBACK_CACHE);
  want(FUSE_CAP_POSIX_ACL);
  want(FUSE_CAP_DONT_MASK);
  want(FUSE_CAP_EXPORT_SUPPORT);
  conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;  // truncation arrives as setattr(size)
  // The kernel clears setuid/setgid on chown, truncate and write (a setattr of the mode):
  // the filesystem would have to otherwise, for the writes too, which it sees without caller.
  conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
  conn->max_write = 1 << 20;
  // What the kernel takes is the least of this and the mount's read_ahead_kb (SetReadAhead).
  uint64_t read_ahead = static_cast<Filesystem*>(userdata)->archive().options().read_ahead;
  if (read_ahead != 0) conn->max_readahead = static_cast<unsigned>(read_ahead);
  conn->time_gran = 1;
}

void OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Guarded(req, "lookup", [&] {
    auto r = Fs(req).Lookup(parent, name);
    if (!r.ok() && r.status().sys_errno() == ENOENT) {
      fuse_entry_param negative{};  // ino 0: the kernel caches the miss
      negative.entry_timeout = kCacheTimeout;
      fuse_reply_entry(req, &negative);
      return;
    }
    ReplyEntry(req, r, "lookup");
  });
}

void OpForget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  ForgetGuarded(req, ino, nlookup);
  fuse_reply_none(req);
}

void OpForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  for (size_t i = 0; i < count; i++) ForgetGuarded(req, forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void OpGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  Guarded(req, "getattr", [&] {
    auto r = Fs(req).GetAttr(ino);
    if (!r.ok()) return ReplyError(req, r.status(), "getattr");
    struct stat st = ToStat(*r);
    fuse_reply_attr(req, &st, kCacheTimeout);
  });
}

void OpSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  Guarded(req, "setattr", [&] {
    SetAttrRequest request;
    if (to_set & FUSE_SET_ATTR_MODE) request.mode = attr->st_mode;
    if (to_set & FUSE_SET_ATTR_UID) request.uid = attr->st_uid;
    if (to_set & FUSE_SET_ATTR_GID) request.gid = attr->st_gid;
    if (to_set & FUSE_SET_ATTR_SIZE) request.size = static_cast<uint64_t>(attr->st_size);
    if (to_set & FUSE_SET_ATTR_ATIME) request.atime_ns = ToNs(attr->st_atim);
    if (to_set & FUSE_SET_ATTR_ATIME_NOW) request.atime_ns = SetAttrRequest::kTimeNow;
    if (to_set & FUSE_SET_ATTR_MTIME) request.mtime_ns = ToNs(attr->st_mtim);
    if (to_set & FUSE_SET_ATTR_MTIME_NOW) request.mtime_ns = SetAttrRequest::kTimeNow;
    if (to_set & FUSE_SET_ATTR_CTIME) request.ctime_ns = ToNs(attr->st_ctim);
    auto r = Fs(req).SetAttr(ino, request, CallerOf(req));
    if (!r.ok()) return ReplyError(req, r.status(), "setattr");
    struct stat st = ToStat(*r);
    fuse_reply_attr(req, &st, kCacheTimeout);
  });
}

void OpReadlink(fuse_req_t req, fuse_ino_t ino) {
  Guarded(req, "readlink", [&] {
    auto r = Fs(req).ReadLink(ino);
    if (!r.ok()) return ReplyError(req, r.status(), "readlink");
    fuse_reply_readlink(req, r->c_str());
  });
}

void OpMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  Guarded(req, "mknod", [&] { ReplyEntry(req, Fs(req).MakeNode(parent, name, mode, rdev, CallerOf(req)), "mknod"); });
}

void OpMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  Guarded(req, "mkdir", [&] {
    ReplyEntry(req, Fs(req).MakeNode(parent, name, S_IFDIR | (mode & 07777), 0, CallerOf(req)), "mkdir");
  });
}

void OpSymlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  Guarded(req, "symlink", [&] {
    ReplyEntry(req, Fs(req).MakeNode(parent, name, S_IFLNK | 0777, 0, CallerOf(req), target), "symlink");
  });
}

void OpLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char* new_name) {
  Guarded(req, "link", [&] { ReplyEntry(req, Fs(req).Link(ino, new_parent, new_name, CallerOf(req)), "link"); });
}

void OpUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Guarded(req, "unlink", [&] { fuse_reply_err(req, ErrnoFor(Fs(req).Unlink(parent, name, CallerOf(req)), "unlink")); });
}

void OpRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Guarded(req, "rmdir", [&] { fuse_reply_err(req, ErrnoFor(Fs(req).Rmdir(parent, name), "rmdir")); });
}

void OpRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent, const char* new_name,
              unsigned int flags) {
  Guarded(req, "rename", [&] {
    fuse_reply_err(req, ErrnoFor(Fs(req).Rename(parent, name, new_parent, new_name, flags, CallerOf(req)), "rename"));
  });
}

void OpOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Guarded(req, "open", [&] {
    Filesystem& fs = Fs(req);  // a reply frees req, whether or not it reached the kernel
    auto r = fs.Open(ino, fi->flags, CallerOf(req));
    if (!r.ok()) return ReplyError(req, r.status(), "open");
    fi->fh = reinterpret_cast<uint64_t>(*r);
    fi->keep_cache = 1;  // nobody else changes the data behind the kernel's back
    if (fuse_reply_open(req, fi) == -ENOENT) fs.Release(*r);  // the opener was interrupted
  });
}

void OpCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  Guarded(req, "create", [&] {
    Filesystem& fs = Fs(req);  // a reply frees req, whether or not it reached the kernel
    InodeRecord attr;
    auto r = fs.Create(parent, name, mode, fi->flags, CallerOf(req), &attr);
    if (!r.ok()) return ReplyError(req, r.status(), "create");
    fi->fh = reinterpret_cast<uint64_t>(*r);
    fi->keep_cache = 1;
    fuse_entry_param e = ToEntry(attr);
    if (fuse_reply_create(req, &e, fi) == -ENOENT) {
      fs.Release(*r);
      fs.Forget(attr.ino, 1);
    }
  });
}

void OpRead(fuse_req_t req, fuse_ino_t, size_t size, off_t offset, fuse_file_info* fi) {
  Guarded(req, "read", [&] {
    ReadReply reply(size);
    Status st = Fs(req).Read(Handle(fi), static_cast<uint64_t>(offset), size, reply);
    if (!st.ok()) return ReplyError(req, st, "read");
    if (reply.size() == 0) return fuse_reply_buf(req, nullptr, 0), void();
    fuse_reply_iov(req, reply.pieces().data(), static_cast<int>(reply.pieces().size()));  // no copy of the bytes
  });
}

void OpWrite(fuse_req_t req, fuse_ino_t, const char* data, size_t size, off_t offset, fuse_file_info* fi) {
  Guarded(req, "write", [&] {
    auto r = Fs(req).Write(Handle(fi), static_cast<uint64_t>(offset),
                           {reinterpret_cast<const uint8_t*>(data), size});
    if (!r.ok()) return ReplyError(req, r.status(), "write");
    fuse_reply_write(req, *r);
  });
}

void OpRelease(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  Guarded(req, "release", [&] {
    Fs(req).Release(Handle(fi));
    fuse_reply_err(req, 0);
  });
}

void OpFsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info* fi) {
  Guarded(req, "fsync", [&] { fuse_reply_err(req, ErrnoFor(Fs(req).Fsync(Handle(fi)), "fsync")); });
}

void OpFsyncdir(fuse_req_t req, fuse_ino_t, int, fuse_file_info*) {
  Guarded(req, "fsyncdir", [&] { fuse_reply_err(req, ErrnoFor(Fs(req).SyncMetadata(), "fsyncdir")); });
}

void OpOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Guarded(req, "opendir", [&] {
    auto r = Fs(req).GetAttr(ino);
    if (!r.ok()) return ReplyError(req, r.status(), "opendir");
    if (!S_ISDIR(r->mode)) return fuse_reply_err(req, ENOTDIR), void();
    fi->cache_readdir = 1;
    fi->keep_cache = 1;
    fuse_reply_open(req, fi);
  });
}

void OpReleasedir(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

// Offsets: 1 is ".", 2 is "..", an entry with catalog cookie c is c + 2.
void ReadDirCommon(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, bool plus) {
  Filesystem& fs = Fs(req);
  std::vector<char> buffer(size);
  size_t used = 0;
  auto add = [&](const char* name, const InodeRecord& attr, off_t next, bool counted) {
    size_t need;
    if (plus) {
      fuse_entry_param e = ToEntry(attr);
      if (!counted) e = fuse_entry_param{.ino = attr.ino, .generation = 0, .attr = ToStat(attr)};
      need = fuse_add_direntry_plus(req, buffer.data() + used, size - used, name, &e, next);
    } else {
      struct stat st = ToStat(attr);
      need = fuse_add_direntry(req, buffer.data() + used, size - used, name, &st, next);
    }
    if (need > size - used) return false;
    used += need;
    return true;
  };
  auto self = fs.GetAttr(ino);
  if (!self.ok()) return ReplyError(req, self.status(), "readdir");
  if (offset < 1 && !add(".", *self, 1, false)) return fuse_reply_buf(req, buffer.data(), used), void();
  if (offset < 2) {
    InodeRecord parent = *self;
    auto up = fs.Lookup(ino, "..");
    if (up.ok()) {
      parent = *up;
      fs.Forget(up->ino, 1);
    }
    if (!add("..", parent, 2, false)) return fuse_reply_buf(req, buffer.data(), used), void();
  }
  uint64_t after = offset > 2 ? static_cast<uint64_t>(offset) - 2 : 0;
  const size_t batch = size / 32 + 1;
  std::vector<uint64_t> counted_inos;  // readdirplus: the lookup references this reply hands over
  // An empty reply ends the listing: when every entry of a whole batch was removed between
  // listing it and looking it up (or left out, its inode missing), the entries after it are
  // listed instead.
  for (;;) {
    uint64_t resume = 0;
    auto entries = fs.ReadDir(ino, after, batch, &resume);
    if (!entries.ok()) return ReplyError(req, entries.status(), "readdir");
    bool full = false;
    size_t listed = 0;
    for (const DirEntry& entry : *entries) {
      if (plus) {
        // Each readdirplus entry is a lookup reference; take it before replying.
        auto counted = fs.Lookup(ino, entry.name);
        if (!counted.ok() && counted.status().sys_errno() == ENOENT) continue;  // removed since it was listed
        if (!counted.ok()) {  // F5: entries already in the buffer go out; the error, if none did
          if (used == 0) return ReplyError(req, counted.status(), "readdirplus");
          full = true;
          break;
        }
        if (!add(entry.name.c_str(), *counted, static_cast<off_t>(entry.cookie + 2), true)) {
          fs.Forget(counted->ino, 1);  // did not fit: the kernel never saw it (F5)
          full = true;
          break;
        }
        counted_inos.push_back(counted->ino);
      } else if (!add(entry.name.c_str(), entry.attr, static_cast<off_t>(entry.cookie + 2), false)) {
        full = true;
        break;
      }
      listed++;
    }
    if (full || listed > 0 || resume == 0) break;
    after = resume;
  }
  if (fuse_reply_buf(req, buffer.data(), used) != 0) {
    for (uint64_t counted : counted_inos) fs.Forget(counted, 1);  // the kernel never saw them
  }
}

void OpReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info*) {
  Guarded(req, "readdir", [&] { ReadDirCommon(req, ino, size, offset, false); });
}

void OpReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info*) {
  Guarded(req, "readdirplus", [&] { ReadDirCommon(req, ino, size, offset, true); });
}

void OpStatfs(fuse_req_t req, fuse_ino_t) {
  Guarded(req, "statfs", [&] {
    auto found = Fs(req).StatFs();
    if (!found.ok()) return ReplyError(req, found.status(), "statfs");
    const FsStats& stats = *found;
    struct statvfs sv {};
    sv.f_bsize = 4096;
    sv.f_frsize = 4096;
    sv.f_blocks = stats.total_bytes / 4096;
    sv.f_bfree = stats.free_bytes / 4096;
    sv.f_bavail = stats.free_bytes / 4096;
    sv.f_files = stats.inodes + sv.f_bfree;
    sv.f_ffree = sv.f_bfree;
    sv.f_favail = sv.f_bfree;
    sv.f_namemax = 255;
    fuse_reply_statfs(req, &sv);
  });
}

void OpSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size, int flags) {
  Guarded(req, "setxattr", [&] {
    Status st = Fs(req).SetXattr(ino, name, {reinterpret_cast<const uint8_t*>(value), size}, flags, CallerOf(req));
    fuse_reply_err(req, ErrnoFor(st, "setxattr"));
  });
}

void OpGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  Guarded(req, "getxattr", [&] {
    auto r = Fs(req).GetXattr(ino, name);
    if (!r.ok()) return ReplyError(req, r.status(), "getxattr");
    if (size == 0) return fuse_reply_xattr(req, r->size()), void();
    if (size < r->size()) return fuse_reply_err(req, ERANGE), void();
    fuse_reply_buf(req, reinterpret_cast<const char*>(r->data()), r->size());
  });
}

void OpListxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  Guarded(req, "listxattr", [&] {
    auto r = Fs(req).ListXattrs(ino, CallerOf(req));
    if (!r.ok()) return ReplyError(req, r.status(), "listxattr");
    std::string names;
    for (const auto& name : *r) names.append(name).push_back('\0');
    if (size == 0) return fuse_reply_xattr(req, names.size()), void();
    if (size < names.size()) return fuse_reply_err(req, ERANGE), void();
    fuse_reply_buf(req, names.data(), names.size());
  });
}

void OpRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  Guarded(req, "removexattr", [&] {
    fuse_reply_err(req, ErrnoFor(Fs(req).RemoveXattr(ino, name, CallerOf(req)), "removexattr"));
  });
}

fuse_lowlevel_ops MakeOperations() {
  fuse_lowlevel_ops ops{};
  ops.init = OpInit;
  ops.lookup = OpLookup;
  ops.forget = OpForget;
  ops.forget_multi = OpForgetMulti;
  ops.getattr = OpGetattr;
  ops.setattr = OpSetattr;
  ops.readlink = OpReadlink;
  ops.mknod = OpMknod;
  ops.mkdir = OpMkdir;
  ops.symlink = OpSymlink;
  ops.link = OpLink;
  ops.unlink = OpUnlink;
  ops.rmdir = OpRmdir;
  ops.rename = OpRename;
  ops.open = OpOpen;
  ops.create = OpCreate;
  ops.read = OpRead;
  ops.write = OpWrite;
  // No flush: data is already in the staging cache when a write returns, and without the
  // handler the kernel stops sending FLUSH on every close (one round trip less per file).
  ops.release = OpRelease;
  ops.fsync = OpFsync;
  ops.opendir = OpOpendir;
  ops.readdir = OpReaddir;
  ops.readdirplus = OpReaddirplus;
  ops.releasedir = OpReleasedir;
  ops.fsyncdir = OpFsyncdir;
  ops.statfs = OpStatfs;
  ops.setxattr = OpSetxattr;
  ops.getxattr = OpGetxattr;
  ops.listxattr = OpListxattr;
  ops.removexattr = OpRemovexattr;
  return ops;
}

// The kernel reads ahead of a FUSE reader by its mount's read_ahead_kb, 128 KiB unless set
// (whatever INIT asks for): sets it to `bytes` for the cairn mount at `mountpoint`, a
// canonical path. Only root may; anyone else keeps the kernel's, with a log line.
void SetReadAhead(const std::string& mountpoint, uint64_t bytes) {
  std::ifstream in("/proc/self/mountinfo");
  std::stringstream mountinfo;
  mountinfo << in.rdbuf();
  auto device = CairnMountDevice(mountinfo.str(), mountpoint);
  if (!device) {
    LogWarning("read_ahead: the mount at {} is not in /proc/self/mountinfo; the kernel's read-ahead stays", mountpoint);
    return;
  }
  std::string knob = fmt::format("/sys/class/bdi/{}/read_ahead_kb", *device);
  std::ofstream out(knob);
  out << bytes / 1024 << '\n';
  out.flush();
  if (!out) {
    LogInfo("read_ahead: cannot write {} ({}); the kernel reads ahead its default", knob, std::strerror(errno));
  }
}

}  // namespace

Status ServeFuse(Filesystem& fs, const MountSettings& settings, const std::function<Status()>& ready) {
  std::vector<std::string> arg_strings = {"cairn"};
  std::string fsname;  // the archive directory; libfuse reads a backslash-escaped comma as part of it
  for (char c : fs.archive().dir()) {
    if (c == ',' || c == '\\') fsname += '\\';
    fsname += c;
  }
  std::string options = fmt::format("fsname={},subtype=cairn,default_permissions", fsname);
  for (const auto& option : settings.fuse_options) options += "," + option;
  arg_strings.push_back("-o");
  arg_strings.push_back(options);
  if (settings.debug) arg_strings.push_back("-d");
  std::vector<char*> argv;
  for (auto& s : arg_strings) argv.push_back(s.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());

  fuse_lowlevel_ops ops = MakeOperations();
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, &fs);
  if (!se) return Status::InvalidArgument(fmt::format("libfuse rejected the mount options '{}'", options));
  Status result;
  // Now: once mounted, resolving the path would ask this daemon, which does not serve yet.
  std::error_code error;
  std::string canonical = std::filesystem::canonical(settings.mountpoint, error).string();
  if (fuse_set_signal_handlers(se) != 0) {
    result = Status::IOError("cannot install signal handlers");
  } else {
    if (fuse_session_mount(se, settings.mountpoint.c_str()) != 0) {
      result = Status::IOError(fmt::format("cannot mount on {} (see the message above)", settings.mountpoint));
    } else {
      uint64_t read_ahead = fs.archive().options().read_ahead;
      if (read_ahead != 0 && error) {
        LogWarning("read_ahead: cannot resolve {} ({}); the kernel's read-ahead stays", settings.mountpoint,
                   error.message());
      } else if (read_ahead != 0) {
        SetReadAhead(canonical, read_ahead);
      }
      // open() asks the kernel to keep a file's pages; a crypto-erase must be able to take
      // them back (Filesystem::ChangeFileKeys).
      fs.SetKernelCacheDropper([se](uint64_t ino) {
        int rc = fuse_lowlevel_notify_inval_inode(se, ino, 0, 0);
        if (rc != 0 && rc != -ENOENT) {  // ENOENT: the kernel has nothing of it
          LogWarning("inode {}: the kernel's cached pages were not dropped: {}", ino, std::strerror(-rc));
        }
      });
      result = ready();
      if (result.ok()) {
        LogInfo("mounted {} on {}", fs.archive().dir(), settings.mountpoint);
        int rc;
        if (settings.single_thread) {
          rc = fuse_session_loop(se);
        } else {
          fuse_loop_config* config = fuse_loop_cfg_create();
          fuse_loop_cfg_set_max_threads(config, 16);
          fuse_loop_cfg_set_clone_fd(config, 0);
          rc = fuse_session_loop_mt(se, config);
          fuse_loop_cfg_destroy(config);
        }
        if (rc != 0) LogWarning("FUSE loop ended with {}", rc);
      }
      fs.SetKernelCacheDropper(nullptr);
      fuse_session_unmount(se);
    }
    fuse_remove_signal_handlers(se);
  }
  fuse_session_destroy(se);
  fuse_opt_free_args(&args);
  return result;
}

}  // namespace cairn
