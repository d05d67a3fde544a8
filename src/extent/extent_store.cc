#include "extent/extent_store.h"

#include <optional>

#include <fmt/format.h>

#include "redundancy/checksum.h"
#include "util/coding.h"
#include "util/log.h"

namespace cairn {

ExtentStore::ExtentStore(const ArchiveId& archive_id, std::vector<std::unique_ptr<BlockChunkStore>> stores,
                         std::vector<DiskGroup> groups, const DiskHealth& health, std::mutex& catalog_mutex,
                         Catalog& catalog, bool repair_on_read, std::function<Status(uint64_t)> record_id_ceiling)
    : archive_id_(archive_id),
      stores_(std::move(stores)),
      groups_(std::move(groups)),
      group_of_disk_(stores_.size(), 0),
      domain_of_disk_(stores_.size()),
      health_(health),
      catalog_mutex_(catalog_mutex),
      catalog_(catalog),
      repair_on_read_(repair_on_read),
      record_id_ceiling_(std::move(record_id_ceiling)) {
  for (size_t g = 0; g < groups_.size(); g++) {
    for (const DiskGroup::Member& member : groups_[g].members()) {
      group_of_disk_[member.disk] = g;
      domain_of_disk_[member.disk] = member.domain;
    }
    for (uint32_t disk : groups_[g].parity_disks()) group_of_disk_[disk] = g;
  }
}

Result<const DiskGroup*> ExtentStore::group_named(std::string_view name) const {
  if (name.empty()) return &groups_.front();
  for (const DiskGroup& group : groups_) {
    if (group.name() == name) return &group;
  }
  return Status::InvalidArgument(fmt::format("placement=group={}: this archive has no disk group {}", name, name));
}

uint64_t ExtentStore::free_bytes() const {
  uint64_t total = 0;
  for (const DiskGroup& group : groups_) total += group.free_bytes();
  return total;
}

uint64_t ExtentStore::capacity() const {
  uint64_t total = 0;
  for (const DiskGroup& group : groups_) total += group.capacity();
  return total;
}

Result<uint64_t> ExtentStore::NewExtentId() {
  uint64_t id = next_extent_id_.fetch_add(1);
  if (id <= id_ceiling_) return id;
  std::lock_guard lock(id_ceiling_mutex_);
  if (id <= id_ceiling_) return id;  // another thread raised it meanwhile
  uint64_t ceiling = id + kExtentIdBlock - 1;
  // On failure `id` is never handed out: skipping ids costs nothing.
  CAIRN_RETURN_IF_ERROR(record_id_ceiling_(ceiling));
  id_ceiling_ = ceiling;
  return id;
}

void ExtentStore::ReserveExtentIds(uint64_t max_id) {
  for (uint64_t next = next_extent_id_; next <= max_id && !next_extent_id_.compare_exchange_weak(next, max_id + 1);) {
  }
  // Nothing up to it is handed out any more: no need to record it again.
  for (uint64_t ceiling = id_ceiling_; ceiling < max_id && !id_ceiling_.compare_exchange_weak(ceiling, max_id);) {
  }
}

Result<Redundancy> RedundancyFor(Redundancy asked, const DiskGroup& group) {
  CAIRN_RETURN_IF_ERROR(CheckSchemeFitsGroup(asked, group.type(), group.name()));
  // A lonestar group protects whatever it holds.
  if (group.type() == GroupType::kLoneStar && asked.scheme == Redundancy::Scheme::kNone) {
    asked.scheme = Redundancy::Scheme::kTwoDimensional;
  }
  return asked;
}

Result<ExtentRecord> ExtentStore::WriteExtentToDisk(ExtentKind kind, uint64_t ino, uint64_t file_offset,
                                                    std::span<const uint8_t> payload, const ExtentEncoding& encoding) {
  auto group = group_named(encoding.group);
  if (!group.ok()) return group.status();
  auto fitted = RedundancyFor(encoding.redundancy, **group);
  if (!fitted.ok()) return fitted.status();
  const Redundancy& redundancy = *fitted;
  ExtentRecord record;
  if (encoding.extent_id) {
    record.id = encoding.extent_id;
  } else {
    auto id = NewExtentId();
    if (!id.ok()) return id.status();
    record.id = *id;
  }
  record.kind = static_cast<int>(kind);
  record.payload_length = payload.size();
  record.payload_crc = Crc32c(payload);
  record.redundancy = redundancy;
  record.logical_length = encoding.logical_length;
  record.chain_stamp = encoding.chain_stamp;
  // Reed-Solomon makes chunks of its own; every other scheme stores copies of the payload,
  // written from it as it is (no copy in memory, its CRC and digest computed once).
  std::vector<std::vector<uint8_t>> coded;
  std::vector<std::span<const uint8_t>> chunks;
  if (redundancy.scheme == Redundancy::Scheme::kReedSolomon) {
    coded = MakeChunks(payload, redundancy);
    chunks.assign(coded.begin(), coded.end());
  } else {
    chunks.assign(redundancy.chunk_count(), payload);
  }
  PlacementRequest request{chunks.size(), {}, encoding.placement, encoding.affinity};
  auto reserved = (*group)->Reserve(request, chunks[0].size(), redundancy.idr_scramble,
                                    [this](uint32_t disk) { return InService(disk); });
  if (!reserved.ok()) return reserved.status();
  const Digest payload_digest = coded.empty() ? ComputeDigest(redundancy.checksum, payload) : Digest{};
  for (size_t i = 0; i < chunks.size(); i++) {
    const ReservedChunk& at = (*reserved)[i];
    record.chunks.push_back(coded.empty() ? ChunkPlacement::At(at.disk, at.locator, record.payload_crc, payload_digest)
                                          : ChunkPlacement::At(at.disk, at.locator, Crc32c(chunks[i]),
                                                               ComputeDigest(redundancy.checksum, chunks[i])));
  }
  for (size_t i = 0; i < chunks.size(); i++) {
    ExtentHeader header;
    header.version = encoding.format_version;
    header.kind = kind;
    header.archive_id = archive_id_;
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

void ExtentStore::ReleaseUncommitted(const ExtentRecord& extent) {
  for (const ChunkPlacement& chunk : extent.chunks) ReleaseUncommittedChunk(chunk);
}

void ExtentStore::ReleaseUncommittedChunk(const ChunkPlacement& chunk) {
  // Discarded too: what was written there must not be found by recover, where the newest
  // extent wins, as a version of its files (stale bytes, a deleted file's). A refusal
  // (double free) keeps the space out of use rather than risk handing it out twice; it is
  // free again after the next mount's rebuild.
  Status st = stores_[chunk.disk]->Free(chunk.locator());
  if (!st.ok()) LogError("{}: {}", stores_[chunk.disk]->name(), st.message());
}

Result<ChunkPlacement> ExtentStore::ReserveRelocation(const ExtentRecord& extent, size_t index) {
  const ChunkPlacement& from = extent.chunks[index];
  PlacementRequest request{1};  // away from the other chunks
  for (size_t i = 0; i < extent.chunks.size(); i++) {
    if (i == index) continue;
    request.avoid_domains.insert(domain_of_disk_[extent.chunks[i].disk]);
    request.beside_disks.insert(extent.chunks[i].disk);
  }
  auto reserved = group_of(from.disk).Reserve(request, extent.redundancy.ChunkLength(extent.payload_length),
                                              extent.redundancy.idr_scramble,
                                              [this](uint32_t disk) { return InService(disk); });
  if (!reserved.ok()) {
    return Status::NoSpace(fmt::format(
        "no disk in a failure domain without a chunk of extent {} is in service with room for chunk {}", extent.id,
        index));
  }
  // Same bytes, same CRC and digest: only the place changes.
  return ChunkPlacement::At(reserved->front().disk, reserved->front().locator, from.crc, from.digest);
}

Status ExtentStore::WriteChunkAt(const ChunkPlacement& chunk, const ExtentHeader& header,
                                 std::span<const uint8_t> bytes) {
  return stores_[chunk.disk]->Write(chunk.locator(), header, bytes);
}

void ExtentStore::FreeCommitted(const std::vector<ExtentRecord>& extents) {
  std::unique_lock space(space_mutex_);  // no rewrite of a chunk in this space is under way
  for (const ExtentRecord& extent : extents) {
    for (const ChunkPlacement& chunk : extent.chunks) {
      // A disk missing at open has no space map (Archive::RebuildSpaceMaps), and one failed
      // since takes nothing new: there is nothing to free there, and the next open that finds
      // it in service builds its map from the catalog.
      if (chunk.disk == kNoDisk || health_.IsOut(chunk.disk)) continue;
      Status st = stores_[chunk.disk]->Free(chunk.locator());
      // A refusal (double free) keeps the space out of use; it is free again after the next
      // mount's rebuild. A failed discard leaves it free.
      if (!st.ok()) LogWarning("{}: {}", stores_[chunk.disk]->name(), st.message());
    }
  }
}

Result<std::vector<uint8_t>> ExtentStore::ReadChunk(const ExtentRecord& extent, size_t index, bool* idr_repaired,
                                                    ExtentHeader* header) {
  const ChunkPlacement& chunk = extent.chunks[index];
  if (chunk.disk == kNoDisk) {  // cairn recover's scan did not find it
    return Status::NotFound(fmt::format("extent {} chunk {} was not found on any disk", extent.id, index));
  }
  if (chunk.disk >= stores_.size()) {
    return Status::Corruption(fmt::format("extent {} is on disk {}, which does not exist", extent.id, chunk.disk));
  }
  if (!health_.ServesReads(chunk.disk)) {
    if (health_.IsOut(chunk.disk)) {
      return Status::IOError(fmt::format("disk {} is out of service: {}", chunk.disk, health_.missing()[chunk.disk]));
    }
    return Status::IOError(fmt::format("disk {} was replaced and waits for cairn rebuild", chunk.disk));
  }
  const Redundancy& r = extent.redundancy;
  std::vector<uint64_t> repaired;
  auto bytes = stores_[chunk.disk]->Read(
      chunk.locator(),
      ExtentExpectation{archive_id_, extent.id, r.ChunkLength(extent.payload_length), chunk.crc,
                        static_cast<uint8_t>(index), r.idr_scramble, r.checksum, chunk.digest},
      &repaired, header);
  if (idr_repaired) *idr_repaired = bytes.ok() && !repaired.empty();
  return bytes;
}

void ExtentStore::DropCachedChunk(const ExtentRecord& extent, size_t index) {
  const ChunkPlacement& chunk = extent.chunks[index];
  if (chunk.disk < stores_.size()) stores_[chunk.disk]->DropCached(chunk.locator());
}

Result<ExtentHeader> ExtentStore::ReadChunkHeader(const ExtentRecord& extent, size_t index) {
  const ChunkPlacement& chunk = extent.chunks[index];
  auto header = stores_[chunk.disk]->ReadHeader(chunk.locator());
  if (header.ok() && (header->extent_id != extent.id || header->chunk_index != index)) {
    return Status::Corruption(fmt::format("extent {} chunk {}: the header belongs to extent {} chunk {}", extent.id,
                                          index, header->extent_id, header->chunk_index));
  }
  return header;
}

Result<bool> ExtentStore::RewriteChunk(const ExtentRecord& extent, size_t index, ExtentHeader header,
                                       std::span<const uint8_t> bytes) {
  const ChunkPlacement& chunk = extent.chunks[index];
  if (health_.IsOut(chunk.disk)) return false;  // cairn rebuild moves it
  // While shared, no space is freed: a chunk the catalog still has there stays its own
  // until the write is done, and metadata operations go on meanwhile.
  std::shared_lock space(space_mutex_);
  {
    std::lock_guard lock(catalog_mutex_);
    auto current = catalog_.GetExtent(extent.id);
    if (!current.ok() && !current.status().IsNotFound()) return current.status();
    if (!current.ok() || index >= current->chunks.size() || !(current->chunks[index] == chunk)) return false;
  }
  CAIRN_RETURN_IF_ERROR(
      stores_[chunk.disk]->Rewrite(chunk.locator(), HeaderForChunk(header, index, chunk, bytes.size()), bytes));
  return true;
}

ExtentHeader HeaderForChunk(ExtentHeader header, size_t index, const ChunkPlacement& chunk, uint64_t length) {
  header.chunk_index = static_cast<uint8_t>(index);
  header.payload_crc = chunk.crc;
  header.digest = chunk.digest;
  header.payload_length = length;
  return header;
}

std::vector<Status> ExtentStore::CheckChunks(const ExtentRecord& extent, ChunkSet* chunks, ExtentHeader* header) {
  std::vector<Status> out;
  chunks->assign(extent.chunks.size(), std::nullopt);
  bool have_header = false;
  for (size_t i = 0; i < extent.chunks.size(); i++) {
    bool idr_repaired = false;
    ExtentHeader chunk_header;
    auto bytes = ReadChunk(extent, i, &idr_repaired, &chunk_header);
    if (bytes.ok() && header && !have_header) {
      *header = std::move(chunk_header);
      have_header = true;
    }
    DropCachedChunk(extent, i);  // fsck streams through every disk
    Status st = bytes.status();
    if (bytes.ok()) (*chunks)[i] = std::move(*bytes);  // good bytes, even if IDR had to mend them
    if (idr_repaired) {
      st = Status::Corruption(fmt::format("{} (cairn scrub rewrites it)", kRebuiltBelow));
    }
    out.push_back(st);
  }
  return out;
}

void ExtentStore::RepairOnRead(const ExtentRecord& extent, const std::vector<size_t>& failed,
                               const std::set<size_t>& rebuilt_below, const ExtentHeader& verified,
                               std::span<const uint8_t> payload) {
  std::vector<std::vector<uint8_t>> chunks;
  for (size_t i : failed) {
    uint32_t disk = extent.chunks[i].disk;
    if (!InService(disk)) continue;  // cairn rebuild moves or fills those
    if (chunks.empty()) chunks = MakeChunks(payload, extent.redundancy);
    auto written = RewriteChunk(extent, i, verified, chunks[i]);
    Status st = written.ok() && *written ? SyncDisk(disk) : written.status();
    if (st.ok() && *written) {
      LogInfo("repaired extent {} chunk {} on disk {} {}", extent.id, i, disk,
              rebuilt_below.contains(i) ? "with the bytes its redundancy below rebuilt" : "from the other chunks");
    } else if (!st.ok()) {
      LogError("cannot repair extent {} chunk {} on disk {}: {}", extent.id, i, disk, st.message());
    }
  }
}

Result<std::vector<uint8_t>> ExtentStore::ReadExtentPayload(const ExtentRecord& extent, ExtentHeader* header) {
  const Redundancy& r = extent.redundancy;
  ChunkSet chunks(extent.chunks.size());
  size_t have = 0;
  std::string failures;
  std::vector<size_t> failed;
  std::set<size_t> rebuilt_below;
  std::optional<ExtentHeader> verified;  // the first chunk's that read well
  // Data chunks first (a healthy read touches only them), then parity as needed.
  for (size_t i = 0; i < extent.chunks.size() && have < ChunksNeeded(r); i++) {
    const ChunkPlacement& chunk = extent.chunks[i];
    bool idr_repaired = false;
    ExtentHeader chunk_header;
    auto bytes = ReadChunk(extent, i, &idr_repaired, &chunk_header);
    if (bytes.ok()) {
      if (have == 0) verified = std::move(chunk_header);
      chunks[i] = std::move(*bytes);
      have++;
      if (idr_repaired) {  // good bytes from a bad spot: rewrite it
        LogError("disk {}: extent {} chunk {} at offset {}: {}", chunk.disk, extent.id, i, chunk.locator().address,
                 kRebuiltBelow);
        failed.push_back(i);
        rebuilt_below.insert(i);
      }
      continue;
    }
    failures += fmt::format("{}{}", failures.empty() ? "" : "; ", bytes.status().message());
    failed.push_back(i);
    bool expected = chunk.disk == kNoDisk || !InService(chunk.disk);
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
  if (!payload.ok()) return payload;
  // A payload read well has a chunk that read well: `verified` is set.
  if (repair_on_read_ && !failed.empty()) RepairOnRead(extent, failed, rebuilt_below, *verified, *payload);
  if (header) *header = std::move(*verified);
  return payload;
}

Result<std::vector<uint8_t>> ExtentStore::JoinVerified(const ExtentRecord& extent, ChunkSet& chunks) {
  const Redundancy& r = extent.redundancy;
  std::vector<bool> read_ok(chunks.size());
  for (size_t i = 0; i < chunks.size(); i++) read_ok[i] = chunks[i].has_value();
  const bool striped = r.scheme == Redundancy::Scheme::kReedSolomon;
  auto payload = JoinChunks(chunks, r, extent.payload_length);  // a copy's bytes move into it
  if (!payload.ok()) return payload.status();
  for (size_t i = 0; i < r.data_chunks && r.checksum != ChecksumType::kCrc32c; i++) {
    // A rebuilt data chunk must match its own digest too, where it is known: `cairn recover`
    // learns no digest for a chunk it did not find (the payload's CRC below still holds).
    if (read_ok[i] || extent.chunks[i].disk == kNoDisk) continue;
    std::span<const uint8_t> rebuilt = striped ? std::span<const uint8_t>(*chunks[i]) : *payload;
    if (ComputeDigest(r.checksum, rebuilt) != extent.chunks[i].digest) {
      return Status::Corruption(fmt::format("extent {}: rebuilt chunk {} does not match its {}", extent.id, i,
                                            ChecksumName(r.checksum)));
    }
  }
  // A reconstruction is only as good as its check: never hand out unverified bytes. A copy
  // read from its disk was checked against its CRC there; when that is the payload's, once is enough.
  bool checked = !striped && read_ok[0] && extent.chunks[0].crc == extent.payload_crc;
  if (!checked && Crc32c(*payload) != extent.payload_crc) {
    return Status::Corruption(fmt::format("extent {}: the rebuilt payload does not match its checksum", extent.id));
  }
  return payload;
}

}  // namespace cairn
