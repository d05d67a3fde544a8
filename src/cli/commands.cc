#include "cli/commands.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <thread>

#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "archive/archive.h"
#include "archive/archive_lock.h"
#include "archive/config.h"
#include "array/peeling_decoder.h"
#include "array/promise_journal.h"
#include "backend/extent_format.h"
#include "codec/plugin_loader.h"
#include "maintenance/fsck.h"
#include "policy/resolver.h"
#include "redundancy/striping.h"
#include "util/cairn_mounts.h"
#include "util/printable.h"
#include "util/size.h"

namespace cairn {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

Result<std::string> ArchiveDir(const std::string& target) {
  if (::access((target + "/cairn.conf").c_str(), F_OK) == 0) return target;
  auto where = LocateInMount(target);
  if (!where.ok()) return Status::InvalidArgument(fmt::format("{} is neither an archive nor a mounted archive", target));
  return where->archive;
}

Status LoadPluginsOf(const std::string& dir) {
  std::string plugin_dir;
  if (!dir.empty()) {
    auto options = LoadConfig(dir + "/cairn.conf");
    if (!options.ok()) return options.status();
    plugin_dir = options->plugin_dir;
  }
  return LoadArchivePlugins(plugin_dir);
}

void Tell(const std::string& line) { fmt::print(stderr, "cairn: {}\n", line); }

int Fail(int code, const std::string& message) {
  Tell(message);
  return code;
}

Result<std::unique_ptr<Archive>> OpenToLook(const std::string& dir, bool check_only) {
  Archive::OpenOptions open;
  open.lock = false;
  open.read_only = true;
  open.degraded = true;  // show what is there, and what is missing
  open.check_only = check_only;
  return Archive::Open(dir, open);
}

int CmdMkfs(const Args& args) {
  const char* usage =
      "usage: cairn mkfs ARCHIVE [--disks N] [--group NAME:pool:N | NAME:lonestar:XxY:HN+1[:MODE] "
      "[--devices DEV,...]]... --disk-size SIZE [--segment-size SIZE] [--cache-size SIZE] [--pack-threshold SIZE]";
  MkfsOptions mkfs;
  mkfs.disk_count = 0;
  std::string dir;
  bool have_disks = false;
  bool have_size = false;
  std::set<std::string> seen;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string* { return i + 1 < args.size() ? &args[++i] : nullptr; };
    if (a != "--group" && a != "--devices" && a.starts_with("--") && !FirstTime(seen, a)) return Fail(2, GivenTwice(a));
    if (a == "--disks") {
      const std::string* v = value();
      if (!v) return Fail(2, usage);
      auto n = ParseDecimal(*v, 1, kMaxDisks);
      if (!n) return Fail(2, fmt::format("--disks {}: expected 1..{}", *v, kMaxDisks));
      mkfs.disk_count = static_cast<uint32_t>(*n);
      have_disks = true;
    } else if (a == "--group") {
      const std::string* v = value();
      if (!v) return Fail(2, usage);
      auto spec = ParseGroupSpec(*v);
      if (!spec.ok()) return Fail(2, fmt::format("--group: {}", spec.status().message()));
      mkfs.groups.push_back({*spec, {}});
      have_disks = true;
    } else if (a == "--devices") {
      const std::string* v = value();
      if (!v || mkfs.groups.empty()) return Fail(2, "--devices lists the devices of the --group before it");
      if (!mkfs.groups.back().devices.empty()) return Fail(2, "--devices is given twice for one --group");
      mkfs.groups.back().devices = AbsoluteDevices(SplitList(*v));
    } else if (a == "--disk-size" || a == "--segment-size" || a == "--cache-size" || a == "--pack-threshold") {
      const std::string* v = value();
      if (!v) return Fail(2, usage);
      Status st;
      if (a == "--disk-size") {
        auto size = ParseSize(*v);
        if (!size.ok()) return Fail(2, fmt::format("--disk-size: {}", size.status().message()));
        mkfs.disk_size = *size;
        have_size = true;
      } else {
        std::string key = a.substr(2);
        std::replace(key.begin(), key.end(), '-', '_');
        st = ApplyOption(mkfs.options, key, *v);
      }
      if (!st.ok()) return Fail(2, st.message());
    } else if (a.starts_with("-")) {
      return Fail(2, fmt::format("unknown flag '{}'\n{}", a, usage));
    } else if (dir.empty()) {
      dir = a;
    } else {
      return Fail(2, usage);
    }
  }
  if (dir.empty() || !have_disks || !have_size) return Fail(2, usage);
  mkfs.progress = Tell;
  Status st = CreateArchive(dir, mkfs);
  if (!st.ok()) return Fail(1, st.message());
  uint32_t disks = mkfs.disk_count;  // images of --disk-size; devices as large as the smallest of a group's
  for (const auto& group : mkfs.groups) disks += group.spec.disks;
  fmt::print("created archive {}: {} disks, images of {}, segment size {}, cache {}\n", dir, disks,
             FormatSize(mkfs.disk_size), FormatSize(mkfs.options.segment_size), FormatSize(mkfs.options.cache_size));
  for (const auto& group : mkfs.groups) {
    fmt::print("  group {}: {} {}{}\n", group.spec.name, group.spec.type,
               group.spec.geometry.empty() ? fmt::format("{} disks", group.spec.disks)
                                           : fmt::format("{} ({} disks, write mode {})", group.spec.geometry,
                                                         group.spec.disks, group.spec.write_mode),
               group.devices.empty() ? "" : ", on the devices given");
  }
  return 0;
}

int CmdUmount(const Args& args) {
  if (args.size() != 1) return Fail(2, "usage: cairn umount MOUNTPOINT");
  auto where = LocateInMount(args[0]);
  if (!where.ok() || where->inside != "/") return Fail(1, fmt::format("{} is not a cairn mount", args[0]));
  std::string archive = where->archive;
  std::string mountpoint = where->mountpoint;
  int pid = Archive::LockHolder(archive);
  // Persisted first, while the daemon can still say what it could not persist (it tries
  // again as it exits, but nobody hears its answer then).
  bool persisted = pid <= 0 || SendControl(archive, ControlRequest{.verb = ControlVerb::kPersist}) == 0;
  pid_t child = ::fork();
  if (child < 0) return Fail(1, fmt::format("cannot run fusermount3: {}", std::strerror(errno)));
  if (child == 0) {
    ::execlp("fusermount3", "fusermount3", "-u", mountpoint.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  pid_t waited;
  while ((waited = ::waitpid(child, &status, 0)) < 0 && errno == EINTR) {
  }
  if (waited != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Fail(1, fmt::format("fusermount3 -u {} failed", mountpoint));
  }
  // Wait for the daemon to persist what is left, release the archive and exit.
  auto daemon_alive = [pid] { return pid > 0 && ::kill(pid, 0) == 0; };
  auto start = std::chrono::steady_clock::now();
  auto next_word = start + std::chrono::seconds(5);  // then every 10 s: a long final persist is not a hang
  while (Archive::LockHolder(archive) != 0 || daemon_alive()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (auto now = std::chrono::steady_clock::now(); now >= next_word) {
      fmt::print(stderr, "cairn umount: {} is unmounted; waiting {} s for its daemon (pid {}) to persist the rest and "
                 "release {} (Ctrl-C stops waiting, not the daemon)\n",
                 mountpoint, std::chrono::duration_cast<std::chrono::seconds>(now - start).count(), pid, archive);
      next_word = now + std::chrono::seconds(10);
    }
  }
  if (!persisted) {
    return Fail(1, fmt::format("{} is unmounted, but not all of its data is on the disks (see above): the rest stays "
                               "in the staging cache and is persisted when the archive is mounted again",
                               mountpoint));
  }
  return 0;
}

int CmdStatus(const Args& args) {
  bool json = false;
  std::string dir;
  for (const auto& a : args) {
    if (a == "--json") json = true;
    else if (dir.empty() && !a.starts_with("-")) dir = a;
    else return Fail(2, "usage: cairn status ARCHIVE [--json]");
  }
  if (dir.empty()) return Fail(2, "usage: cairn status ARCHIVE [--json]");
  auto archive = OpenToLook(dir);
  if (!archive.ok()) return Fail(1, archive.status().message());
  Archive& a = **archive;
  int pid = Archive::LockHolder(a.dir());
  // Empty when no process holds the archive, or its holder serves no mount.
  std::string mountpoint = pid != 0 ? MountpointOf(a.dir()).value_or("") : "";
  // The cache limit the daemon runs with: a mount's -o cache_size overrides cairn.conf's.
  uint64_t cache_limit = a.options().cache_size;
  // (Quietly: the lock's holder may be an offline command, or the socket not ours to reach.)
  if (std::string reply; pid > 0 && ExchangeControl(a.dir(), ControlRequest{.verb = ControlVerb::kStatus}, &reply).ok()) {
    std::istringstream lines(reply);
    for (std::string key; lines >> key;) {
      if (key == "cache_size") lines >> cache_limit;
      else lines.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    }
  }
  Catalog::Totals totals;
  std::vector<std::pair<uint64_t, uint64_t>> disk_use(a.disk_count());  // chunks, bytes
  uint64_t degraded = 0;  // extents with chunks on missing or replaced disks
  uint64_t logical_payload = 0, stored_payload = 0;  // before and after their transforms
  std::set<uint64_t> at_risk, unreadable;
  std::vector<uint64_t> risky_files, lost_files, skip;
  std::string risky_text, lost_text;
  {
    std::lock_guard lock(a.catalog_mutex());
    auto computed = a.catalog().ComputeTotals();
    if (!computed.ok()) return Fail(1, computed.status().message());
    totals = *computed;
    totals.extent_bytes = 0;
    std::set<uint32_t> down = a.awaiting_rebuild();
    for (const auto& [disk, why] : a.missing_disks()) down.insert(static_cast<uint32_t>(disk));
    // A lonestar disk that its parity groups can rebuild still reads: degraded, not down.
    std::set<uint32_t> rebuilt_below;
    for (const auto& group : EffectiveGroups(a.options())) {
      auto geometry = GridGeometry::Parse(group.geometry);
      if (!geometry.ok()) continue;  // a pool
      std::set<uint32_t> failed;  // grid positions
      for (uint32_t p = 0; p < group.disks.size(); p++) {
        if (down.contains(group.disks[p])) failed.insert(p);
      }
      auto plan = PlanRecovery(*geometry, failed);
      if (!plan.ok()) return Fail(1, plan.status().message());
      std::set<uint32_t> stuck(plan->lost().begin(), plan->lost().end());
      for (uint32_t p : failed) {
        if (!stuck.contains(p)) rebuilt_below.insert(group.disks[p]);
      }
    }
    auto extents = a.catalog().AllExtents();
    if (!extents.ok()) return Fail(1, extents.status().message());
    for (const auto& e : *extents) {
      logical_payload += e.logical_length;
      stored_payload += e.payload_length;
      size_t lost = 0;
      size_t degraded_below = 0;  // chunks read through their group's parity
      for (const ChunkPlacement& chunk : e.chunks) {
        disk_use[chunk.disk].first++;
        disk_use[chunk.disk].second += chunk.locator().length;
        totals.extent_bytes += chunk.locator().length;
        lost += down.contains(chunk.disk) && !rebuilt_below.contains(chunk.disk);
        degraded_below += rebuilt_below.contains(chunk.disk);
      }
      if (lost > 0 || degraded_below > 0) degraded++;
      if (lost > 0) {
        if (e.chunks.size() - lost < ChunksNeeded(e.redundancy)) unreadable.insert(e.id);
        else if (e.chunks.size() - lost == ChunksNeeded(e.redundancy)) at_risk.insert(e.id);
      }
    }
    // Files with no redundancy left, or none at all to read from.
    auto segments = a.catalog().AllSegments();
    if (!segments.ok()) return Fail(1, segments.status().message());
    for (const auto& segment : *segments) {
      auto& list = unreadable.contains(segment.extent_id)  ? lost_files
                   : at_risk.contains(segment.extent_id) ? risky_files
                                                         : skip;
      if (list.size() < 10 && (list.empty() || list.back() != segment.ino)) list.push_back(segment.ino);
    }
    auto paths = [&](const std::vector<uint64_t>& inos) {
      std::string out;
      for (uint64_t ino : inos) {
        auto path = PathOf(a.catalog(), ino);
        out += fmt::format("{}{}", out.empty() ? "" : ", ", path.ok() ? *path : fmt::format("inode {} ({})", ino, path.status().message()));
      }
      return out;
    };
    risky_text = paths(risky_files);
    lost_text = paths(lost_files);
  }
  uint64_t cached = 0;
  uint64_t cache_files = 0;
  Status listed = a.cache().ForEach([&](const StagingCache::FileInfo& file) {
    cached += file.allocated_bytes;
    cache_files++;
  });
  if (!listed.ok()) return Fail(1, listed.message());
  struct stat st {};
  uint64_t catalog_bytes = 0;
  for (const char* suffix : {"", "-wal"}) {
    if (::stat((a.dir() + "/catalog.db" + suffix).c_str(), &st) == 0) catalog_bytes += static_cast<uint64_t>(st.st_size);
  }
  // Each group, with what a lonestar group's journal says is pending.
  struct GroupState {
    const ArchiveOptions::Group* group;
    std::string journal;  // "" for a pool; else a problem with the journal, or "ok"
    size_t promises = 0;
    uint64_t deltas = 0;
    uint64_t defective = 0;
  };
  std::vector<ArchiveOptions::Group> groups = EffectiveGroups(a.options());
  std::vector<GroupState> group_states;
  for (const auto& group : groups) {
    GroupState gs{&group};
    if (!group.geometry.empty()) {
      auto state = PromiseJournal::Inspect(LoneStarJournalPath(a.dir(), group.name),
                                           LoneStarIdentity(a.options().archive_id, group.name));
      gs.journal = state.ok() ? "ok" : state.status().message();
      if (state.ok()) {
        gs.promises = state->open.size();
        for (const auto& [txn, p] : state->open) gs.deltas += p.has_delta ? p.length : 0;
        for (const auto& [disk, ranges] : state->defects) gs.defective += ranges.bytes();
      }
    }
    group_states.push_back(gs);
  }
  if (json) {
    std::string group_json;
    for (const GroupState& gs : group_states) {
      group_json += fmt::format("{}{{\"name\":\"{}\",\"type\":\"{}\",\"disks\":[{}]", group_json.empty() ? "" : ",",
                                gs.group->name, gs.group->type, fmt::join(gs.group->disks, ","));
      if (!gs.group->geometry.empty()) {
        group_json += fmt::format(",\"geometry\":\"{}\",\"write_mode\":\"{}\",\"journal\":\"{}\",\"open_promises\":{},"
                                  "\"pending_delta_bytes\":{},\"defective_bytes\":{}",
                                  gs.group->geometry, gs.group->write_mode, gs.journal == "ok" ? "ok" : "damaged",
                                  gs.promises, gs.deltas, gs.defective);
      }
      group_json += "}";
    }
    std::string disks;
    for (size_t i = 0; i < a.disk_count(); i++) {
      disks += fmt::format("{}{{\"index\":{},\"path\":{},\"size\":{},\"used\":{},\"extents\":{}}}", i ? "," : "", i,
                           JsonString(a.options().disks[i]), a.disk(i).Size(), disk_use[i].second, disk_use[i].first);
    }
    fmt::print(
        "{{\"archive\":{},\"id\":\"{}\",\"mounted_by_pid\":{},\"inodes\":{},\"files_queued\":{},"
        "\"bytes_cached\":{},\"cache_files\":{},\"cache_limit\":{},\"bytes_persisted\":{},\"extents\":{},\"extent_bytes\":{},"
        "\"payload_logical_bytes\":{},\"payload_stored_bytes\":{},\"catalog_bytes\":{},\"policy_checks_queued\":{},\"extents_degraded\":{},\"extents_at_risk\":{},"
        "\"extents_unreadable\":{},\"groups\":[{}],\"disks\":[{}]}}\n",
        JsonString(a.dir()), a.options().archive_id, mountpoint.empty() ? 0 : std::max(pid, 0), totals.inodes,
        totals.dirty_inodes, cached,
        cache_files, cache_limit,
        totals.persisted_bytes, totals.extents, totals.extent_bytes, logical_payload, stored_payload, catalog_bytes,
        totals.policy_checks, degraded,
        at_risk.size(), unreadable.size(), group_json, disks);
    return 0;
  }
  fmt::print("archive   {} (id {})\n", a.dir(), a.options().archive_id);
  std::string state = pid == 0 ? "not mounted"
                      : mountpoint.empty()
                          ? fmt::format("in use by {} (not mounted: a cairn command that works offline, or a mount "
                                        "starting or stopping)",
                                        ArchiveLock::HolderName(pid))
                          : fmt::format("mounted at {} ({})", mountpoint,
                                        pid > 0 ? fmt::format("daemon pid {}", pid) : "its daemon is starting");
  fmt::print("state     {}\n", state);
  fmt::print("files     {} inodes, {} queued for persisting\n", totals.inodes, totals.dirty_inodes);
  fmt::print("cache     {} in {} files (limit {})\n", FormatSize(cached), cache_files, FormatSize(cache_limit));
  fmt::print("persisted {} of file data in {} extents ({} on disk)\n", FormatSize(totals.persisted_bytes),
             totals.extents, FormatSize(totals.extent_bytes));
  if (logical_payload != stored_payload) {
    fmt::print("codec     {} of extent payloads stored as {} by compress=, encrypt= and plugins= ({:.1f} %)\n",
               FormatSize(logical_payload), FormatSize(stored_payload),
               logical_payload ? 100.0 * static_cast<double>(stored_payload) / static_cast<double>(logical_payload) : 0);
  }
  fmt::print("catalog   {}\n", FormatSize(catalog_bytes));
  fmt::print("policy    {} file(s) or directories queued for a policy check by the reconciler\n",
             totals.policy_checks);
  fmt::print("health    {}\n", degraded == 0 ? std::string("every extent has all its chunks")
                                 : fmt::format("{} extent(s) degraded (cairn rebuild), {} without redundancy left, "
                                               "{} unreadable",
                                               degraded, at_risk.size(), unreadable.size()));
  if (!risky_text.empty()) fmt::print("at risk   {}\n", risky_text);
  if (!lost_text.empty()) fmt::print("lost      {}\n", lost_text);
  fmt::print("groups    {}\n", group_states.size());
  for (const GroupState& gs : group_states) {
    const auto& g = *gs.group;
    if (g.geometry.empty()) {
      fmt::print("  {}: {}, disks {}\n", g.name, g.type, fmt::join(g.disks, ","));
      continue;
    }
    fmt::print("  {}: lonestar {}, write mode {}, disks {}..{}; journal {}: {} open promise(s), {} of deltas pending, "
               "{} to rebuild\n",
               g.name, g.geometry, g.write_mode, g.disks.front(), g.disks.back(), gs.journal, gs.promises,
               FormatSize(gs.deltas), FormatSize(gs.defective));
  }
  fmt::print("disks     {}\n", a.disk_count());
  for (size_t i = 0; i < a.disk_count(); i++) {
    fmt::print("  {:>3}  {:<28} {:>10} used of {:>10}  {} chunks{}\n", i, a.options().disks[i],
               FormatSize(disk_use[i].second), FormatSize(a.disk(i).Size()), disk_use[i].first,
               a.missing_disks().contains(i) ? "  MISSING: " + a.missing_disks().at(i) : "");
  }
  return 0;
}

int CmdFsck(const Args& args) {
  if (args.size() != 1) return Fail(2, "usage: cairn fsck ARCHIVE");
  Archive::OpenOptions open;
  open.check_only = true;
  open.degraded = true;  // missing disks are problems to report
  auto archive = Archive::Open(args[0], open);
  if (!archive.ok()) return Fail(1, archive.status().message());
  bool tty = ::isatty(2);
  FsckReport report = CheckArchive(**archive, [&](uint64_t done, uint64_t total) {
    if (tty && (done % 256 == 0 || done == total)) fmt::print(stderr, "\rverifying extents: {}/{}", done, total);
  });
  if (tty && report.extents > 0) fmt::print(stderr, "\n");
  for (const auto& note : report.notes) fmt::print("note: {}\n", note);
  for (const auto& problem : report.problems) fmt::print("problem: {}\n", problem);
  if (!report.clean()) {
    fmt::print("{}: {} problem(s) found\n", (*archive)->dir(), report.problems.size());
    return 1;
  }
  fmt::print("{}: clean ({} inodes, {} extents, {} verified)\n", (*archive)->dir(), report.inodes, report.extents,
             FormatSize(report.bytes_verified));
  return 0;
}

int CmdInspect(const Args& args) {
  const char* usage = "usage: cairn inspect ARCHIVE --disk N --offset BYTES";
  if (args.size() != 5 || args[1] != "--disk" || args[3] != "--offset") return Fail(2, usage);
  auto archive = OpenToLook(args[0], /*check_only=*/true);
  if (!archive.ok()) return Fail(1, archive.status().message());
  uint64_t disk = 0, offset = 0;
  for (auto [text, out] : {std::pair{&args[2], &disk}, std::pair{&args[4], &offset}}) {
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), *out);
    if (text->empty() || ec != std::errc() || end != text->data() + text->size()) {
      return Fail(2, fmt::format("'{}' is not a number\n{}", *text, usage));
    }
  }
  if (disk >= (*archive)->disk_count()) return Fail(1, fmt::format("no disk {}", disk));
  std::vector<uint8_t> bytes(kExtentHeaderSize);
  Disk& d = (*archive)->disk(disk);
  if (Status st = d.ReadAt(offset, bytes); !st.ok()) return Fail(1, st.message());
  auto header = DecodeExtentHeader(bytes, fmt::format("{} offset {}", d.Name(), offset));
  if (!header.ok()) return Fail(1, header.status().message());
  fmt::print("extent {} at {} offset {}\n  version {}\n  kind {}\n  archive {}\n  inode {}\n  file offset {}\n"
             "  payload {} bytes, crc32c {:08x}{}\n  allocated {} bytes\n  chunk {} of {} ({}{})\n  policy {}\n",
             header->extent_id, d.Name(), offset, header->version,
             header->kind == ExtentKind::kPack ? "pack" : "file segment", ArchiveIdToString(header->archive_id),
             header->inode, header->file_offset, header->payload_length, header->payload_crc,
             header->redundancy.checksum == ChecksumType::kCrc32c
                 ? std::string()
                 : fmt::format(", {} {:02x}", ChecksumName(header->redundancy.checksum),
                               fmt::join(std::span(header->digest).first(DigestSize(header->redundancy.checksum)), "")),
             ExtentAllocation(header->payload_length, header->redundancy.idr_scramble), header->chunk_index,
             header->redundancy.chunk_count(),
             header->redundancy.scheme == Redundancy::Scheme::kNone     ? std::string("no redundancy")
             : header->redundancy.scheme == Redundancy::Scheme::kMirror ? fmt::format("mirror-{}",
                                                                                      header->redundancy.chunk_count())
                                                                        : fmt::format("rs-{}-{}",
                                                                                      header->redundancy.data_chunks,
                                                                                      header->redundancy.parity_chunks),
             header->redundancy.idr_scramble ? fmt::format(", idr spc-16-1-s{}", header->redundancy.idr_scramble) : "",
             header->policy_stamp);
  if (header->version >= 3) {
    fmt::print("  extent payload {} bytes, crc32c {:08x}, of which member table {} bytes\n",
               header->extent_payload_length, header->extent_payload_crc, header->members_length);
  }
  if (header->version >= 4) {
    fmt::print("  logical payload {} bytes, transforms {}\n", header->logical_length,
               header->chain_stamp.empty() ? "none" : header->chain_stamp);
  }
  return 0;
}

}  // namespace cairn
