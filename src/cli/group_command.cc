// cairn group add|show|list: disk groups after mkfs. `add` formats the disks of a new group
// (images, or block devices) and adds it to an unmounted archive; `show` draws a lonestar
// group's grid: each disk's role, state and fill, and what its journal says is pending.
#include <fmt/format.h>

#include "archive/archive.h"
#include "archive/config.h"
#include "archive/group_setup.h"
#include "array/grid_geometry.h"
#include "array/promise_journal.h"
#include "cli/commands.h"
#include "util/size.h"

namespace cairn {
namespace {

const char* kUsage =
    "usage: cairn group add ARCHIVE NAME:pool:N|NAME:lonestar:XxY:HN+1[:MODE] [--disk-size SIZE] [--devices DEV,...]\n"
    "       cairn group show ARCHIVE NAME\n"
    "       cairn group list ARCHIVE";

int Add(const Args& args) {
  if (args.size() < 2) return Fail(2, kUsage);
  const std::string& dir = args[0];
  auto spec = ParseGroupSpec(args[1]);
  if (!spec.ok()) return Fail(2, spec.status().message());
  uint64_t disk_size = 0;
  std::vector<std::string> devices;
  std::set<std::string> seen;
  for (size_t i = 2; i < args.size(); i++) {
    if ((args[i] == "--disk-size" || args[i] == "--devices") && !FirstTime(seen, args[i])) {
      return Fail(2, GivenTwice(args[i]));
    }
    if (args[i] == "--disk-size" && i + 1 < args.size()) {
      auto size = ParseSize(args[++i]);
      if (!size.ok()) return Fail(2, fmt::format("--disk-size: {}", size.status().message()));
      disk_size = *size;
    } else if (args[i] == "--devices" && i + 1 < args.size()) {
      devices = AbsoluteDevices(SplitList(args[++i]));
    } else {
      return Fail(2, kUsage);
    }
  }
  if (!seen.contains("--disk-size") && devices.empty()) {
    return Fail(2, "cairn group add needs --disk-size SIZE or --devices");
  }
  if (::access((dir + "/cairn.conf").c_str(), F_OK) != 0) {  // before the lock, which would make a file there
    return Fail(1, fmt::format("{} is not a cairn archive (no cairn.conf)", dir));
  }
  auto lock = ArchiveLock::Acquire(dir);  // unmounted: a daemon would not see the new disks
  if (!lock.ok()) return Fail(1, lock.status().message());
  auto options = LoadConfig(dir + "/cairn.conf");
  if (!options.ok()) return Fail(1, options.status().message());
  auto id = ArchiveIdFromString(options->archive_id);
  if (!id.ok()) return Fail(1, id.status().message());
  size_t first = options->disks.size();
  if (Status st = AddGroup(dir, *id, *spec, disk_size, devices, *options, Tell); !st.ok()) {
    return Fail(1, st.message());
  }
  if (Status st = SaveConfig(dir, *options); !st.ok()) return Fail(1, st.message());
  fmt::print("added group {} ({} {}) as disks {}..{}\n", spec->name, spec->type,
             spec->geometry.empty() ? fmt::format("{} disks", spec->disks) : spec->geometry, first,
             options->disks.size() - 1);
  return 0;
}

int List(const std::string& dir) {
  auto options = LoadConfig(dir + "/cairn.conf");
  if (!options.ok()) return Fail(1, options.status().message());
  for (const auto& group : EffectiveGroups(*options)) {
    fmt::print("{}  {}  {}{}  disks {}\n", group.name, group.type, group.geometry,
               group.geometry.empty() ? "" : " write_mode=" + group.write_mode, fmt::join(group.disks, ","));
  }
  return 0;
}

int Show(const std::string& dir, const std::string& name) {
  auto archive = OpenToLook(dir);
  if (!archive.ok()) return Fail(1, archive.status().message());
  Archive& a = **archive;
  const ArchiveOptions::Group* group = nullptr;
  std::vector<ArchiveOptions::Group> groups = EffectiveGroups(a.options());
  for (const auto& g : groups) {
    if (g.name == name) group = &g;
  }
  if (!group) return Fail(1, fmt::format("{} has no group {}", dir, name));
  if (group->geometry.empty()) {
    fmt::print("group {}: {} of {} disks ({}); only lonestar groups have a grid to show\n", name, group->type,
               group->disks.size(), fmt::join(group->disks, ","));
    return 0;
  }
  auto geometry = GridGeometry::Parse(group->geometry);
  if (!geometry.ok()) return Fail(1, geometry.status().message());
  std::map<uint32_t, uint64_t> used;  // bytes of chunks, by disk
  {
    std::lock_guard lock(a.catalog_mutex());
    auto extents = a.catalog().AllExtents();
    if (!extents.ok()) return Fail(1, extents.status().message());
    for (const auto& e : *extents) {
      for (const auto& c : e.chunks) used[c.disk] += c.locator().length;
    }
  }
  auto journal = PromiseJournal::Inspect(LoneStarJournalPath(a.dir(), name),
                                         LoneStarIdentity(a.options().archive_id, name));
  fmt::print("group {}: lonestar {}, write mode {}, {} disks ({} buckets, {} parity), {:.1f}% of raw capacity for "
             "data\n",
             name, group->geometry, group->write_mode, geometry->disk_count(), geometry->data_disk_count(),
             geometry->parity_disk_count(), 100 * geometry->usable_fraction());
  fmt::print("(B bucket, H horizontal parity, V vertical parity; disk number, state, fill of buckets)\n");
  auto missing = a.missing_disks();
  auto awaiting = a.awaiting_rebuild();
  std::map<uint32_t, RangeSet> defects;
  if (journal.ok()) defects = journal->defects;
  for (uint32_t row = 0; row < geometry->rows(); row++) {
    std::string line;
    for (uint32_t col = 0; col < geometry->columns(); col++) {
      uint32_t p = geometry->DiskAt(row, col);
      uint32_t disk = group->disks[p];
      DiskRole role = geometry->role(p);
      std::string state = missing.contains(disk) ? "MISSING"
                          : awaiting.contains(disk) || defects.contains(disk) ? "REBUILD"
                                                                              : "ok";
      std::string fill;
      if (role == DiskRole::kData) {
        uint64_t capacity = a.store(disk).capacity();
        fill = capacity ? fmt::format("{:3.0f}%", 100.0 * used[disk] / capacity) : "  -";
      }
      line += fmt::format("{}{:>4} {:<7} {:<4}  ", role == DiskRole::kData ? 'B' : role == DiskRole::kHorizontalParity ? 'H' : 'V',
                          disk, state, fill);
    }
    fmt::print("  {}\n", line);
  }
  if (!journal.ok()) {
    fmt::print("journal: {} (all parity is re-derived at the next mount)\n", journal.status().message());
    return 0;
  }
  uint64_t pending = 0;
  for (const auto& [txn, p] : journal->open) pending += p.has_delta ? p.length : 0;
  fmt::print("journal: {} open promise(s), {} of deltas waiting for their parity\n", journal->open.size(),
             FormatSize(pending));
  for (const auto& [disk, ranges] : journal->defects) {
    fmt::print("  disk {}: {} to rebuild (cairn rebuild)\n", disk, FormatSize(ranges.bytes()));
  }
  return 0;
}

}  // namespace

int CmdGroup(const Args& args) {
  if (args.empty()) return Fail(2, kUsage);
  Args rest(args.begin() + 1, args.end());
  if (args[0] == "add") return Add(rest);
  if (args[0] == "show" && rest.size() == 2) return Show(rest[0], rest[1]);
  if (args[0] == "list" && rest.size() == 1) return List(rest[0]);
  return Fail(2, kUsage);
}

}  // namespace cairn
