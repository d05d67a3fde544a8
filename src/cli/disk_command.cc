// cairn disk list|fail|replace, cairn rebuild and cairn scrub: the disk lifecycle. A failed
// or missing disk is mounted around with -o degraded; after a replacement (unmounted),
// rebuild recreates its chunks from the others, mounted or not. See cairn(8).
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "archive/archive.h"
#include "archive/archive_lock.h"
#include "archive/config.h"
#include "archive/group_setup.h"
#include "cli/commands.h"
#include "maintenance/repair.h"
#include "redundancy/striping.h"
#include "util/clock.h"
#include "util/size.h"

namespace cairn {
namespace {

Status RefuseIfMounted(const std::string& dir) {
  int pid = Archive::LockHolder(dir);
  if (pid == 0) return Status::OK();
  return Status::Busy(fmt::format("{} is in use ({}); unmount it first", dir, ArchiveLock::HolderName(pid)));
}

Result<std::unique_ptr<Archive>> OpenOffline(const std::string& dir) {
  CAIRN_RETURN_IF_ERROR(RefuseIfMounted(dir));
  Archive::OpenOptions open;
  open.degraded = true;
  open.repair_on_read = false;  // repair decides what to rewrite, and where
  return Archive::Open(dir, open);
}

Result<uint32_t> DiskIndex(const ArchiveOptions& options, const std::string& text) {
  uint64_t index = 0;  // digits only: strtoul took " 2", "+2" and a negative number wrapped around
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), index);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || index >= options.disks.size()) {
    return Status::InvalidArgument(
        fmt::format("'{}' is not a disk of this archive (0..{})", text, options.disks.size() - 1));
  }
  return static_cast<uint32_t>(index);
}

int List(const std::string& dir) {
  auto archive = OpenToLook(dir);
  if (!archive.ok()) return Fail(1, archive.status().message());
  Archive& a = **archive;
  std::vector<uint64_t> chunks(a.disk_count(), 0), bytes(a.disk_count(), 0);
  {
    std::lock_guard lock(a.catalog_mutex());
    auto extents = a.catalog().AllExtents();
    if (!extents.ok()) return Fail(1, extents.status().message());
    for (const auto& e : *extents) {
      for (const auto& c : e.chunks) {
        chunks[c.disk]++;
        bytes[c.disk] += c.locator().length;
      }
    }
  }
  fmt::print("{:>4}  {:<30} {:>10} {:>10} {:>8}  {:<10} {}\n", "disk", "path", "size", "used", "chunks", "group",
             "state");
  for (size_t i = 0; i < a.disk_count(); i++) {
    std::string state = a.options().failed_disks.contains(i) ? "failed (cairn disk fail)"
                        : a.missing_disks().contains(i)      ? "missing: " + a.missing_disks().at(i)
                        : a.AwaitsRebuild(i)                 ? "replaced, needs cairn rebuild"
                                                             : "ok";
    std::string size = a.missing_disks().contains(i) ? "-" : FormatSize(a.disk(i).Size());
    fmt::print("{:>4}  {:<30} {:>10} {:>10} {:>8}  {:<10} {}\n", i, a.options().disks[i], size, FormatSize(bytes[i]),
               chunks[i], a.group_of(i).name(), state);
  }
  return 0;
}

int FailDisk(const std::string& dir, const std::string& which) {
  auto options = LoadConfig(dir + "/cairn.conf");
  if (!options.ok()) return Fail(1, options.status().message());
  auto index = DiskIndex(*options, which);
  if (!index.ok()) return Fail(2, index.status().message());
  if (Archive::LockHolder(dir) != 0) {  // mounted: the daemon stops using it at once
    int rc = SendControl(dir, ControlRequest{.verb = ControlVerb::kDiskFail, .disk = *index});
    if (rc == 0) fmt::print("disk {} taken out of service; reads rebuild its chunks from the others\n", *index);
    return rc;
  }
  if (Status st = MarkDiskFailed(dir, *index); !st.ok()) return Fail(1, st.message());
  fmt::print("disk {} marked failed: mount with -o degraded, or replace it (cairn disk replace) and rebuild\n", *index);
  return 0;
}

// The extents that a rebuild could not recreate if `disk`, in service, were replaced now: too
// few of their other chunks are on disks in service (a raid=none extent has none). A lonestar
// member's chunks are rebuilt through the grid, so none of them count.
Result<size_t> ExtentsOnlyOn(Archive& archive, uint32_t disk) {
  if (archive.array_of(disk).first != nullptr) return size_t{0};
  auto out_of_service = [&](uint32_t d) {  // kNoDisk: a chunk cairn recover did not find
    return d >= archive.disk_count() || archive.options().failed_disks.contains(d) ||
           archive.missing_disks().contains(d) || archive.AwaitsRebuild(d);
  };
  std::lock_guard lock(archive.catalog_mutex());
  auto extents = archive.catalog().AllExtents();
  if (!extents.ok()) return extents.status();
  size_t only_there = 0;
  for (const ExtentRecord& extent : *extents) {
    size_t on_it = 0, elsewhere = 0;
    for (const ChunkPlacement& chunk : extent.chunks) {
      if (chunk.disk == disk) on_it++;
      else if (!out_of_service(chunk.disk)) elsewhere++;
    }
    only_there += on_it > 0 && elsewhere < ChunksNeeded(extent.redundancy);
  }
  return only_there;
}

int ReplaceDisk(const std::string& dir, const std::string& which, const std::string& new_path, bool force) {
  if (new_path.empty()) return Fail(2, "give the path of the new disk image");
  // cairn.conf resolves relative paths against the archive: keep where the user meant.
  std::string path = std::filesystem::absolute(new_path).lexically_normal();
  if (Status st = CheckRecordablePath(path); !st.ok()) return Fail(2, st.message());
  auto archive = OpenOffline(dir);  // checks that the archive opens and gives the disk size
  if (!archive.ok()) return Fail(1, archive.status().message());
  ArchiveOptions options = (*archive)->options();
  auto index = DiskIndex(options, which);
  if (!index.ok()) return Fail(2, index.status().message());
  const bool in_service = !options.failed_disks.contains(*index) && !(*archive)->missing_disks().contains(*index) &&
                          !(*archive)->AwaitsRebuild(*index);
  if (in_service && !force) {
    auto only_there = ExtentsOnlyOn(**archive, *index);
    if (!only_there.ok()) return Fail(1, only_there.status().message());
    if (*only_there > 0) {
      return Fail(1, fmt::format("disk {} is in service and holds {} extent(s) that no other disk can rebuild "
                                 "(raid=none, or their other chunks are out of service): replacing it would lose "
                                 "them; nothing was changed (give another disk number, or --force to replace it "
                                 "anyway)",
                                 *index, *only_there));
    }
  }
  // As large as its group's disks (a lonestar group's are alike), whatever other groups have;
  // a missing disk counts 0.
  uint64_t size = 0;
  for (const DiskGroup& group : (*archive)->groups()) {
    const auto& parity = group.parity_disks();
    if (!group.Contains(*index) && std::find(parity.begin(), parity.end(), *index) == parity.end()) continue;
    for (const DiskGroup::Member& member : group.members()) size = std::max(size, (*archive)->disk(member.disk).Size());
    for (uint32_t disk : parity) size = std::max(size, (*archive)->disk(disk).Size());
  }
  if (size == 0) return Fail(1, fmt::format("disk {}: every disk of its group is missing: no size to give the new one", *index));
  auto id = ArchiveIdFromString(options.archive_id);
  if (!id.ok()) return Fail(1, id.status().message());
  // A block device (a disk swapped in, perhaps under the old one's name) or a new image.
  struct stat st;
  const bool device = ::stat(path.c_str(), &st) == 0 && S_ISBLK(st.st_mode);
  auto undo = [&] {
    if (!device) std::filesystem::remove(path);
  };
  if (device) {
    // The device may have the name of the disk it replaces (a drive swapped in its slot),
    // but a disk still in service is not replaced by itself.
    ArchiveOptions others = options;
    if ((*archive)->missing_disks().contains(*index)) others.disks[*index].clear();
    if (Status checked = CheckDevicesAreNew(dir, {path}, others); !checked.ok()) return Fail(1, checked.message());
    if (Status formatted = FormatDevice(path, *index, *id, size); !formatted.ok()) return Fail(1, formatted.message());
  } else {
    if (::access(path.c_str(), F_OK) == 0) {
      return Fail(1, fmt::format("{} exists and is not a block device; give a new path for an image", path));
    }
    if (Status formatted = FormatDisk(path, *index, *id, size); !formatted.ok()) return Fail(1, formatted.message());
  }
  // A lonestar member is rebuilt whole, not only where the old disk had defects.
  for (const auto& array : (*archive)->arrays()) {
    for (uint32_t p = 0; p < array->geometry().disk_count(); p++) {
      if (array->disk_of(p) != *index) continue;
      if (Status replacing = array->Replacing(p); !replacing.ok()) {
        undo();
        return Fail(1, replacing.message());
      }
    }
  }
  // A rebuild interrupted before, of this disk, rebuilt onto the one replaced now.
  if (Status forgotten = ForgetRebuildProgress(**archive); !forgotten.ok()) {
    undo();
    return Fail(1, forgotten.message());
  }
  // Still under the archive's lock: a mount starting meanwhile would go on writing to the old disk.
  auto saved = LoadConfig(dir + "/cairn.conf");  // without the -o overrides
  if (!saved.ok()) return Fail(1, saved.status().message());
  saved->disks[*index] = path;
  saved->failed_disks.erase(*index);
  saved->rebuild_disks.insert(*index);
  if (Status st = SaveConfig(dir, *saved); !st.ok()) return Fail(1, st.message());
  archive->reset();
  if (in_service) {
    fmt::print("disk {} was in service: its old image {} is no longer used, and its chunks are rebuilt from the "
               "other disks\n",
               *index, options.disks[*index]);
  }
  fmt::print("disk {} is now {} ({}); run cairn rebuild {} to fill it\n", *index, path, FormatSize(size), dir);
  return 0;
}

// Prints what a rebuild or scrub did and returns its exit status.
int FinishRepair(bool rebuild, const RepairReport& report) {
  for (const auto& p : report.problems) fmt::print("{}\n", p);
  fmt::print("{}\n", RepairSummary(report, rebuild));
  // A rebuild that stopped early (a range its groups could not rebuild, or cancelled) has left
  // data unprotected or unreadable; a scrub stops early on its --budget.
  bool unfinished_rebuild = rebuild && !report.finished;
  return report.extents_lost > 0 || report.parity_repaired < report.parity_bad || unfinished_rebuild ? 1 : 0;
}

// cairn rebuild / cairn scrub: run by the daemon when the archive is mounted, else here.
int Repair(const std::string& target, bool rebuild, bool progress, int64_t budget_ns, uint64_t rate) {
  std::string dir = target;  // a mount point (or a path in one), else the archive itself
  if (auto where = LocateInMount(target); where.ok()) {
    dir = where->archive;
  } else if (::access((target + "/cairn.conf").c_str(), F_OK) != 0) {
    return Fail(1, fmt::format("{} is neither an archive nor a mounted archive", target));
  }
  bool tty = ::isatty(2);
  int64_t start = NowNs(), last = 0;
  bool shown_all = false;
  auto show = [&](const RepairReport& r) {
    int64_t now = NowNs();
    bool all = r.extents_done == r.extents_total;
    if (!progress || (all ? shown_all : now - last < (tty ? 200'000'000 : 2'000'000'000))) return;
    last = now;
    shown_all = all;
    fmt::print(stderr, "{}{} {}/{} extents, {} read ({:.1f} MiB/s), {} chunk(s) repaired{}", tty ? "\r" : "",
               rebuild ? "rebuild:" : "scrub:", r.extents_done, r.extents_total, FormatSize(r.bytes_read),
               r.bytes_read / std::max(1e-3, (now - start) / 1e9) / (1 << 20), r.chunks_repaired, tty ? "  " : "\n");
  };
  if (Archive::LockHolder(dir) != 0) {  // mounted: the daemon does it beside its other work
    RepairReport report;
    bool reported = false;
    ControlRequest request{.verb = ControlVerb::kRepair, .rebuild = rebuild, .budget_ns = budget_ns, .rate = rate};
    int rc = SendControl(dir, request, nullptr, [&](const std::string& line) {
      if (line.starts_with("problem ")) report.problems.push_back(line.substr(8));
      if (ParseRepairReportLine(line, &report)) {  // after every batch, and at the end
        show(report);
        reported = true;
      }
    });
    if (progress && tty) fmt::print(stderr, "\n");
    if (rc != 0) return rc;
    return reported ? FinishRepair(rebuild, report) : Fail(1, "the daemon sent no report");
  }
  // Every extent needs a few chunk-sized buffers: keep the heap instead of mapping and
  // trimming them each time (4x faster rebuilds).
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  auto archive = OpenOffline(dir);
  if (!archive.ok()) return Fail(1, archive.status().message());
  RepairOptions options;
  options.rebuild = rebuild;
  options.budget_ns = budget_ns;
  options.rate = rate;
  options.progress = [&](const RepairReport& r) {
    show(r);
    return true;
  };
  auto report = RepairArchive(**archive, options);
  if (progress && tty) fmt::print(stderr, "\n");
  if (!report.ok()) return Fail(1, report.status().message());
  if (rebuild && report->finished && report->replaced_extents_lost == 0) {  // what is lost elsewhere stays lost
    if (Status st = (*archive)->FinishRebuild(); !st.ok()) return Fail(1, st.message());
  }
  return FinishRepair(rebuild, *report);
}

Result<int64_t> ParseDuration(const std::string& text) {
  double value = 0;  // plain decimal: no sign, space, exponent or hex (which strtod would take)
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, std::chars_format::fixed);
  if (ec != std::errc()) end = text.c_str();
  std::string unit(end);
  double scale = unit == "s" || unit.empty() ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
  constexpr double kLongest = 100.0 * 365 * 24 * 3600;  // seconds: far past any budget, well inside int64 ns
  // (not `value <= 0` alone: nan passes that, and nan or inf ns are no int64)
  // (and at least a nanosecond: 0 would mean no budget at all)
  if (text.empty() || end == text.c_str() || scale < 0 || !(value * scale * 1e9 >= 1 && value * scale <= kLongest)) {
    return Status::InvalidArgument(
        fmt::format("'{}' is not a duration (e.g. 90s, 10m, 2h; at least 1ns, at most 100 years)", text));
  }
  return static_cast<int64_t>(value * scale * 1e9);
}

// The arguments of rebuild and scrub: the archive, --progress, --rate SIZE and, for scrub,
// --budget DURATION. False on bad usage (with *error set when there is more to say).
bool ParseRepairArgs(const Args& args, bool allow_budget, std::string* dir, bool* progress, int64_t* budget,
                     uint64_t* rate, std::string* error) {
  std::set<std::string> seen;
  for (size_t i = 0; i < args.size(); i++) {
    if ((args[i] == "--rate" || args[i] == "--budget") && !FirstTime(seen, args[i])) {
      return *error = GivenTwice(args[i]), false;
    }
    if (args[i] == "--progress") {
      *progress = true;
    } else if (allow_budget && args[i] == "--budget" && i + 1 < args.size()) {
      auto d = ParseDuration(args[++i]);
      if (!d.ok()) return *error = d.status().message(), false;
      *budget = *d;
    } else if (args[i] == "--rate" && i + 1 < args.size()) {
      auto r = ParseSize(args[++i]);
      if (!r.ok()) return *error = fmt::format("--rate: {}", r.status().message()), false;
      *rate = *r;
    } else if (dir->empty() && !args[i].starts_with("-")) {
      *dir = args[i];
    } else {
      return false;
    }
  }
  return !dir->empty();
}

}  // namespace

int CmdDisk(const Args& args) {
  if (args.size() == 2 && args[0] == "list") return List(args[1]);
  if (args.size() == 3 && args[0] == "fail") return FailDisk(args[1], args[2]);
  if (args.size() == 4 && args[0] == "replace") return ReplaceDisk(args[1], args[2], args[3], false);
  if (args.size() == 5 && args[0] == "replace" && args[4] == "--force") {
    return ReplaceDisk(args[1], args[2], args[3], true);
  }
  return Fail(2, "usage: cairn disk list ARCHIVE\n       cairn disk fail ARCHIVE DISK\n"
                 "       cairn disk replace ARCHIVE DISK NEWPATH [--force]");
}

int CmdRebuild(const Args& args) {
  std::string dir, error;
  bool progress = false;
  int64_t budget = 0;
  uint64_t rate = 0;
  if (!ParseRepairArgs(args, false, &dir, &progress, &budget, &rate, &error)) {
    return Fail(2, error.empty() ? "usage: cairn rebuild ARCHIVE|MOUNTPOINT [--progress] [--rate SIZE]" : error);
  }
  return Repair(dir, true, progress, 0, rate);
}

int CmdScrub(const Args& args) {
  std::string dir, error;
  bool progress = false;
  int64_t budget = 0;
  uint64_t rate = 0;
  if (!ParseRepairArgs(args, true, &dir, &progress, &budget, &rate, &error)) {
    return Fail(2, error.empty() ? "usage: cairn scrub ARCHIVE|MOUNTPOINT [--progress] [--budget DURATION] [--rate SIZE]"
                                 : error);
  }
  return Repair(dir, false, progress, budget, rate);
}

}  // namespace cairn
