// ExtentStore keeps an archive's extents on its disks: it owns the chunk stores of the disks
// and the disk groups they form, and writes, reads, verifies, rebuilds (degraded read,
// repair on read) and relocates the chunks of extents. Thread-safe.
//
// It never commits to the catalog. The room of a written extent is its writer's until the
// writer commits the record or hands it back (ReleaseUncommitted); the room of extents the
// catalog deleted comes back through FreeCommitted once that deletion is durable (the
// bookkeeping of which deletions those are is Archive's, which owns the catalog: see
// Archive::FreeAfterDurableCommit and Archive::MakeDurable).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/extent_format.h"
#include "catalog/catalog.h"
#include "group/disk_group.h"
#include "group/disk_health.h"
#include "redundancy/striping.h"
#include "store/block_chunk_store.h"

namespace cairn {

// How an extent's stored payload was made, recorded in the header of each of its chunks.
struct ExtentEncoding {
  std::string policy_stamp;  // the resolved policy (WritePlan::policy_stamp)
  Redundancy redundancy;
  std::string chain_stamp;      // the transform chain (TransformChain::Stamp()), "" for none
  uint64_t logical_length = 0;  // of the payload the chain was given
  uint32_t members_length = 0;  // the member table ending the logical payload (backend/member_table.h)
  std::string group;            // the disk group its chunks go to (WritePlan::group), "" for the first
  PlacementHints placement;     // WritePlan::placement, for the group's placer
  uint64_t affinity = 0;        // the file it belongs with (a pack: its first member's), for the placer
  // The id NewExtentId() gave it beforehand (an encrypting chain binds the payload to it);
  // 0: a new one.
  uint64_t extent_id = 0;
  // The layout of its headers: an older extent written again whole (cairn recover) keeps its
  // own, which its member table is in.
  uint16_t format_version = kFormatVersion;
};

// The redundancy an extent asking for `asked` gets in `group`: on a lonestar group raid=none
// is raid=2d (the grid protects what it holds) and rs-K-M is refused; on a pool, 2d is
// refused. InvalidArgument says why.
Result<Redundancy> RedundancyFor(Redundancy asked, const DiskGroup& group);

class ExtentStore {
 public:
  // The stores of an archive's disks (by index) and the groups over them, every disk in
  // exactly one group. `health` says which disks are in service; RewriteChunk checks the
  // catalog under `catalog_mutex`. `repair_on_read`: rewrite a damaged chunk when a read
  // rebuilt it. Everything referenced outlives the store.
  // `record_id_ceiling` makes every extent id up to the one it is given count as used in the
  // catalog, durably (Archive: raise the catalog's id floor, commit, sync); it takes the
  // catalog mutex itself.
  ExtentStore(const ArchiveId& archive_id, std::vector<std::unique_ptr<BlockChunkStore>> stores,
              std::vector<DiskGroup> groups, const DiskHealth& health, std::mutex& catalog_mutex, Catalog& catalog,
              bool repair_on_read, std::function<Status(uint64_t)> record_id_ceiling);

  size_t disk_count() const { return stores_.size(); }
  // Disk `index` itself, for the tools that scan it block by block (fsck, recover, status).
  Disk& disk(size_t index) { return stores_[index]->disk(); }
  // The chunk store of disk `index`.
  ChunkStore& store(size_t index) { return *stores_[index]; }
  // The disk groups, new data going to the first; and the group disk `disk` belongs to.
  const std::vector<DiskGroup>& groups() const { return groups_; }
  const DiskGroup& group_of(size_t disk) const { return groups_[group_of_disk_[disk]]; }
  // The group called `name`, the first for ""; InvalidArgument naming it when there is none.
  Result<const DiskGroup*> group_named(std::string_view name) const;
  // Room left for chunks and room in all, over every disk.
  uint64_t free_bytes() const;
  uint64_t capacity() const;

  // A fresh extent id, never handed out before in this archive, a crash included (an
  // encrypted extent is bound to its id, so an extent written but never committed before a
  // crash must not share one with a later extent): ids are handed out only up to a ceiling
  // the catalog holds durably, raised kExtentIdBlock at a time (one catalog sync each).
  // REQUIRES: catalog mutex NOT held.
  Result<uint64_t> NewExtentId();
  // The highest extent id handed out so far (or reserved).
  uint64_t MaxExtentIdUsed() const { return next_extent_id_ - 1; }
  // Makes NewExtentId() return more than `max_id` (at open: the catalog's, durable; cairn
  // recover: ids found on the disks).
  void ReserveExtentIds(uint64_t max_id);
  static constexpr uint64_t kExtentIdBlock = 4096;

  // Cuts the stored `payload` into the chunks `encoding.redundancy` asks for, has the placer
  // of disk group `encoding.group` (InvalidArgument naming it when there is none) reserve
  // room for each in its own failure domain (disks in service only) and writes them there,
  // their headers saying how the payload was made (`encoding`), without syncing. On success
  // the caller owns the reservation: commit the returned record to the catalog, or hand it
  // back with ReleaseUncommitted.
  Result<ExtentRecord> WriteExtentToDisk(ExtentKind kind, uint64_t ino, uint64_t file_offset,
                                         std::span<const uint8_t> payload, const ExtentEncoding& encoding);
  // Returns the space of an extent that was never committed, discarding what was written.
  // REQUIRES: catalog mutex NOT held (a discard may wait for a disk).
  void ReleaseUncommitted(const ExtentRecord& extent);
  // Reserves room for chunk `index` of `extent` on another disk of its group, in a failure
  // domain that holds no other chunk of it (rebuild of a chunk whose disk is out). The
  // caller writes it with WriteChunkAt, then records it or hands it back with
  // ReleaseUncommittedChunk.
  Result<ChunkPlacement> ReserveRelocation(const ExtentRecord& extent, size_t index);
  void ReleaseUncommittedChunk(const ChunkPlacement& chunk);  // REQUIRES: catalog mutex NOT held
  // Writes a chunk into room reserved for it, without syncing.
  Status WriteChunkAt(const ChunkPlacement& chunk, const ExtentHeader& header, std::span<const uint8_t> bytes);
  // Makes the writes to disk `index` so far durable.
  Status SyncDisk(size_t index) { return stores_[index]->Sync(); }
  // Marks the room of a committed chunk as used (at open, from the catalog; cairn recover,
  // for the chunks it finds, before it writes anything). Corruption when it overlaps another.
  Status MarkChunkUsed(const ChunkPlacement& chunk) { return stores_[chunk.disk]->MarkUsed(chunk.locator()); }
  // Returns the room of extents whose deletion from the catalog is durable, discarding it.
  // Waits for rewrites in place under way (RewriteChunk). REQUIRES: catalog mutex NOT held.
  void FreeCommitted(const std::vector<ExtentRecord>& extents);

  // Reads and verifies an extent's payload: the chunks it needs, more when some fail
  // (degraded read), the reconstruction checked against the payload CRC; chunks found bad
  // are rewritten from it when repair on read is on. Each disk's first failure is logged.
  // *header: that of a chunk that read (what the member table's length and format are).
  Result<std::vector<uint8_t>> ReadExtentPayload(const ExtentRecord& extent, ExtentHeader* header = nullptr);
  // Reads and verifies chunk `index` of `extent`; *idr_repaired says whether intra-disk
  // parity had to rebuild blocks of it (the bytes are good, the disk is not), *header its
  // header.
  Result<std::vector<uint8_t>> ReadChunk(const ExtentRecord& extent, size_t index, bool* idr_repaired = nullptr,
                                         ExtentHeader* header = nullptr);
  // A hint that chunk `index` of `extent` will not be read again soon (see ChunkStore).
  void DropCachedChunk(const ExtentRecord& extent, size_t index);
  // The header of chunk `index` (policy stamp, inode, ...), checked.
  Result<ExtentHeader> ReadChunkHeader(const ExtentRecord& extent, size_t index);
  // Rewrites chunk `index` of `extent` where it is, with its `bytes` and the header of a
  // good chunk, unless the catalog no longer has that chunk there (then false). The caller
  // syncs the disk. REQUIRES: catalog mutex NOT held (taken to check, let go to write).
  Result<bool> RewriteChunk(const ExtentRecord& extent, size_t index, ExtentHeader header,
                            std::span<const uint8_t> bytes);
  // Reads and checks every chunk of an extent (fsck): one status per chunk, and the chunks
  // that read well in *chunks, and the header of the first of them in *header.
  std::vector<Status> CheckChunks(const ExtentRecord& extent, ChunkSet* chunks, ExtentHeader* header = nullptr);
  // The payload joined from `chunks` (some may be missing), each rebuilt data chunk checked
  // against its digest and the payload against its CRC.
  Result<std::vector<uint8_t>> JoinVerified(const ExtentRecord& extent, ChunkSet& chunks);

 private:
  bool InService(size_t disk) const { return health_.InService(disk); }
  // Rewrites the chunks a read found bad (on disks that are there), from the payload; those
  // in `rebuilt_below` read well through the redundancy below them (the log says so).
  // `header` is the one the read verified (maybe that of a chunk rebuilt below, the only
  // one: its copy on the disk is what is damaged).
  void RepairOnRead(const ExtentRecord& extent, const std::vector<size_t>& failed,
                    const std::set<size_t>& rebuilt_below, const ExtentHeader& header,
                    std::span<const uint8_t> payload);

  const ArchiveId archive_id_;
  const std::vector<std::unique_ptr<BlockChunkStore>> stores_;  // by disk index
  const std::vector<DiskGroup> groups_;                          // over stores_
  std::vector<size_t> group_of_disk_;                            // index into groups_, by disk
  std::vector<std::string> domain_of_disk_;                      // failure domain, by disk
  const DiskHealth& health_;
  std::mutex& catalog_mutex_;
  Catalog& catalog_;  // guarded by catalog_mutex_
  const bool repair_on_read_;
  std::atomic<uint64_t> next_extent_id_{1};
  const std::function<Status(uint64_t)> record_id_ceiling_;
  std::mutex id_ceiling_mutex_;    // held while the ceiling is raised (a catalog sync), never with the catalog mutex
  std::atomic<uint64_t> id_ceiling_{0};  // every id up to it is durably used in the catalog
  std::mutex failures_mutex_;
  std::set<uint32_t> failed_disks_logged_;  // guarded by failures_mutex_
  // Shared while a chunk is rewritten in place after the catalog said it is still there;
  // exclusive while committed-free space is handed back. Never taken with the catalog
  // mutex held, so a rewrite waits on a disk without blocking metadata.
  std::shared_mutex space_mutex_;
};

// What a chunk that read well only through the redundancy below it is reported as.
inline constexpr std::string_view kRebuiltBelow =
    "damaged blocks, rebuilt by its intra-disk parity or its lonestar group's parity";

// The header of chunk `index` (`length` bytes, placed as `chunk` says), made from the header
// of any chunk of the same extent.
ExtentHeader HeaderForChunk(ExtentHeader header, size_t index, const ChunkPlacement& chunk, uint64_t length);

}  // namespace cairn
