#include "archive/archive.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "archive/config.h"
#include "archive/private_files.h"
#include "archive/rules_fit.h"
#include "codec/plugin_loader.h"
#include "group/lonestar_placer.h"
#include "group/placer.h"
#include "policy/write_plan.h"
#include "redundancy/striping.h"
#include "util/clock.h"
#include "util/coding.h"
#include "util/log.h"
#include "util/sync_directory.h"

namespace cairn {
namespace {

bool IsEmptyDir(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (!dir) return false;
  int entries = 0;
  while (struct dirent* e = ::readdir(dir)) {
    if (std::string_view(e->d_name) != "." && std::string_view(e->d_name) != "..") entries++;
  }
  ::closedir(dir);
  return entries == 0;
}

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::FromErrno(fmt::format("cannot create directory {}", path), errno);
  }
  return Status::OK();
}

// Replaces dir/name with `text`, a private file of the archive in `dir`.
Status WriteFileDurably(const std::string& dir, const std::string& name, const std::string& text) {
  std::string path = dir + "/" + name;
  std::string tmp = path + ".tmp";
  // A new file, never one left there: that could be a second name of some other file.
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) return Status::FromErrno(fmt::format("cannot remove {}", tmp), errno);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) return Status::FromErrno(fmt::format("cannot create {}", tmp), errno);
  Status owned = GiveToArchiveOwner(dir, fd, tmp);
  bool ok = owned.ok() && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  int err = errno;
  ::close(fd);
  if (!owned.ok()) return owned;
  if (!ok) return Status::FromErrno(fmt::format("cannot write {}", tmp), err);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Status::FromErrno(fmt::format("cannot rename {}", tmp), errno);
  return SyncDirectory(dir);  // or a power loss could bring back the old file
}

std::string ResolveDiskPath(const std::string& archive_dir, const std::string& path) {
  return path.starts_with('/') ? path : archive_dir + "/" + path;
}

}  // namespace

namespace {

// The archive's files and disks in `dir`, which is empty.
Status CreateArchiveIn(const std::string& dir, const MkfsOptions& mkfs) {
  CAIRN_RETURN_IF_ERROR(MakeDir(dir + "/cache"));
  CAIRN_RETURN_IF_ERROR(MakeDir(dir + "/disks"));

  ArchiveOptions options = mkfs.options;
  if (options.compressed_segment_size == 0) {
    options.compressed_segment_size = std::max(kNewArchiveCompressedSegmentSize, options.segment_size);
  }
  ArchiveId id = NewArchiveId();
  options.archive_id = ArchiveIdToString(id);
  options.disks.clear();
  for (uint32_t i = 0; i < mkfs.disk_count; i++) {
    std::string relative = fmt::format("disks/disk-{:03}.img", i);
    CAIRN_RETURN_IF_ERROR(FormatDisk(dir + "/" + relative, i, id, mkfs.disk_size));
    options.disks.push_back(relative);
  }
  for (const MkfsOptions::Group& group : mkfs.groups) {
    CAIRN_RETURN_IF_ERROR(AddGroup(dir, id, group.spec, mkfs.disk_size, group.devices, options, mkfs.progress));
  }
  auto catalog = Catalog::Create(dir + "/catalog.db", ::getuid(), ::getgid(), NowNs());
  if (!catalog.ok()) return catalog.status();
  CAIRN_RETURN_IF_ERROR(SaveConfig(dir, options));
  return MakeArchivePrivate(dir);
}

}  // namespace

Status CreateArchive(const std::string& dir, const MkfsOptions& mkfs) {
  if (mkfs.disk_count == 0 && mkfs.groups.empty()) {
    return Status::InvalidArgument("an archive needs at least one disk (--disks N or --group)");
  }
  if (mkfs.disk_size < kMinDiskSize) {
    return Status::InvalidArgument(fmt::format("disk size {} is too small (minimum 64 KiB)", mkfs.disk_size));
  }
  struct stat st;
  bool made = false;
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return Status::Exists(fmt::format("{} exists and is not a directory", dir));
    if (!IsEmptyDir(dir)) return Status::Exists(fmt::format("{} is not empty; refusing to create an archive there", dir));
  } else {
    made = true;
  }
  // Everything checked before anything is written: the groups' devices, as they add up.
  ArchiveOptions planned;
  planned.disks.resize(mkfs.disk_count);
  for (const MkfsOptions::Group& group : mkfs.groups) {
    CAIRN_RETURN_IF_ERROR(CheckGroup(dir, group.spec, mkfs.disk_size, group.devices, planned));
    planned.disks.resize(planned.disks.size() + group.spec.disks - group.devices.size());
    planned.disks.insert(planned.disks.end(), group.devices.begin(), group.devices.end());
  }
  if (made && ::mkdir(dir.c_str(), 0755) != 0) {
    return Status::FromErrno(fmt::format("cannot create archive directory {}", dir), errno);
  }
  Status created = CreateArchiveIn(dir, mkfs);
  if (!created.ok()) {  // what it made goes: the directory was empty, or not there
    std::error_code ignored;
    if (made) {
      std::filesystem::remove_all(dir, ignored);
    } else {
      for (const auto& entry : std::filesystem::directory_iterator(dir, ignored)) {
        std::filesystem::remove_all(entry.path(), ignored);
      }
    }
  }
  return created;
}

Status FormatDisk(const std::string& path, uint32_t index, const ArchiveId& id, uint64_t size) {
  auto disk = CreateImageDisk(path, size);
  if (!disk.ok()) return disk.status();
  return FormatDevice(path, index, id, size);
}

Status FormatDevice(const std::string& path, uint32_t index, const ArchiveId& id, uint64_t size) {
  auto disk = OpenImageDisk(path);
  if (!disk.ok()) return disk.status();
  if ((*disk)->Size() < size) {
    return Status::InvalidArgument(fmt::format("{} has {} bytes, fewer than {}", path, (*disk)->Size(), size));
  }
  Superblock sb;
  sb.disk_index = index;
  sb.archive_id = id;
  sb.disk_size = size;
  CAIRN_RETURN_IF_ERROR((*disk)->WriteAt(0, EncodeSuperblock(sb)));
  return (*disk)->Sync();
}

Status CheckRecordablePath(const std::string& path) {
  bool edge_space = !path.empty() && (std::isspace(static_cast<unsigned char>(path.front())) ||
                                      std::isspace(static_cast<unsigned char>(path.back())));
  if (path.find_first_of("#\n\r") == std::string::npos && !edge_space) return Status::OK();
  return Status::InvalidArgument(
      fmt::format("{:?}: cairn.conf cannot hold a path with '#', a line break or spaces at either end", path));
}

Status SaveConfig(const std::string& dir, const ArchiveOptions& options) {
  for (const std::string& path : options.disks) CAIRN_RETURN_IF_ERROR(CheckRecordablePath(path));
  CAIRN_RETURN_IF_ERROR(CheckRecordablePath(options.keystore));
  CAIRN_RETURN_IF_ERROR(CheckRecordablePath(options.plugin_dir));
  return WriteFileDurably(dir, "cairn.conf", FormatConfig(options));
}

namespace {

// Serializes the daemon's read-modify-write edits of cairn.conf (disk fail, end of rebuild).
std::mutex& ConfigEditMutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

Status MarkDiskFailed(const std::string& dir, uint32_t disk) {
  std::lock_guard lock(ConfigEditMutex());
  auto options = LoadConfig(dir + "/cairn.conf");  // as written, without -o overrides
  if (!options.ok()) return options.status();
  if (disk >= options->disks.size()) {
    return Status::InvalidArgument(fmt::format("'{}' is not a disk of this archive (0..{})", disk,
                                               options->disks.size() - 1));
  }
  options->failed_disks.insert(disk);
  return SaveConfig(dir, *options);
}

Status Archive::FinishRebuild() {
  std::lock_guard config_lock(ConfigEditMutex());
  auto saved = LoadConfig(dir_ + "/cairn.conf");  // as written, without -o overrides
  if (!saved.ok()) return saved.status();
  saved->rebuild_disks.clear();
  CAIRN_RETURN_IF_ERROR(SaveConfig(dir_, *saved));
  health_.SetAwaitingRebuild({});
  return Status::OK();
}

Status Archive::FailDisk(size_t disk) {
  CAIRN_RETURN_IF_ERROR(MarkDiskFailed(dir_, static_cast<uint32_t>(disk)));
  const char* why = "marked failed (cairn disk fail); replace it with cairn disk replace";
  health_.MarkOut(disk, why);
  if (auto [array, position] = array_of(disk); array) array->MarkLost(position, why);
  return Status::OK();
}

TransformPool& Archive::transform_pool() {
  std::call_once(transform_pool_started_,
                 [this] { transform_pool_ = std::make_unique<TransformPool>(options_.transform_workers); });
  return *transform_pool_;
}

Result<std::unique_ptr<Archive>> Archive::Open(const std::string& dir, const OpenOptions& open) {
  return OpenWithLock(dir, open, std::nullopt);
}

Result<std::unique_ptr<Archive>> Archive::Open(const std::string& dir, const OpenOptions& open, ArchiveLock held) {
  return OpenWithLock(dir, open, std::move(held));
}

Result<std::unique_ptr<Archive>> Archive::OpenWithLock(const std::string& dir, const OpenOptions& open,
                                                       std::optional<ArchiveLock> held) {
  std::unique_ptr<Archive> archive(new Archive());
  char* real = ::realpath(dir.c_str(), nullptr);
  if (!real) return Status::FromErrno(fmt::format("archive {}", dir), errno);
  archive->dir_ = real;
  free(real);
  const std::string& root = archive->dir_;
  CAIRN_RETURN_IF_ERROR(CheckArchiveAccess(root));

  auto options = LoadConfig(root + "/cairn.conf");
  if (!options.ok()) return options.status();
  archive->options_ = *options;
  for (const ArchiveOptions::Group& group : EffectiveGroups(archive->options_)) {
    if (archive->first_group_.empty()) archive->first_group_ = group.name;
    if (*GroupTypeNamed(group.type) == GroupType::kLoneStar) archive->lonestar_groups_.insert(group.name);
  }
  for (const auto& [key, value] : open.overrides) {
    Status st = ApplyOption(archive->options_, key, value);
    if (!st.ok()) return Status::InvalidArgument(fmt::format("mount option: {}", st.message()));
  }
  // Before anything reads a policy or an extent: the transforms they name come from here.
  CAIRN_RETURN_IF_ERROR(LoadArchivePlugins(archive->options_.plugin_dir));
  archive->health_.SetAwaitingRebuild(archive->options_.rebuild_disks);
  auto id = ArchiveIdFromString(archive->options_.archive_id);
  if (!id.ok()) return id.status();
  archive->id_ = *id;

  if (held || open.lock) {
    if (held) {
      archive->lock_ = std::move(held);
    } else {
      auto lock = ArchiveLock::Acquire(root);
      if (!lock.ok()) return lock.status();
      archive->lock_ = std::move(*lock);
    }
    // Before the catalog is opened: SQLite gives its WAL the catalog's mode and owner.
    CAIRN_RETURN_IF_ERROR(MakeArchivePrivate(root));
  }

  std::string catalog_path = root + "/catalog.db";
  if (::access(catalog_path.c_str(), F_OK) != 0) {
    return Status::NotFound(fmt::format("{} is missing: the archive has no catalog", catalog_path));
  }
  auto catalog = Catalog::Open(catalog_path, open.read_only);
  if (!catalog.ok()) return catalog.status();
  if (!held) {  // recover hands its lock over; anyone else must not take its half-made catalog
    auto unfinished = (*catalog)->GetMeta(kRecoverUnfinishedMeta);
    if (!unfinished.ok() && !unfinished.status().IsNotFound()) return unfinished.status();
    if (unfinished.ok() && !unfinished->empty()) {
      return Status::Busy(fmt::format("{} is from a `cairn recover` that did not finish: run `cairn recover --force "
                                      "{}` again (the catalog it replaced is kept as catalog.db.bak-TIME)",
                                      catalog_path, dir));
    }
  }
  archive->catalog_ = std::move(*catalog);
  Archive* a = archive.get();
  archive->catalog_->SetListener(Catalog::Listener{[a] { a->EndOperation(true); }, [a] { a->EndOperation(false); }});
  archive->cache_ = StagingCache(root + "/cache");
  archive->file_keys_ = std::make_unique<FileKeys>(*archive->catalog_, archive->catalog_mutex_, archive->id_,
                                                   archive->keystore_path());
  std::vector<std::unique_ptr<BlockChunkStore>> stores;
  CAIRN_RETURN_IF_ERROR(archive->LoadDisks(open, &stores));
  archive->seal_array_epochs_ = archive->lock_.has_value() && !open.check_only && !open.read_only;
  bool repair_on_read = open.repair_on_read && !open.read_only && !open.check_only;
  std::vector<DiskGroup> groups = archive->MakeGroups(stores);
  archive->extents_ =
      std::make_unique<ExtentStore>(archive->id_, std::move(stores), std::move(groups), archive->health_,
                                    archive->catalog_mutex_, *archive->catalog_, repair_on_read,
                                    [a](uint64_t ceiling) { return a->RecordExtentIdCeiling(ceiling); });
  if (!open.check_only) CAIRN_RETURN_IF_ERROR(archive->RebuildSpaceMaps());
  auto max_extent_id = archive->catalog_->MaxExtentIdEverUsed();
  if (!max_extent_id.ok()) return max_extent_id.status();
  archive->extents_->ReserveExtentIds(*max_extent_id);
  if (!open.check_only && !open.read_only) CAIRN_RETURN_IF_ERROR(archive->LoadRules());
  return archive;
}

std::string Archive::keystore_path() const {
  return KeystorePath(dir_, options_);
}

Status Archive::RecordExtentIdCeiling(uint64_t ceiling) {
  {
    std::lock_guard lock(catalog_mutex_);
    // 0: the inode floor stays.
    CAIRN_RETURN_IF_ERROR(InTransaction(*catalog_, [&] { return catalog_->RaiseIdFloors(0, ceiling); }));
  }
  return CommitDurably();
}

Result<uint64_t> Archive::ChangeFileKeys(const std::string& action, const std::string& key_name,
                                         std::vector<uint64_t>* erased) {
  if (action == "count") return file_keys_->CountUnder(key_name);
  Result<uint64_t> changed = Status::InvalidArgument(fmt::format("'{}' is not count, rewrap or erase", action));
  if (action == "rewrap") {
    changed = file_keys_->Rewrap(key_name);
  } else if (action == "erase") {
    auto inodes = file_keys_->EraseUnder(key_name);
    changed = inodes.ok() ? Result<uint64_t>(inodes->size()) : Result<uint64_t>(inodes.status());
    if (inodes.ok() && erased) erased->insert(erased->end(), inodes->begin(), inodes->end());
  }
  if (!changed.ok()) return changed;
  CAIRN_RETURN_IF_ERROR(CommitDurably());
  return changed;
}

std::string Archive::DomainOf(size_t disk) const { return cairn::DomainOf(options_, disk); }


Status Archive::CheckPlacementFits(const std::string& placement) const {
  return cairn::CheckPlacementFits(placement, options_);
}

Status Archive::CheckRaidInGroup(const std::string& raid, const std::string& placement) const {
  return CheckRaidInPlacement(raid, placement, options_);
}

PolicyContext Archive::policy_context() const {
  PolicyContext context;
  {
    std::lock_guard lock(rules_mutex_);
    context.rules = rules_;
  }
  context.default_segment_size = options_.segment_size;
  context.compressed_segment_size = options_.compressed_segment_size;
  context.first_group = first_group_;
  context.lonestar_groups = lonestar_groups_;
  context.unlinked = &unlinked_policies_;
  return context;
}

Status Archive::LoadRules() {
  // One reload at a time, from reading the file to applying it: a reload that read it earlier
  // must not apply its older text over a later one's.
  std::lock_guard reloading(rules_reload_mutex_);
  std::string text;
  auto rules = std::make_shared<RuleSet>(RuleSet::BuiltIn());
  auto read = RuleSet::ReadArchiveText(rules_path());
  if (!read.ok() && read.status().sys_errno() != ENOENT) return read.status();
  if (read.ok()) {
    text = std::move(*read);
    auto parsed = RuleSet::Parse(text, rules_path());
    if (!parsed.ok()) return parsed.status();
    *rules = std::move(*parsed);
    CAIRN_RETURN_IF_ERROR(CheckRulesFit(*rules, options_, rules_path()));
    CAIRN_RETURN_IF_ERROR(CheckRulesKeys(*rules, KeyInKeystore(keystore_path()), rules_path()));
  }
  std::string digest = fmt::format("{:08x}-{}", Crc32c({reinterpret_cast<const uint8_t*>(text.data()), text.size()}),
                                   text.size());
  // The new rules apply once the catalog has queued the check of every file against them
  // (under its lock, so the reconciler cannot take that check to the old ones); a failure
  // leaves the old rules in force, as the caller reports.
  std::lock_guard lock(catalog_mutex_);
  auto apply = [&] {
    std::lock_guard rules_lock(rules_mutex_);
    rules_ = std::move(rules);
  };
  auto seen = catalog_->GetMeta("rules_digest");
  if (!seen.ok() && !seen.status().IsNotFound()) return seen.status();
  if (seen.ok() ? *seen == digest : text.empty()) {
    apply();
    return Status::OK();
  }
  CAIRN_RETURN_IF_ERROR(catalog_->Begin());
  Status st = catalog_->QueuePolicyCheck(kRootInode);
  if (st.ok()) st = catalog_->SetMeta("rules_digest", digest);
  if (!st.ok()) {
    catalog_->Rollback();
    return st;
  }
  CAIRN_RETURN_IF_ERROR(catalog_->Commit());
  apply();
  LogInfo("rules {} changed: every file's policy will be checked", text.empty() ? "(none)" : rules_path());
  return Status::OK();
}

Archive::~Archive() {
  if (catalog_) {
    // Daemons and tools commit (durably) before they close: this only catches what an error
    // path left behind, so a crash of the process cannot lose it. (The checkpointer, which
    // commits too, stops first.)
    catalog_->StopCheckpoints();
    if (seal_array_epochs_) SealArrayEpochs();
    Status st = catalog_->Flush();
    if (!st.ok()) LogError("catalog: the last commit failed: {}", st.message());
  }
  catalog_.reset();
  extents_.reset();
  arrays_.clear();  // after the stores, whose views read and write through them
  // Last: once the lock is gone, another process may open the archive.
  lock_.reset();
}

Result<Archive::OpenedDisk> Archive::OpenDisk(size_t i, const OpenOptions& open) {
  std::string path = ResolveDiskPath(dir_, options_.disks[i]);
  OpenedDisk out;
  auto disk = OpenImageDisk(path);
  Status st = disk.ok() ? Status::OK() : disk.status();
  if (options_.failed_disks.contains(static_cast<uint32_t>(i))) {
    st = Status::IOError("marked failed (cairn disk fail); replace it with cairn disk replace");
  }
  if (st.ok()) {
    std::vector<uint8_t> block(kBlockSize);
    st = (*disk)->ReadAt(0, block);
    if (!st.ok()) st = Status::IOError(fmt::format("cannot read its superblock: {}", st.message()));
    auto decoded = st.ok() ? DecodeSuperblock(block, path) : Result<Superblock>(st);
    if (decoded.ok()) out.sb = *decoded;
    st = decoded.status();
  }
  if (st.ok() && out.sb.archive_id != id_) {
    return Status::InvalidArgument(fmt::format("disk {} ({}) belongs to archive {}, not to this archive {}", i, path,
                                               ArchiveIdToString(out.sb.archive_id), options_.archive_id));
  }
  if (st.ok() && out.sb.disk_index != i) {
    return Status::InvalidArgument(
        fmt::format("{} is disk {} of this archive but the config lists it as disk {}", path, out.sb.disk_index, i));
  }
  if (st.ok() && out.sb.disk_size > (*disk)->Size()) {
    // What is left of it is not trusted: its data is rebuilt elsewhere (pool) or in place.
    st = Status::Corruption(fmt::format("{} is {} bytes but was created with {} bytes (truncated?)", path,
                                        (*disk)->Size(), out.sb.disk_size));
  }
  if (!st.ok()) {  // missing or unreadable: the redundancy of what it held has to make up for it
    if (!open.degraded) {
      return Status::IOError(fmt::format("disk {}: {} (mount with -o degraded to run without it)", i, st.message()));
    }
    health_.MarkOut(i, st.message());
    out.disk = MissingDisk(path, st.message());
    out.missing = true;
    return out;
  }
  out.disk = open.wrap_disk ? open.wrap_disk(std::move(*disk), i) : std::move(*disk);
  return out;
}

Status Archive::LoadDisks(const OpenOptions& open, std::vector<std::unique_ptr<BlockChunkStore>>* stores) {
  std::vector<OpenedDisk> opened;
  for (size_t i = 0; i < options_.disks.size(); i++) {
    auto disk = OpenDisk(i, open);
    if (!disk.ok()) return disk.status();
    opened.push_back(std::move(*disk));
  }
  stores->resize(opened.size());
  std::set<uint32_t> rebuilt_below;
  for (const ArchiveOptions::Group& group : EffectiveGroups(options_)) {
    if (*GroupTypeNamed(group.type) != GroupType::kLoneStar || open.read_only) continue;
    CAIRN_RETURN_IF_ERROR(OpenArray(group, opened, stores));
    rebuilt_below.insert(group.disks.begin(), group.disks.end());
  }
  health_.SetRebuiltBelow(std::move(rebuilt_below));
  for (size_t i = 0; i < opened.size(); i++) {
    if ((*stores)[i]) continue;
    const Superblock& sb = opened[i].sb;
    uint64_t start = opened[i].missing ? 0 : sb.data_start;
    uint64_t end = opened[i].missing ? 0 : sb.disk_size / kBlockSize * kBlockSize;
    (*stores)[i] = std::make_unique<BlockChunkStore>(i, std::move(opened[i].disk), start, end);
  }
  return Status::OK();
}

std::vector<DiskGroup> Archive::MakeGroups(const std::vector<std::unique_ptr<BlockChunkStore>>& stores) const {
  std::vector<DiskGroup> groups;
  for (const ArchiveOptions::Group& group : EffectiveGroups(options_)) {
    GroupType type = *GroupTypeNamed(group.type);  // ParseConfig checked the type
    std::vector<DiskGroup::Member> members;
    std::vector<uint32_t> parity;
    std::unique_ptr<Placer> placer;
    if (type == GroupType::kLoneStar) {  // chunks go to the buckets; the parity disks hold none
      auto geometry = GridGeometry::Parse(group.geometry);  // ParseConfig checked it
      for (uint32_t p = 0; p < group.disks.size(); p++) {
        uint32_t d = group.disks[p];
        if (geometry->role(p) == DiskRole::kData) {
          members.push_back({d, stores[d].get(), DomainOf(d)});
        } else {
          parity.push_back(d);
        }
      }
      placer = std::make_unique<LoneStarPlacer>(*geometry, group.disks);
    } else {
      for (uint32_t d : group.disks) members.push_back({d, stores[d].get(), DomainOf(d)});  // each in one group
      placer = std::make_unique<FillBalancedPlacer>();
    }
    groups.emplace_back(group.name, type, std::move(members), std::move(placer), std::move(parity));
  }
  return groups;
}

Status Archive::RebuildSpaceMaps() {
  // A failed scan must fail the open: space of the extents it missed would be handed out again.
  auto extents = catalog_->AllExtents();
  if (!extents.ok()) return extents.status();
  for (const ExtentRecord& e : *extents) {
    for (const ChunkPlacement& chunk : e.chunks) {
      if (chunk.disk >= disk_count()) {
        return Status::Corruption(fmt::format("catalog: extent {} has a chunk on disk {}, but the archive has {} disks",
                                              e.id, chunk.disk, disk_count()));
      }
      if (IsOut(chunk.disk)) continue;
      Status st = extents_->MarkChunkUsed(chunk);
      if (!st.ok()) {
        return Status::Corruption(fmt::format("catalog: extent {} on disk {}: {} (run cairn fsck)", e.id, chunk.disk,
                                              st.message()));
      }
    }
  }
  return Status::OK();
}

}  // namespace cairn
