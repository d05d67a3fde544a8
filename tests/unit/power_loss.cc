#include "power_loss.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

namespace cairn::test {

void PowerSupply::Arm(int cut_at) {
  std::lock_guard lock(mutex_);
  armed_ = true;
  cut_at_ = cut_at;
  operations_ = 0;
  operations_of_ = {};
  journals_.clear();
  torn_.clear();
}

bool PowerSupply::Draw(Device device) {
  if (!armed_) return true;
  ++operations_;
  ++operations_of_[static_cast<size_t>(device)];
  return cut_at_ == 0 || operations_ < cut_at_;
}

int PowerSupply::operations() const {
  std::lock_guard lock(mutex_);
  return operations_;
}

int PowerSupply::operations(Device device) const {
  std::lock_guard lock(mutex_);
  return operations_of_[static_cast<size_t>(device)];
}

bool PowerSupply::cut() const {
  std::lock_guard lock(mutex_);
  return armed_ && cut_at_ > 0 && operations_ >= cut_at_;
}

void PowerSupply::AddCatalog(const std::string& path) {
  std::lock_guard lock(mutex_);
  catalogs_.insert(path);
}

PowerSupply::Journal& PowerSupply::JournalOf(Device device, const std::string& path) {
  auto it = journals_.find(path);
  if (it != journals_.end()) return it->second;
  struct stat st;
  uint64_t size = ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  return journals_.emplace(path, Journal{device, size, {}}).first->second;
}

Status PowerSupply::Change(Device device, const std::string& path, uint64_t offset, std::span<const uint8_t> data,
                           uint32_t sector,
                           const std::function<Result<std::vector<uint8_t>>()>& read_old,
                           const std::function<Status()>& apply) {
  std::lock_guard lock(mutex_);
  if (!Draw(device)) {
    if (operations_ == cut_at_ && sector > 0 && data.size() > sector) {  // torn: its first half of sectors landed
      uint64_t first_boundary = (offset + sector - 1) / sector * sector;
      uint64_t whole = (offset + data.size()) / sector - first_boundary / sector;
      uint64_t landed = first_boundary - offset + whole / 2 * sector;
      if (landed > 0) torn_.push_back({path, offset, {data.begin(), data.begin() + static_cast<long>(landed)}});
    }
    return Status::IOError(fmt::format("{}: power is off", path));
  }
  if (!armed_) return apply();
  Journal& journal = JournalOf(device, path);
  auto old = read_old();
  if (!old.ok()) return old.status();
  journal.undo.push_back({offset, std::move(*old)});
  return apply();
}

Status PowerSupply::Sync(Device device, const std::string& path) {
  if (before_sync_) before_sync_(device, path);  // without the mutex: it may wait
  std::lock_guard lock(mutex_);
  if (!Draw(device)) return Status::IOError(fmt::format("{}: power is off", path));
  if (armed_) {
    journals_.erase(path);
    JournalOf(device, path);  // the present size is the synced one
  }
  return Status::OK();
}

Status PowerSupply::Delete(const std::string& path, const std::function<Status()>& apply) {
  std::lock_guard lock(mutex_);
  if (!Draw(Device::kCatalog)) return Status::IOError(fmt::format("{}: power is off", path));
  Status st = apply();
  if (st.ok()) journals_.erase(path);
  return st;
}

Status PowerSupply::Restore(Survivors survivors) {
  std::lock_guard lock(mutex_);
  bool was_cut = armed_ && cut_at_ > 0 && operations_ >= cut_at_;
  armed_ = false;
  if (!was_cut) return Status::OK();
  for (const auto& [path, journal] : journals_) {
    Unsynced fate = journal.device == Device::kDisk ? survivors.disks : survivors.catalog;
    if (fate == Unsynced::kKept) continue;
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno(fmt::format("restore {}", path), errno);
    bool ok = true;
    for (auto undo = journal.undo.rbegin(); undo != journal.undo.rend() && ok; ++undo) {
      ok = ::pwrite(fd, undo->old.data(), undo->old.size(), static_cast<off_t>(undo->offset)) ==
           static_cast<ssize_t>(undo->old.size());
    }
    ok = ok && ::ftruncate(fd, static_cast<off_t>(journal.synced_size)) == 0;
    int err = errno;
    ::close(fd);
    if (!ok) return Status::FromErrno(fmt::format("restore {}", path), err);
  }
  for (const Torn& torn : torn_) {
    if (survivors.disks == Unsynced::kLost) break;
    int fd = ::open(torn.path.c_str(), O_RDWR | O_CLOEXEC);
    bool ok = fd >= 0 && ::pwrite(fd, torn.prefix.data(), torn.prefix.size(), static_cast<off_t>(torn.offset)) ==
                             static_cast<ssize_t>(torn.prefix.size());
    int err = errno;
    if (fd >= 0) ::close(fd);
    if (!ok) return Status::FromErrno(fmt::format("restore {}", torn.path), err);
  }
  // The WAL index lives in shared memory: a reboot loses it, and SQLite rebuilds it from the WAL.
  for (const std::string& catalog : catalogs_) ::unlink((catalog + "-shm").c_str());
  journals_.clear();
  torn_.clear();
  return Status::OK();
}

Result<std::vector<uint8_t>> PowerLossDisk::ReadOld(uint64_t offset, uint64_t length) {
  std::vector<uint8_t> old(length);
  CAIRN_RETURN_IF_ERROR(target()->ReadAt(offset, old));
  return old;
}

Status PowerLossDisk::WriteAt(uint64_t offset, std::span<const uint8_t> src) {
  return supply_.Change(
      Device::kDisk, Name(), offset, src, SectorSize(), [&] { return ReadOld(offset, src.size()); },
      [&] { return DiskWrapper::WriteAt(offset, src); });
}

Status PowerLossDisk::Discard(uint64_t offset, uint64_t length) {
  return supply_.Change(
      Device::kDisk, Name(), offset, {}, 0, [&] { return ReadOld(offset, length); },
      [&] { return DiskWrapper::Discard(offset, length); });
}

Status PowerLossDisk::Sync() {
  return supply_.Sync(Device::kDisk, Name());
}

namespace {

// An open file of the shim: the real unix file follows it in the same allocation.
struct ShimFile {
  sqlite3_file base;
  PowerSupply* supply;
  const char* path;  // null for temporary files; SQLite keeps the name valid until xClose
  sqlite3_file* real;
};

ShimFile* AsShim(sqlite3_file* file) { return reinterpret_cast<ShimFile*>(file); }
sqlite3_file* Real(sqlite3_file* file) { return AsShim(file)->real; }
PowerLossVfs::Shim* AsShim(sqlite3_vfs* vfs) { return reinterpret_cast<PowerLossVfs::Shim*>(vfs); }

Status FromSqlite(int rc, const char* what) {
  return rc == SQLITE_OK ? Status::OK() : Status::IOError(fmt::format("{}: SQLite error {}", what, rc));
}

// What [offset, offset + length) of `file` holds now, up to its end.
Result<std::vector<uint8_t>> ReadOld(sqlite3_file* real, sqlite3_int64 offset, sqlite3_int64 length) {
  sqlite3_int64 size = 0;
  if (int rc = real->pMethods->xFileSize(real, &size); rc != SQLITE_OK) return FromSqlite(rc, "file size");
  std::vector<uint8_t> old(static_cast<size_t>(std::clamp<sqlite3_int64>(size - offset, 0, length)));
  if (old.empty()) return old;
  int rc = real->pMethods->xRead(real, old.data(), static_cast<int>(old.size()), offset);
  if (rc != SQLITE_OK) return FromSqlite(rc, "read");
  return old;
}

int Close(sqlite3_file* f) { return Real(f)->pMethods->xClose(Real(f)); }
int Read(sqlite3_file* f, void* buf, int amount, sqlite3_int64 offset) {
  return Real(f)->pMethods->xRead(Real(f), buf, amount, offset);
}
int Write(sqlite3_file* f, const void* buf, int amount, sqlite3_int64 offset) {
  ShimFile* shim = AsShim(f);
  sqlite3_file* real = shim->real;
  if (!shim->path) return real->pMethods->xWrite(real, buf, amount, offset);
  std::span<const uint8_t> data(static_cast<const uint8_t*>(buf), static_cast<size_t>(amount));
  Status st = shim->supply->Change(
      Device::kCatalog, shim->path, static_cast<uint64_t>(offset), data, 0,
      [&] { return ReadOld(real, offset, amount); },
      [&] { return FromSqlite(real->pMethods->xWrite(real, buf, amount, offset), "write"); });
  return st.ok() ? SQLITE_OK : SQLITE_IOERR_WRITE;
}
int Truncate(sqlite3_file* f, sqlite3_int64 size) {
  ShimFile* shim = AsShim(f);
  sqlite3_file* real = shim->real;
  if (!shim->path) return real->pMethods->xTruncate(real, size);
  Status st = shim->supply->Change(
      Device::kCatalog, shim->path, static_cast<uint64_t>(size), {}, 0,
      [&] { return ReadOld(real, size, INT64_MAX - size); },
      [&] { return FromSqlite(real->pMethods->xTruncate(real, size), "truncate"); });
  return st.ok() ? SQLITE_OK : SQLITE_IOERR_TRUNCATE;
}
int Sync(sqlite3_file* f, int flags) {
  ShimFile* shim = AsShim(f);
  sqlite3_file* real = shim->real;
  if (!shim->path) return real->pMethods->xSync(real, flags);
  return shim->supply->Sync(Device::kCatalog, shim->path).ok() ? SQLITE_OK : SQLITE_IOERR_FSYNC;
}
int FileSize(sqlite3_file* f, sqlite3_int64* size) { return Real(f)->pMethods->xFileSize(Real(f), size); }
int Lock(sqlite3_file* f, int level) { return Real(f)->pMethods->xLock(Real(f), level); }
int Unlock(sqlite3_file* f, int level) { return Real(f)->pMethods->xUnlock(Real(f), level); }
int CheckReservedLock(sqlite3_file* f, int* out) { return Real(f)->pMethods->xCheckReservedLock(Real(f), out); }
int FileControl(sqlite3_file* f, int op, void* arg) { return Real(f)->pMethods->xFileControl(Real(f), op, arg); }
int SectorSize(sqlite3_file* f) { return Real(f)->pMethods->xSectorSize(Real(f)); }
int DeviceCharacteristics(sqlite3_file* f) { return Real(f)->pMethods->xDeviceCharacteristics(Real(f)); }
int ShmMap(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
  return Real(f)->pMethods->xShmMap(Real(f), region, size, extend, out);
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return Real(f)->pMethods->xShmLock(Real(f), offset, n, flags);
}
void ShmBarrier(sqlite3_file* f) { Real(f)->pMethods->xShmBarrier(Real(f)); }
int ShmUnmap(sqlite3_file* f, int delete_flag) { return Real(f)->pMethods->xShmUnmap(Real(f), delete_flag); }
int Fetch(sqlite3_file* f, sqlite3_int64 offset, int amount, void** out) {
  return Real(f)->pMethods->xFetch(Real(f), offset, amount, out);
}
int Unfetch(sqlite3_file* f, sqlite3_int64 offset, void* p) { return Real(f)->pMethods->xUnfetch(Real(f), offset, p); }

const sqlite3_io_methods kShimMethods = {
    3,        Close,    Read,    Write,      Truncate, Sync,   FileSize, Lock,  Unlock, CheckReservedLock, FileControl,
    SectorSize, DeviceCharacteristics, ShmMap, ShmLock, ShmBarrier, ShmUnmap, Fetch, Unfetch};

int Open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  PowerLossVfs::Shim* shim = AsShim(vfs);
  ShimFile* f = AsShim(file);
  f->supply = shim->supply;
  f->path = name;
  f->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + sizeof(ShimFile));
  int rc = shim->real->xOpen(shim->real, name, f->real, flags, out_flags);
  if (rc != SQLITE_OK) {
    file->pMethods = nullptr;  // SQLite then does not close it
    return rc;
  }
  if (name && (flags & SQLITE_OPEN_MAIN_DB)) shim->supply->AddCatalog(name);
  file->pMethods = &kShimMethods;
  return SQLITE_OK;
}
int Delete(sqlite3_vfs* vfs, const char* name, int sync_dir) {
  PowerLossVfs::Shim* shim = AsShim(vfs);
  Status st = shim->supply->Delete(
      name, [&] { return FromSqlite(shim->real->xDelete(shim->real, name, sync_dir), "delete"); });
  return st.ok() ? SQLITE_OK : SQLITE_IOERR_DELETE;
}
int Access(sqlite3_vfs* v, const char* name, int flags, int* out) {
  return AsShim(v)->real->xAccess(AsShim(v)->real, name, flags, out);
}
int FullPathname(sqlite3_vfs* v, const char* name, int n, char* out) {
  return AsShim(v)->real->xFullPathname(AsShim(v)->real, name, n, out);
}
void* DlOpen(sqlite3_vfs* v, const char* name) { return AsShim(v)->real->xDlOpen(AsShim(v)->real, name); }
void DlError(sqlite3_vfs* v, int n, char* out) { AsShim(v)->real->xDlError(AsShim(v)->real, n, out); }
void (*DlSym(sqlite3_vfs* v, void* lib, const char* symbol))(void) {
  return AsShim(v)->real->xDlSym(AsShim(v)->real, lib, symbol);
}
void DlClose(sqlite3_vfs* v, void* lib) { AsShim(v)->real->xDlClose(AsShim(v)->real, lib); }
int Randomness(sqlite3_vfs* v, int n, char* out) { return AsShim(v)->real->xRandomness(AsShim(v)->real, n, out); }
int Sleep(sqlite3_vfs* v, int us) { return AsShim(v)->real->xSleep(AsShim(v)->real, us); }
int CurrentTime(sqlite3_vfs* v, double* out) { return AsShim(v)->real->xCurrentTime(AsShim(v)->real, out); }
int GetLastError(sqlite3_vfs* v, int n, char* out) { return AsShim(v)->real->xGetLastError(AsShim(v)->real, n, out); }
int CurrentTimeInt64(sqlite3_vfs* v, sqlite3_int64* out) {
  return AsShim(v)->real->xCurrentTimeInt64(AsShim(v)->real, out);
}
int SetSystemCall(sqlite3_vfs* v, const char* name, sqlite3_syscall_ptr call) {
  return AsShim(v)->real->xSetSystemCall(AsShim(v)->real, name, call);
}
sqlite3_syscall_ptr GetSystemCall(sqlite3_vfs* v, const char* name) {
  return AsShim(v)->real->xGetSystemCall(AsShim(v)->real, name);
}
const char* NextSystemCall(sqlite3_vfs* v, const char* name) {
  return AsShim(v)->real->xNextSystemCall(AsShim(v)->real, name);
}

}  // namespace

PowerLossVfs::PowerLossVfs(PowerSupply& supply) : previous_default_(sqlite3_vfs_find(nullptr)) {
  sqlite3_vfs* real = sqlite3_vfs_find("unix");
  shim_.real = real;
  shim_.supply = &supply;
  shim_.vfs = sqlite3_vfs{3,          static_cast<int>(sizeof(ShimFile)) + real->szOsFile,
                          real->mxPathname, nullptr,
                          "cairn-power-loss", nullptr,
                          Open,       Delete,
                          Access,     FullPathname,
                          DlOpen,     DlError,
                          DlSym,      DlClose,
                          Randomness, Sleep,
                          CurrentTime, GetLastError,
                          CurrentTimeInt64, SetSystemCall,
                          GetSystemCall, NextSystemCall};
  sqlite3_vfs_register(&shim_.vfs, 1);
}

PowerLossVfs::~PowerLossVfs() {
  sqlite3_vfs_unregister(&shim_.vfs);
  sqlite3_vfs_register(previous_default_, 1);
}

}  // namespace cairn::test
