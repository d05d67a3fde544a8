// Simulated power loss for crash tests, LevelDB's DropUnsyncedFileData for devices written in
// place. A PowerSupply numbers every write, discard, truncate, delete and sync of an archive's
// disks (PowerLossDisk) and of its SQLite catalog files (PowerLossVfs): those are the crash
// points. At the chosen one the power goes off and every later operation fails without effect.
// Each device file keeps an undo log of what it held at its last sync; Restore() then leaves on
// the files what a real power loss could have: the unsynced changes lost, or kept with the disk
// write cut by the power torn at a sector boundary (only one aligned sector is atomic).
#pragma once

#include <sqlite3.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "cairn/disk.h"

namespace cairn::test {

enum class Device { kDisk, kCatalog };

// What survives of the changes made since a device file's last sync.
enum class Unsynced { kLost, kKept };
struct Survivors {
  Unsynced disks;
  Unsynced catalog;
};

class PowerSupply {
 public:
  // From now on operations are counted and the power goes off at operation `cut_at`
  // (1-based; 0: never). What the device files hold now counts as durable.
  void Arm(int cut_at);
  // One change to `path` at `offset` (a write of `data`, or a discard or truncate when `data`
  // is empty): runs `apply` after saving what `read_old` says the changed range holds, for
  // the undo log. With the power off, `apply` does not run and the result is an IOError; a
  // write of several `sector`s that the cut interrupts may land in part.
  Status Change(Device device, const std::string& path, uint64_t offset, std::span<const uint8_t> data,
                uint32_t sector,
                const std::function<Result<std::vector<uint8_t>>()>& read_old, const std::function<Status()>& apply);
  // A sync of `path`: its present content is durable. (The supply decides what survives, so
  // the file is not really synced: that would only cost time.)
  Status Sync(Device device, const std::string& path);
  // A deletion of catalog file `path` (`apply`), durable once done.
  Status Delete(const std::string& path, const std::function<Status()>& apply);
  // A catalog opened through PowerLossVfs: its shared-memory index does not survive.
  void AddCatalog(const std::string& path);
  // Called (from the syncing thread) before every sync, armed or not: a test may hold it
  // there. Set before the supply is used.
  void BeforeSync(std::function<void(Device, const std::string& path)> hook) { before_sync_ = std::move(hook); }

  int operations() const;
  int operations(Device device) const;  // of those, on `device` files
  bool cut() const;  // the power went off in this run
  // Once every device file is closed: rolls the files back to what survives a power loss at
  // the cut, and disarms. Files change only when the power was cut.
  Status Restore(Survivors survivors);

 private:
  struct Undo {
    uint64_t offset;
    std::vector<uint8_t> old;
  };
  struct Journal {
    Device device;
    uint64_t synced_size;     // the file's size at its last sync
    std::vector<Undo> undo;   // changes since then, oldest first
  };
  // Counts an operation on `device`; false when the power is off for it. REQUIRES: mutex_ held.
  bool Draw(Device device);
  // The journal of `path`, started with the file's present size. REQUIRES: mutex_ held.
  Journal& JournalOf(Device device, const std::string& path);

  mutable std::mutex mutex_;  // also orders each change with its undo record
  bool armed_ = false;
  int cut_at_ = 0;
  int operations_ = 0;
  std::array<int, 2> operations_of_{};  // by Device
  std::map<std::string, Journal> journals_;
  std::set<std::string> catalogs_;
  std::function<void(Device, const std::string&)> before_sync_;
  struct Torn {
    std::string path;
    uint64_t offset;
    std::vector<uint8_t> prefix;  // the sectors of the cut write that landed
  };
  std::vector<Torn> torn_;
};

// A disk whose writes, discards and syncs go through `supply`.
class PowerLossDisk : public DiskWrapper {
 public:
  PowerLossDisk(std::unique_ptr<Disk> target, PowerSupply& supply) : DiskWrapper(std::move(target)), supply_(supply) {}

  Status WriteAt(uint64_t offset, std::span<const uint8_t> src) override;
  Status Sync() override;
  Status Discard(uint64_t offset, uint64_t length) override;

 private:
  Result<std::vector<uint8_t>> ReadOld(uint64_t offset, uint64_t length);
  PowerSupply& supply_;
};

// While it lives, SQLite's default VFS: the unix VFS with every write, truncate, sync and
// delete of a named file going through `supply`. Catalogs opened meanwhile use it; they must
// be closed before it dies.
class PowerLossVfs {
 public:
  explicit PowerLossVfs(PowerSupply& supply);
  ~PowerLossVfs();
  PowerLossVfs(const PowerLossVfs&) = delete;
  PowerLossVfs& operator=(const PowerLossVfs&) = delete;

  struct Shim {
    sqlite3_vfs vfs;  // first: SQLite hands back a pointer to it
    sqlite3_vfs* real;
    PowerSupply* supply;
  };

 private:
  Shim shim_{};
  sqlite3_vfs* previous_default_;
};

}  // namespace cairn::test
