#include "archive/group_setup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <filesystem>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "archive/archive.h"
#include "archive/config.h"
#include "array/grid_geometry.h"
#include "array/promise_journal.h"
#include "util/size.h"

namespace cairn {

namespace {

// What a disk path names, whatever the path: a block device by its number, a file by its inode.
Result<std::pair<uint64_t, uint64_t>> DiskIdentity(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno(path, errno);
  if (S_ISBLK(st.st_mode)) return std::pair<uint64_t, uint64_t>{0, st.st_rdev};
  return std::pair<uint64_t, uint64_t>{st.st_dev, st.st_ino};
}

}  // namespace

Status CheckDevicesAreNew(const std::string& dir, const std::vector<std::string>& devices,
                          const ArchiveOptions& options) {
  std::map<std::pair<uint64_t, uint64_t>, std::string> disks;  // of the archive, and its files
  for (const std::string& disk : options.disks) {
    if (disk.empty()) continue;  // (one mkfs is still to make)
    auto identity = DiskIdentity(disk.starts_with('/') ? disk : dir + "/" + disk);
    // (a missing one cannot be listed again)
    if (identity.ok()) disks.emplace(*identity, disk + ", a disk of this archive already");
  }
  std::error_code error;
  const auto home = std::filesystem::weakly_canonical(dir, error);
  if (error) return Status::FromErrno(fmt::format("cannot resolve {}", dir), error.value());
  for (const auto& entry : std::filesystem::directory_iterator(home, error)) {
    auto identity = DiskIdentity(entry.path());
    if (identity.ok()) disks.emplace(*identity, fmt::format("{}, a file of this archive", entry.path().string()));
  }
  if (error && error != std::errc::no_such_file_or_directory) {
    return Status::FromErrno(fmt::format("cannot list {}", dir), error.value());
  }
  std::map<std::pair<uint64_t, uint64_t>, std::string> listed;
  for (const std::string& device : devices) {
    CAIRN_RETURN_IF_ERROR(CheckRecordablePath(device));
    auto identity = DiskIdentity(device);
    if (!identity.ok()) return identity.status();
    if (auto disk = disks.find(*identity); disk != disks.end()) {
      return Status::InvalidArgument(fmt::format("{} is {}; refused", device, disk->second));
    }
    auto resolved = std::filesystem::weakly_canonical(device, error);
    auto [inside, rest] = std::mismatch(home.begin(), home.end(), resolved.begin(), resolved.end());
    if (!error && inside == home.end()) {
      return Status::InvalidArgument(fmt::format("{} is inside the archive directory {}; refused", device,
                                                 home.string()));
    }
    if (auto [earlier, added] = listed.emplace(*identity, device); !added) {
      return Status::InvalidArgument(fmt::format("{} and {} are the same disk", earlier->second, device));
    }
  }
  return Status::OK();
}


Result<GroupSpec> ParseGroupSpec(std::string_view text) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    size_t colon = text.find(':', start);
    parts.emplace_back(text.substr(start, colon == std::string_view::npos ? colon : colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  const char* form = "expected NAME:pool:N or NAME:lonestar:XxY:HN+1[:serialized|direct|delayed]";
  if (parts.size() < 3) return Status::InvalidArgument(fmt::format("group {:?}: {}", text, form));
  GroupSpec spec;
  spec.name = parts[0];
  spec.type = parts[1];
  if (spec.name.empty() || !std::all_of(spec.name.begin(), spec.name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
      })) {
    return Status::InvalidArgument(fmt::format("group {:?}: a group name is letters, digits, '-' and '_'", text));
  }
  if (spec.type == "pool" && parts.size() == 3) {
    auto n = ParseDecimal(parts[2], 1, kMaxDisks);
    if (!n) {
      return Status::InvalidArgument(fmt::format("group {:?}: {:?} is not a disk count 1..{}", text, parts[2], kMaxDisks));
    }
    spec.disks = static_cast<uint32_t>(*n);
    return spec;
  }
  if (spec.type == "lonestar" && (parts.size() == 4 || parts.size() == 5)) {
    auto geometry = GridGeometry::Parse(parts[2] + ":" + parts[3]);
    if (!geometry.ok()) return Status::InvalidArgument(fmt::format("group {}: {}", spec.name, geometry.status().message()));
    spec.geometry = geometry->ToString();
    spec.disks = geometry->disk_count();
    spec.write_mode = parts.size() == 5 ? parts[4] : "serialized";
    if (!ArrayWriteModeNamed(spec.write_mode)) {
      return Status::InvalidArgument(fmt::format("group {}: write mode {:?} is not serialized, direct or delayed",
                                                 spec.name, spec.write_mode));
    }
    return spec;
  }
  return Status::InvalidArgument(fmt::format("group {:?}: {}", text, form));
}

std::vector<std::string> AbsoluteDevices(const std::vector<std::string>& devices) {
  std::vector<std::string> absolute;
  for (const std::string& device : devices) {
    std::error_code error;
    // Not normalised: ".." after a symbolic link is not the link's parent.
    auto path = std::filesystem::absolute(device, error);
    absolute.push_back(error ? device : path.string());
  }
  return absolute;
}

Status CheckGroup(const std::string& dir, const GroupSpec& spec, uint64_t disk_size,
                  const std::vector<std::string>& devices, const ArchiveOptions& options) {
  if (!devices.empty() && devices.size() != spec.disks) {
    return Status::InvalidArgument(
        fmt::format("group {} needs {} disks; --devices lists {}", spec.name, spec.disks, devices.size()));
  }
  if (options.disks.size() + spec.disks > kMaxDisks) {
    return Status::InvalidArgument(fmt::format("an archive has at most {} disks", kMaxDisks));
  }
  for (const std::string& device : devices) {
    if (!device.starts_with('/')) {
      return Status::InvalidArgument(fmt::format("--devices: {} is not an absolute path", device));
    }
  }
  CAIRN_RETURN_IF_ERROR(CheckDevicesAreNew(dir, devices, options));
  uint64_t size = devices.empty() ? disk_size : UINT64_MAX;
  for (const std::string& path : devices) {
    auto disk = OpenImageDisk(path);
    if (!disk.ok()) return disk.status();
    size = std::min(size, (*disk)->Size() / kBlockSize * kBlockSize);
  }
  if (size < kMinDiskSize) {
    return Status::InvalidArgument(fmt::format("group {}: disks of {} bytes are too small (minimum 64 KiB)",
                                               spec.name, size));
  }
  return Status::OK();
}

// Formats the disks of `group` (images it lists in `created`, or `devices`) into `options`, and
// creates a lonestar group's journal.
static Status FormatGroupDisks(const std::string& dir, const ArchiveId& id, const GroupSpec& spec, uint64_t size,
                        const std::vector<std::string>& devices, ArchiveOptions& options,
                        ArchiveOptions::Group& group, std::vector<std::string>& created,
                        const std::function<void(const std::string&)>& progress) {
  for (uint32_t i = 0; i < spec.disks; i++) {
    auto index = static_cast<uint32_t>(options.disks.size());
    if (devices.empty()) {
      std::string relative = fmt::format("disks/disk-{:03}.img", index);
      struct stat st;
      if (::lstat((dir + "/" + relative).c_str(), &st) == 0) {
        return Status::Exists(fmt::format("{}/{} exists already (left by a failed cairn group add?)", dir, relative));
      }
      created.push_back(dir + "/" + relative);  // (even if only part of it is made)
      CAIRN_RETURN_IF_ERROR(FormatDisk(dir + "/" + relative, index, id, size));
      options.disks.push_back(relative);
    } else {
      if (spec.type == "lonestar") {  // its parity must hold for what the devices held before
        if (progress) progress(fmt::format("zeroing {} ({} bytes)", devices[i], size));
        CAIRN_RETURN_IF_ERROR(ZeroDisk(devices[i], size, [&](uint64_t done) {
          if (progress && done < size) progress(fmt::format("zeroing {}: {} of {} MiB", devices[i], done >> 20, size >> 20));
        }));
      }
      CAIRN_RETURN_IF_ERROR(FormatDevice(devices[i], index, id, size));
      options.disks.push_back(devices[i]);
    }
    group.disks.push_back(index);
  }
  if (spec.type == "lonestar") {
    std::string path = LoneStarJournalPath(dir, spec.name);
    auto journal = PromiseJournal::Create(path, LoneStarIdentity(options.archive_id, spec.name));
    if (!journal.ok()) return journal.status();
    created.push_back(path);
    // New images and zeroed devices hold zeros, which are their own parity: the group reads
    // nothing of them past what it writes (their high-water marks).
    CAIRN_RETURN_IF_ERROR((*journal)->RaiseHighWater(group.disks, 0));
  }
  return Status::OK();
}

Status AddGroup(const std::string& dir, const ArchiveId& id, const GroupSpec& spec, uint64_t disk_size,
                const std::vector<std::string>& devices, ArchiveOptions& options,
                const std::function<void(const std::string&)>& progress) {
  // The implicit group of an archive whose cairn.conf names none becomes explicit.
  std::vector<ArchiveOptions::Group> groups =
      options.groups.empty() && !options.disks.empty() ? EffectiveGroups(options) : options.groups;
  if (std::any_of(groups.begin(), groups.end(), [&](const auto& g) { return g.name == spec.name; })) {
    return Status::Exists(fmt::format("the archive has a group {} already", spec.name));
  }
  CAIRN_RETURN_IF_ERROR(CheckGroup(dir, spec, disk_size, devices, options));
  // Devices are used as large as the smallest of them (a lonestar group's disks are alike).
  uint64_t size = disk_size;
  if (!devices.empty()) {
    size = UINT64_MAX;
    for (const std::string& path : devices) {
      auto disk = OpenImageDisk(path);
      if (!disk.ok()) return disk.status();
      size = std::min(size, (*disk)->Size() / kBlockSize * kBlockSize);
    }
  }
  ArchiveOptions::Group group{spec.name, spec.type, {}, spec.geometry,
                              spec.write_mode.empty() ? "serialized" : spec.write_mode};
  // What it creates goes again if it fails part way (a device keeps the superblock it got).
  std::vector<std::string> created;
  Status st = FormatGroupDisks(dir, id, spec, size, devices, options, group, created, progress);
  if (!st.ok()) {
    for (const std::string& path : created) ::unlink(path.c_str());
    options.disks.resize(options.disks.size() - group.disks.size());
    return st;
  }
  options.groups = std::move(groups);  // the implicit default group, if any, becomes explicit
  options.groups.push_back(std::move(group));
  return Status::OK();
}

}  // namespace cairn
