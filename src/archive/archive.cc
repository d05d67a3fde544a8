#include "archive/archive.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <fstream>

#include <fmt/format.h>

#include "archive/config.h"
#include "archive/private_files.h"
#include "archive/rules_fit.h"
#include "group/placer.h"
#include "redundancy/striping.h"
#include "util/clock.h"
#include "util/coding.h"
#include "util/log.h"

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
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) return Status::FromErrno(fmt::format("cannot create {}", tmp), errno);
  Status owned = GiveToArchiveOwner(dir, fd, tmp);
  bool ok = owned.ok() && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  int err = errno;
  ::close(fd);
  if (!owned.ok()) return owned;
  if (!ok) return Status::FromErrno(fmt::format("cannot write {}", tmp), err);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Status::FromErrno(fmt::format("cannot rename {}", tmp), errno);
  return Status::OK();
}

std::string ResolveDiskPath(const std::string& archive_dir, const std::string& path) {
  return path.starts_with('/') ? path : archive_dir + "/" + path;
}

}  // namespace

Status CreateArchive(const std::string& dir, const MkfsOptions& mkfs) {
  if (mkfs.disk_count == 0) return Status::InvalidArgument("an archive needs at least one disk (--disks N)");
  if (mkfs.disk_size < 16 * kBlockSize) {
    return Status::InvalidArgument(fmt::format("disk size {} is too small (minimum 64 KiB)", mkfs.disk_size));
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return Status::Exists(fmt::format("{} exists and is not a directory", dir));
    if (!IsEmptyDir(dir)) return Status::Exists(fmt::format("{} is not empty; refusing to create an archive there", dir));
  } else if (::mkdir(dir.c_str(), 0755) != 0) {
    return Status::FromErrno(fmt::format("cannot create archive directory {}", dir), errno);
  }
  CAIRN_RETURN_IF_ERROR(MakeDir(dir + "/cache"));
  CAIRN_RETURN_IF_ERROR(MakeDir(dir + "/disks"));

  ArchiveOptions options = mkfs.options;
  ArchiveId id = NewArchiveId();
  options.archive_id = ArchiveIdToString(id);
  options.disks.clear();
  for (uint32_t i = 0; i < mkfs.disk_count; i++) {
    std::string relative = fmt::format("disks/disk-{:03}.img", i);
    CAIRN_RETURN_IF_ERROR(FormatDisk(dir + "/" + relative, i, id, mkfs.disk_size));
    options.disks.push_back(relative);
  }
  auto catalog = Catalog::Create(dir + "/catalog.db", ::getuid(), ::getgid(), NowNs());
  if (!catalog.ok()) return catalog.status();
  CAIRN_RETURN_IF_ERROR(SaveConfig(dir, options));
  return MakeArchivePrivate(dir);
}

Status FormatDisk(const std::string& path, uint32_t index, const ArchiveId& id, uint64_t size) {
  auto disk = CreateImageDisk(path, size);
  if (!disk.ok()) return disk.status();
  Superblock sb;
  sb.disk_index = index;
  sb.archive_id = id;
  sb.disk_size = size;
  CAIRN_RETURN_IF_ERROR((*disk)->WriteAt(0, EncodeSuperblock(sb)));
  return (*disk)->Sync();
}

Status SaveConfig(const std::string& dir, const ArchiveOptions& options) {
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

std::map<size_t, std::string> Archive::missing_disks() const {
  std::lock_guard lock(missing_mutex_);
  return missing_;
}

bool Archive::IsOut(size_t disk) const {
  std::lock_guard lock(missing_mutex_);
  return missing_.contains(disk);
}

std::set<uint32_t> Archive::awaiting_rebuild() const {
  std::lock_guard lock(missing_mutex_);
  return awaiting_rebuild_;
}

bool Archive::AwaitsRebuild(size_t disk) const {
  std::lock_guard lock(missing_mutex_);
  return awaiting_rebuild_.contains(static_cast<uint32_t>(disk));
}

Status Archive::FinishRebuild() {
  std::lock_guard config_lock(ConfigEditMutex());
  auto saved = LoadConfig(dir_ + "/cairn.conf");  // as written, without -o overrides
  if (!saved.ok()) return saved.status();
  saved->rebuild_disks.clear();
  CAIRN_RETURN_IF_ERROR(SaveConfig(dir_, *saved));
  std::lock_guard lock(missing_mutex_);
  awaiting_rebuild_.clear();
  return Status::OK();
}

Status Archive::FailDisk(size_t disk) {
  CAIRN_RETURN_IF_ERROR(MarkDiskFailed(dir_, static_cast<uint32_t>(disk)));
  std::lock_guard lock(missing_mutex_);
  missing_[disk] = "marked failed (cairn disk fail); replace it with cairn disk replace";
  return Status::OK();
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
  for (const auto& [key, value] : open.overrides) {
    Status st = ApplyOption(archive->options_, key, value);
    if (!st.ok()) return Status::InvalidArgument(fmt::format("mount option: {}", st.message()));
  }
  archive->awaiting_rebuild_ = archive->options_.rebuild_disks;
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
  archive->catalog_->SetListener(Catalog::Listener{
      [a] {
        a->freed_.insert(a->freed_.end(), a->op_freed_.begin(), a->op_freed_.end());
        a->cache_removals_.insert(a->cache_removals_.end(), a->op_cache_removals_.begin(),
                                  a->op_cache_removals_.end());
        a->op_freed_.clear();
        a->op_cache_removals_.clear();
      },
      [a] {
        a->op_freed_.clear();
        a->op_cache_removals_.clear();
      }});
  archive->cache_ = StagingCache(root + "/cache");
  CAIRN_RETURN_IF_ERROR(archive->LoadDisks(open));
  archive->repair_on_read_ = open.repair_on_read && !open.read_only && !open.check_only;
  archive->MakeGroups();
  if (!open.check_only) CAIRN_RETURN_IF_ERROR(archive->RebuildSpaceMaps());
  auto max_extent_id = archive->catalog_->MaxExtentIdEverUsed();
  if (!max_extent_id.ok()) return max_extent_id.status();
  archive->next_extent_id_ = *max_extent_id + 1;
  if (!open.check_only && !open.read_only) CAIRN_RETURN_IF_ERROR(archive->LoadRules());
  return archive;
}

std::string Archive::DomainOf(size_t disk) const { return cairn::DomainOf(options_, disk); }

Status Archive::CheckRaidFits(std::string_view raid) const { return cairn::CheckRaidFits(raid, options_); }

Status Archive::CheckPlacementFits(const std::string& placement) const {
  return cairn::CheckPlacementFits(placement, options_);
}

PolicyContext Archive::policy_context() const {
  std::lock_guard lock(rules_mutex_);
  return PolicyContext{rules_, options_.segment_size};
}

Status Archive::LoadRules() {
  std::string text;
  auto rules = std::make_shared<RuleSet>(RuleSet::BuiltIn());
  if (::access(rules_path().c_str(), F_OK) == 0) {
    std::ifstream in(rules_path(), std::ios::binary);
    if (!in) return Status::IOError(fmt::format("cannot read {}", rules_path()));
    text.resize(RuleSet::kMaxFileBytes + 1);  // one byte more than Parse accepts
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    if (in.bad()) return Status::IOError(fmt::format("cannot read {}", rules_path()));
    text.resize(static_cast<size_t>(in.gcount()));
    auto parsed = RuleSet::Parse(text, rules_path());
    if (!parsed.ok()) return parsed.status();
    *rules = std::move(*parsed);
    CAIRN_RETURN_IF_ERROR(CheckRulesFit(*rules, options_, rules_path()));
  }
  {
    std::lock_guard lock(rules_mutex_);
    rules_ = std::move(rules);
  }
  std::string digest = fmt::format("{:08x}-{}", Crc32c({reinterpret_cast<const uint8_t*>(text.data()), text.size()}),
                                   text.size());
  std::lock_guard lock(catalog_mutex_);
  auto seen = catalog_->GetMeta("rules_digest");
  if (!seen.ok() && !seen.status().IsNotFound()) return seen.status();
  if (seen.ok() ? *seen == digest : text.empty()) return Status::OK();
  CAIRN_RETURN_IF_ERROR(catalog_->Begin());
  Status st = catalog_->QueuePolicyCheck(kRootInode);
  if (st.ok()) st = catalog_->SetMeta("rules_digest", digest);
  if (!st.ok()) {
    catalog_->Rollback();
    return st;
  }
  CAIRN_RETURN_IF_ERROR(catalog_->Commit());
  LogInfo("rules {} changed: every file's policy will be checked", text.empty() ? "(none)" : rules_path());
  return Status::OK();
}

Archive::~Archive() {
  if (catalog_) {
    // Daemons and tools commit (durably) before they close: this only catches what an error
    // path left behind, so a crash of the process cannot lose it.
    Status st = catalog_->Flush();
    if (!st.ok()) LogError("catalog: the last commit failed: {}", st.message());
  }
  catalog_.reset();
  groups_.clear();
  stores_.clear();
  // Last: once the lock is gone, another process may open the archive.
  lock_.reset();
}

Status Archive::LoadDisks(const OpenOptions& open) {
  for (size_t i = 0; i < options_.disks.size(); i++) {
    std::string path = ResolveDiskPath(dir_, options_.disks[i]);
    Superblock sb;
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
      if (decoded.ok()) sb = *decoded;
      st = decoded.status();
    }
    if (!st.ok()) {  // missing or unreadable: the redundancy of what it held has to make up for it
      if (!open.degraded) {
        return Status::IOError(fmt::format("disk {}: {} (mount with -o degraded to run without it)", i, st.message()));
      }
      missing_[i] = st.message();
      stores_.push_back(std::make_unique<BlockChunkStore>(i, MissingDisk(path, st.message()), 0, 0));
      continue;
    }
    if (sb.archive_id != id_) {
      return Status::InvalidArgument(fmt::format("disk {} ({}) belongs to archive {}, not to this archive {}", i, path,
                                                 ArchiveIdToString(sb.archive_id), options_.archive_id));
    }
    if (sb.disk_index != i) {
      return Status::InvalidArgument(
          fmt::format("{} is disk {} of this archive but the config lists it as disk {}", path, sb.disk_index, i));
    }
    if (sb.disk_size > (*disk)->Size()) {
      st = Status::Corruption(fmt::format("{} is {} bytes but was created with {} bytes (truncated?)", path,
                                          (*disk)->Size(), sb.disk_size));
      if (!open.degraded) return st;
      missing_[i] = st.message();  // what is left of it is not trusted; rebuild moves its chunks
      stores_.push_back(std::make_unique<BlockChunkStore>(i, MissingDisk(path, st.message()), 0, 0));
      continue;
    }
    stores_.push_back(std::make_unique<BlockChunkStore>(
        i, open.wrap_disk ? open.wrap_disk(std::move(*disk), i) : std::move(*disk), sb.data_start,
        sb.disk_size / kBlockSize * kBlockSize));
  }
  return Status::OK();
}

void Archive::MakeGroups() {
  group_of_disk_.assign(stores_.size(), 0);
  for (const ArchiveOptions::Group& group : EffectiveGroups(options_)) {
    std::vector<DiskGroup::Member> members;
    for (uint32_t d : group.disks) {  // ParseConfig checked that each is a disk of one group
      members.push_back({d, stores_[d].get(), DomainOf(d)});
      group_of_disk_[d] = groups_.size();
    }
    groups_.emplace_back(group.name, *GroupTypeNamed(group.type),  // ParseConfig checked the type
                         std::move(members), std::make_unique<FillBalancedPlacer>());
  }
}

uint64_t Archive::free_bytes() const {
  uint64_t total = 0;
  for (const DiskGroup& group : groups_) total += group.free_bytes();
  return total;
}

uint64_t Archive::capacity() const {
  uint64_t total = 0;
  for (const DiskGroup& group : groups_) total += group.capacity();
  return total;
}

Status Archive::RebuildSpaceMaps() {
  // A failed scan must fail the open: space of the extents it missed would be handed out again.
  auto extents = catalog_->AllExtents();
  if (!extents.ok()) return extents.status();
  for (const ExtentRecord& e : *extents) {
    for (const ChunkPlacement& chunk : e.chunks) {
      if (chunk.disk >= stores_.size()) {
        return Status::Corruption(fmt::format("catalog: extent {} has a chunk on disk {}, but the archive has {} disks",
                                              e.id, chunk.disk, stores_.size()));
      }
      if (IsOut(chunk.disk)) continue;
      Status st = MarkChunkUsed(chunk);
      if (!st.ok()) {
        return Status::Corruption(fmt::format("catalog: extent {} on disk {}: {} (run cairn fsck)", e.id, chunk.disk,
                                              st.message()));
      }
    }
  }
  return Status::OK();
}

Result<const DiskGroup*> Archive::group_named(std::string_view name) const {
  if (name.empty()) return &groups_.front();
  for (const DiskGroup& group : groups_) {
    if (group.name() == name) return &group;
  }
  return Status::InvalidArgument(fmt::format("placement=group={}: this archive has no disk group {}", name, name));
}

Result<ExtentRecord> Archive::WriteExtentToDisk(ExtentKind kind, uint64_t ino, uint64_t file_offset,
                                                std::span<const uint8_t> payload, const ExtentEncoding& encoding) {
  const Redundancy& redundancy = encoding.redundancy;
  ExtentRecord record;
  record.id = NewExtentId();
  record.kind = static_cast<int>(kind);
  record.payload_length = payload.size();
  record.payload_crc = Crc32c(payload);
  record.redundancy = redundancy;
  record.logical_length = encoding.logical_length;
  record.chain_stamp = encoding.chain_stamp;
  auto group = group_named(encoding.group);
  if (!group.ok()) return group.status();
  std::vector<std::vector<uint8_t>> chunks = MakeChunks(payload, redundancy);
  auto reserved = (*group)->Reserve(chunks.size(), chunks[0].size(), redundancy.idr_scramble, {},
                                          [this](uint32_t disk) { return InService(disk); });
  if (!reserved.ok()) return reserved.status();
  for (size_t i = 0; i < chunks.size(); i++) {
    const ReservedChunk& at = (*reserved)[i];
    record.chunks.push_back(
        ChunkPlacement::At(at.disk, at.locator, Crc32c(chunks[i]), ComputeDigest(redundancy.checksum, chunks[i])));
  }
  for (size_t i = 0; i < chunks.size(); i++) {
    ExtentHeader header;
    header.kind = kind;
    header.archive_id = id_;
    header.extent_id = record.id;
    header.inode = ino;
    header.file_offset = file_offset;
    header.payload_length = chunks[i].size();
    header.payload_crc = record.chunks[i].crc;
    header.digest = record.chunks[i].digest;
    header.chunk_index = static_cast<uint8_t>(i);
    header.redundancy = redundancy;
    header.policy_stamp = encoding.policy_stamp;
    header.extent_payload_length = record.payload_length;
    header.extent_payload_crc = record.payload_crc;
    header.members_length = encoding.members_length;
    header.logical_length = encoding.logical_length;
    header.chain_stamp = encoding.chain_stamp;
    Status st = WriteChunkAt(record.chunks[i], header, chunks[i]);
    if (!st.ok()) {
      ReleaseUncommitted(record);
      return st;
    }
  }
  return record;
}

void Archive::ReleaseUncommitted(const ExtentRecord& extent) {
  for (const ChunkPlacement& chunk : extent.chunks) ReleaseUncommittedChunk(chunk);
}

void Archive::ReleaseUncommittedChunk(const ChunkPlacement& chunk) {
  Status st = stores_[chunk.disk]->Release(chunk.locator());
  // A refusal (double free) keeps the space out of use rather than risk handing it out
  // twice; it is free again after the next mount's rebuild.
  if (!st.ok()) LogError("{}: {}", stores_[chunk.disk]->name(), st.message());
}

Result<ChunkPlacement> Archive::ReserveRelocation(const ExtentRecord& extent, size_t index) {
  const ChunkPlacement& from = extent.chunks[index];
  std::set<std::string> used;  // failure domains of the other chunks
  for (size_t i = 0; i < extent.chunks.size(); i++) {
    if (i != index) used.insert(DomainOf(extent.chunks[i].disk));
  }
  auto reserved = group_of(from.disk).Reserve(1, extent.redundancy.ChunkLength(extent.payload_length),
                                              extent.redundancy.idr_scramble, used,
                                              [this](uint32_t disk) { return InService(disk); });
  if (!reserved.ok()) {
    return Status::NoSpace(fmt::format(
        "no disk in a failure domain without a chunk of extent {} is in service with room for chunk {}", extent.id,
        index));
  }
  // Same bytes, same CRC and digest: only the place changes.
  return ChunkPlacement::At(reserved->front().disk, reserved->front().locator, from.crc, from.digest);
}

Status Archive::WriteChunkAt(const ChunkPlacement& chunk, const ExtentHeader& header, std::span<const uint8_t> bytes) {
  return stores_[chunk.disk]->Write(chunk.locator(), header, bytes);
}

Status Archive::Commit(SyncWhen when, PendingSync* pending) {
  CAIRN_RETURN_IF_ERROR(catalog_->Flush());
  bool waiting = !freed_.empty() || !cache_removals_.empty();
  if (when == SyncWhen::kNever || (when == SyncWhen::kIfWaiting && !waiting)) return Status::OK();
  pending->sequence = catalog_->commit_sequence();
  pending->freed.insert(pending->freed.end(), freed_.begin(), freed_.end());
  pending->cache_removals.insert(pending->cache_removals.end(), cache_removals_.begin(), cache_removals_.end());
  freed_.clear();
  cache_removals_.clear();
  return Status::OK();
}

Status Archive::MakeDurable(PendingSync pending) {
  if (pending.sequence == 0) return Status::OK();
  Status synced = catalog_->SyncThrough(pending.sequence);
  if (!synced.ok()) {
    // A power loss could still undo the deletions: their space and cache files stay.
    LogError("{}; {} extent(s) keep their space until the next mount", synced.message(), pending.freed.size());
    return synced;
  }
  for (uint64_t ino : pending.cache_removals) {
    Status st = cache_.Remove(ino);
    if (!st.ok()) LogError("staging cache: {}", st.message());
  }
  std::unique_lock space(space_mutex_);  // no rewrite of a chunk in this space is under way
  for (const ExtentRecord& extent : pending.freed) {
    for (const ChunkPlacement& chunk : extent.chunks) {
      Status st = stores_[chunk.disk]->Free(chunk.locator());
      // A refusal (double free) keeps the space out of use; it is free again after the next
      // mount's rebuild. A failed discard leaves it free.
      if (!st.ok()) LogWarning("{}: {}", stores_[chunk.disk]->name(), st.message());
    }
  }
  return Status::OK();
}

Status Archive::CommitDurably() {
  PendingSync pending;
  {
    std::lock_guard lock(catalog_mutex_);
    CAIRN_RETURN_IF_ERROR(Commit(SyncWhen::kAlways, &pending));
  }
  return MakeDurable(std::move(pending));
}

Status Archive::UnrefExtent(uint64_t extent_id) {
  if (extent_id == kHoleExtent) return Status::OK();
  auto extent = catalog_->GetExtent(extent_id);
  if (!extent.ok()) return extent.status();
  if (extent->refs > 1) return catalog_->SetExtentRefs(extent_id, extent->refs - 1);
  CAIRN_RETURN_IF_ERROR(catalog_->DeleteExtent(extent_id));
  FreeAfterDurableCommit(*extent);
  return Status::OK();
}

Result<std::vector<uint8_t>> Archive::ReadChunk(const ExtentRecord& extent, size_t index, bool* idr_repaired,
                                               ExtentHeader* header) {
  const ChunkPlacement& chunk = extent.chunks[index];
  if (chunk.disk >= stores_.size()) {
    return Status::Corruption(fmt::format("extent {} is on disk {}, which does not exist", extent.id, chunk.disk));
  }
  if (IsOut(chunk.disk)) {
    return Status::IOError(fmt::format("disk {} is out of service: {}", chunk.disk, missing_disks()[chunk.disk]));
  }
  if (AwaitsRebuild(chunk.disk)) {
    return Status::IOError(fmt::format("disk {} was replaced and waits for cairn rebuild", chunk.disk));
  }
  const Redundancy& r = extent.redundancy;
  std::vector<uint64_t> repaired;
  auto bytes = stores_[chunk.disk]->Read(
      chunk.locator(),
      ExtentExpectation{id_, extent.id, r.ChunkLength(extent.payload_length), chunk.crc, static_cast<uint8_t>(index),
                        r.idr_scramble, r.checksum, chunk.digest},
      &repaired, header);
  if (idr_repaired) *idr_repaired = bytes.ok() && !repaired.empty();
  return bytes;
}

Result<ExtentHeader> Archive::ReadChunkHeader(const ExtentRecord& extent, size_t index) {
  const ChunkPlacement& chunk = extent.chunks[index];
  auto header = stores_[chunk.disk]->ReadHeader(chunk.locator());
  if (header.ok() && (header->extent_id != extent.id || header->chunk_index != index)) {
    return Status::Corruption(fmt::format("extent {} chunk {}: the header belongs to extent {} chunk {}", extent.id,
                                          index, header->extent_id, header->chunk_index));
  }
  return header;
}

Result<ExtentHeader> Archive::ReadAnyChunkHeader(const ExtentRecord& extent) {
  Status last = Status::Corruption(fmt::format("extent {}: no chunk header can be read", extent.id));
  for (size_t i = 0; i < extent.chunks.size(); i++) {
    if (IsOut(extent.chunks[i].disk) || AwaitsRebuild(extent.chunks[i].disk)) continue;
    auto header = ReadChunkHeader(extent, i);
    if (header.ok()) return header;
    last = header.status();
  }
  return last;
}

Result<bool> Archive::RewriteChunk(const ExtentRecord& extent, size_t index, ExtentHeader header,
                                   std::span<const uint8_t> bytes) {
  const ChunkPlacement& chunk = extent.chunks[index];
  if (IsOut(chunk.disk)) return false;  // cairn rebuild moves it
  // While shared, no space is freed: a chunk the catalog still has there stays its own
  // until the write is done, and metadata operations go on meanwhile.
  std::shared_lock space(space_mutex_);
  {
    std::lock_guard lock(catalog_mutex_);
    auto current = catalog_->GetExtent(extent.id);
    if (!current.ok() && !current.status().IsNotFound()) return current.status();
    if (!current.ok() || index >= current->chunks.size() || !(current->chunks[index] == chunk)) return false;
  }
  CAIRN_RETURN_IF_ERROR(WriteChunkAt(chunk, HeaderForChunk(header, index, chunk, bytes.size()), bytes));
  return true;
}

ExtentHeader HeaderForChunk(ExtentHeader header, size_t index, const ChunkPlacement& chunk, uint64_t length) {
  header.chunk_index = static_cast<uint8_t>(index);
  header.payload_crc = chunk.crc;
  header.digest = chunk.digest;
  header.payload_length = length;
  return header;
}

std::vector<Status> Archive::CheckChunks(const ExtentRecord& extent, ChunkSet* chunks) {
  std::vector<Status> out;
  chunks->assign(extent.chunks.size(), std::nullopt);
  for (size_t i = 0; i < extent.chunks.size(); i++) {
    bool idr_repaired = false;
    auto bytes = ReadChunk(extent, i, &idr_repaired);
    Status st = bytes.status();
    if (bytes.ok()) (*chunks)[i] = std::move(*bytes);  // good bytes, even if IDR had to mend them
    if (idr_repaired) {
      st = Status::Corruption("damaged blocks, rebuilt by its intra-disk parity (cairn scrub rewrites them)");
    }
    out.push_back(st);
  }
  return out;
}

void Archive::RepairOnRead(const ExtentRecord& extent, const std::vector<size_t>& failed,
                           std::span<const uint8_t> payload) {
  std::vector<std::vector<uint8_t>> chunks;
  for (size_t i : failed) {
    uint32_t disk = extent.chunks[i].disk;
    if (IsOut(disk) || AwaitsRebuild(disk)) continue;  // cairn rebuild moves or fills those
    if (chunks.empty()) chunks = MakeChunks(payload, extent.redundancy);
    auto header = ReadAnyChunkHeader(extent);
    auto written = header.ok() ? RewriteChunk(extent, i, *header, chunks[i]) : Result<bool>(header.status());
    Status st = written.ok() && *written ? SyncDisk(disk) : written.status();
    if (st.ok() && *written) {
      LogInfo("repaired extent {} chunk {} on disk {} from the other chunks", extent.id, i, disk);
    } else if (!st.ok()) {
      LogError("cannot repair extent {} chunk {} on disk {}: {}", extent.id, i, disk, st.message());
    }
  }
}

Result<std::vector<uint8_t>> Archive::ReadExtentPayload(const ExtentRecord& extent) {
  const Redundancy& r = extent.redundancy;
  ChunkSet chunks(extent.chunks.size());
  size_t have = 0;
  std::string failures;
  std::vector<size_t> failed;
  // Data chunks first (a healthy read touches only them), then parity as needed.
  for (size_t i = 0; i < extent.chunks.size() && have < ChunksNeeded(r); i++) {
    const ChunkPlacement& chunk = extent.chunks[i];
    bool idr_repaired = false;
    auto bytes = ReadChunk(extent, i, &idr_repaired);
    if (bytes.ok()) {
      chunks[i] = std::move(*bytes);
      have++;
      if (idr_repaired) failed.push_back(i);  // good bytes from a bad spot: rewrite it
      continue;
    }
    failures += fmt::format("{}{}", failures.empty() ? "" : "; ", bytes.status().message());
    failed.push_back(i);
    bool expected = IsOut(chunk.disk) || AwaitsRebuild(chunk.disk);
    std::lock_guard lock(failures_mutex_);
    if (!expected && failed_disks_logged_.insert(chunk.disk).second) {
      LogError("disk {}: {} (further failures of this disk are not logged)", chunk.disk, bytes.status().message());
    }
  }
  if (have < ChunksNeeded(r)) {
    return Status::Corruption(fmt::format("extent {}: too few readable chunks ({} of {} needed): {}", extent.id, have,
                                          ChunksNeeded(r), failures));
  }
  auto payload = JoinVerified(extent, chunks);
  if (payload.ok() && repair_on_read_ && !failed.empty()) RepairOnRead(extent, failed, *payload);
  return payload;
}

Result<std::vector<uint8_t>> Archive::JoinVerified(const ExtentRecord& extent, ChunkSet& chunks) {
  const Redundancy& r = extent.redundancy;
  std::vector<bool> read_ok(chunks.size());
  for (size_t i = 0; i < chunks.size(); i++) read_ok[i] = chunks[i].has_value();
  auto payload = JoinChunks(chunks, r, extent.payload_length);
  if (!payload.ok()) return payload.status();
  for (size_t i = 0; i < r.data_chunks && r.checksum != ChecksumType::kCrc32c; i++) {
    if (read_ok[i] || !chunks[i]) continue;  // a rebuilt data chunk must match its own digest too
    if (ComputeDigest(r.checksum, *chunks[i]) != extent.chunks[i].digest) {
      return Status::Corruption(fmt::format("extent {}: rebuilt chunk {} does not match its {}", extent.id, i,
                                            ChecksumName(r.checksum)));
    }
  }
  // A reconstruction is only as good as its check: never hand out unverified bytes.
  if (Crc32c(*payload) != extent.payload_crc) {
    return Status::Corruption(fmt::format("extent {}: the rebuilt payload does not match its checksum", extent.id));
  }
  return payload;
}

}  // namespace cairn
