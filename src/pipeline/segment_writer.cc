#include "pipeline/segment_writer.h"

#include <deque>
#include <future>
#include <map>
#include <set>

#include <fmt/format.h>

#include "codec/incompressible.h"
#include "extent/extent_store.h"
#include "pipeline/member_metadata.h"
#include "policy/resolver.h"
#include "util/coding.h"
#include "util/wait_for_all.h"

namespace cairn {

Status CheckPlanFits(const Archive& archive, const WritePlan& plan) {
  auto group = archive.group_named(plan.group);
  if (!group.ok()) return group.status();
  return RedundancyFor(plan.redundancy, **group).status();
}

Result<std::shared_ptr<const WritePlan>> PlanOfInode(Archive& archive, const InodeRecord& inode) {
  auto plan = [&]() -> Result<std::shared_ptr<const WritePlan>> {
    if (inode.layout_id != 0) {
      auto stamp = archive.catalog().LayoutStamp(inode.layout_id);
      if (!stamp.ok()) return stamp.status();
      return PlanOfLayout(*stamp, inode.segment_size);
    }
    auto policy = ResolvePolicy(archive.catalog(), inode.ino, archive.policy_context());
    if (!policy.ok()) return policy.status();
    return PlanWrite(*policy);
  }();
  if (!plan.ok()) return plan;
  CAIRN_RETURN_IF_ERROR(CheckPlanFits(archive, **plan));
  return plan;
}

namespace {

// What `bytes` of file data take of a group's free space with `redundancy`: each copy or
// parity chunk.
uint64_t StoredBytes(const Redundancy& redundancy, uint64_t bytes) {
  uint64_t data = redundancy.scheme == Redundancy::Scheme::kMirror ? 1 : redundancy.data_chunks;
  return bytes / data * redundancy.chunk_count() + (bytes % data != 0 ? redundancy.chunk_count() : 0);
}

}  // namespace

bool GroupHasRoomFor(const Archive& archive, const WritePlan* plan, uint64_t bytes, uint64_t segment_size) {
  auto group = plan ? archive.group_named(plan->group) : Status::NotFound("no plan");
  const DiskGroup& target = group.ok() ? **group : archive.groups().front();
  auto redundancy = plan ? RedundancyFor(plan->redundancy, target) : Result<Redundancy>(Redundancy{});
  if (!redundancy.ok()) return target.HasRoomFor(bytes, 0);  // an unreadable plan: the bytes alone
  // A full segment's chunk: its payload (with the member table's block) and header.
  uint64_t allocation = ExtentAllocation(redundancy->ChunkLength(segment_size + kBlockSize), redundancy->idr_scramble);
  return target.HasRoomFor(StoredBytes(*redundancy, bytes), allocation);
}

Result<WrittenSegments> WriteSegments(Archive& archive, const std::vector<SegmentPiece>& pieces,
                                      const std::function<bool(const SegmentPiece&)>& skip) {
  const ArchiveOptions& options = archive.options();
  WrittenSegments out;
  std::set<uint32_t> disks_written;
  Status failure;

  // Each file's data key, looked up once for the whole batch. A file whose data key cannot
  // be had is left out, so that it does not hold back the other files of the batch (their
  // owners', their packs').
  std::map<uint64_t, FileKeys::DataKey> keys;
  for (const SegmentPiece& piece : pieces) {
    if ((skip && skip(piece)) || !piece.plan->chain.needs_key() || keys.contains(piece.ino) ||
        out.left_out.contains(piece.ino)) {
      continue;
    }
    auto key = piece.had_data_key ? archive.file_keys().ForReading(piece.ino)
                                  : archive.file_keys().ForWriting(piece.ino, piece.plan->key_name);
    if (key.ok()) {
      keys.emplace(piece.ino, *key);
    } else {
      out.left_out.emplace(piece.ino, Status::IOError(fmt::format("no data key: {}", key.status().message())));
    }
  }
  auto leave_out = [&](const SegmentPiece& piece) { return (skip && skip(piece)) || out.left_out.contains(piece.ino); };

  // Every extent ends with the member table of the files it holds (a catalog can be rebuilt
  // from the disks): their metadata as the catalog has it now.
  DescribedInodes described;
  {
    std::set<uint64_t> inos;
    for (const SegmentPiece& piece : pieces) {
      if (!leave_out(piece)) inos.insert(piece.ino);
    }
    std::lock_guard lock(archive.catalog_mutex());
    auto result = DescribeInodes(archive.catalog(), inos);
    if (!result.ok()) return result.status();
    described = std::move(*result);
  }
  for (const SegmentPiece& piece : pieces) {  // fixed by this batch's commit at first persist
    auto node = described.nodes.find(piece.ino);
    if (node != described.nodes.end()) node->second.segment_size = piece.segment_size;
  }

  std::set<uint64_t> listed;  // directories whose entries without data a table of this batch holds
  // Extents are made in order and transformed by `workers` threads, with one more queued so no
  // worker waits while the oldest is written; they are written one at a time and in order
  // (memory bounded by the window of `workers` + 1 extents).
  struct Job {
    ExtentKind kind;
    uint64_t ino;
    uint64_t file_offset;
    ExtentEncoding encoding;
    std::vector<WrittenSegments::Placement> placements;  // `extent` filled in once written
    std::future<Result<std::vector<uint8_t>>> stored;
  };
  TransformPool& pool = archive.transform_pool();
  const size_t workers = pool.threads();
  std::deque<Job> ahead;
  // The pool's tasks read `pieces` and the plans: none may outlive this call, even when it
  // throws.
  WaitForAll wait_for_all{ahead, &Job::stored};
  auto write_oldest = [&] {
    Job job = std::move(ahead.front());
    ahead.pop_front();
    auto stored = job.stored.get();
    if (!failure.ok()) return;
    auto record = stored.ok() ? archive.extents().WriteExtentToDisk(job.kind, job.ino, job.file_offset, *stored,
                                                                    job.encoding)
                              : Result<ExtentRecord>(stored.status());
    if (record.status().IsNoSpace()) {
      // Its group has no room for it as its plan asks (a raid set after the data was
      // written, a degraded group): its files are left out, the others of the batch go on.
      for (const WrittenSegments::Placement& placement : job.placements) {
        out.left_out.emplace(pieces[placement.piece].ino, record.status());
      }
      return;
    }
    if (!record.ok()) {
      failure = record.status();
      return;
    }
    for (const ChunkPlacement& chunk : record->chunks) disks_written.insert(chunk.disk);
    for (WrittenSegments::Placement& placement : job.placements) {
      placement.extent = out.extents.size();
      out.placements.push_back(placement);
    }
    out.extents.push_back(std::move(*record));
  };
  // `data` is the piece's, or (a pack) `owned`'s: the extent's bytes before its member table.
  auto write_extent = [&](ExtentKind kind, uint64_t ino, uint64_t file_offset, std::span<const uint8_t> data,
                          std::vector<uint8_t> owned, const std::vector<std::pair<uint64_t, MemberSegment>>& members,
                          const std::vector<std::pair<uint64_t, uint64_t>>& holes, const WritePlan& plan,
                          std::vector<WrittenSegments::Placement> placements) {
    // compress=auto: a payload that looks incompressible skips the compressor altogether.
    const TransformChain& chain =
        plan.chain_if_incompressible && LooksIncompressible(data) ? *plan.chain_if_incompressible : plan.chain;
    std::vector<uint8_t> table = EncodeMemberTable(MemberTableOf(described, members, holes, listed));
    // A pack goes with its first member's file: the tail of a file lands where the file is.
    uint64_t affinity = !members.empty() ? members.front().first : !holes.empty() ? holes.front().first : 0;
    ExtentEncoding encoding{plan.policy_stamp, plan.redundancy, chain.Stamp(), data.size() + table.size(),
                            static_cast<uint32_t>(table.size()), plan.group, plan.placement, affinity};
    // An encrypting chain seals the payload with the file's data key, bound to the extent's id.
    SealContext seal;
    FileKeys::DataKey key;
    if (chain.needs_key()) {
      seal.archive_id = archive.id();
      seal.file_id = affinity;
      auto data_key = keys.find(affinity);  // an encrypted pack holds one file's pieces
      if (data_key == keys.end()) {
        failure = Status::IOError(fmt::format("inode {}: no data key was looked up for it", affinity));
        return;
      }
      key = data_key->second;
      seal.key = key->bytes();
      auto id = archive.extents().NewExtentId();
      if (!id.ok()) {
        failure = id.status();
        return;
      }
      seal.version = encoding.extent_id = *id;
      ino = affinity;  // its header names the file (a pack too): recover looks up that key
    }
    Job job{kind, ino, file_offset, std::move(encoding), std::move(placements), {}};
    while (ahead.size() > workers) write_oldest();
    // The logical payload: the bytes, then the member table (built by the transform's thread).
    auto payload = [data, owned = std::move(owned), table = std::move(table)]() mutable {
      if (owned.size() == data.size() && owned.data() == data.data()) {
        owned.insert(owned.end(), table.begin(), table.end());
        return std::move(owned);
      }
      std::vector<uint8_t> bytes;
      bytes.reserve(data.size() + table.size());
      bytes.insert(bytes.end(), data.begin(), data.end());
      bytes.insert(bytes.end(), table.begin(), table.end());
      return bytes;
    };
    if (chain.empty()) {  // nothing to transform: written now, as it comes, on this thread
      std::promise<Result<std::vector<uint8_t>>> done;
      done.set_value(payload());
      job.stored = done.get_future();
      ahead.push_back(std::move(job));
      while (!ahead.empty()) write_oldest();
      return;
    }
    job.stored = pool.Submit([&chain, payload = std::move(payload), seal, key]() mutable -> Result<std::vector<uint8_t>> {
      try {
        return chain.Encode(payload(), seal);
      } catch (const std::bad_alloc&) {
        return Status::IOError(fmt::format("out of memory transforming an extent with '{}'", chain.Stamp()));
      }
    });
    ahead.push_back(std::move(job));
  };

  struct Pack {
    const WritePlan* plan = nullptr;
    std::vector<uint8_t> bytes;
    std::vector<size_t> members;  // pieces with data, in `bytes` in this order
    std::vector<size_t> holes;    // all-zero pieces: recorded, no bytes
  };
  std::map<std::string, Pack> packs;  // by plan (its stamp), and by file when encrypted
  auto flush_pack = [&](Pack& pack) {
    if (pack.members.empty() && pack.holes.empty()) return;
    std::vector<std::pair<uint64_t, MemberSegment>> members;
    std::vector<WrittenSegments::Placement> placements;
    uint64_t at = 0;
    for (size_t member : pack.members) {
      const SegmentPiece& piece = pieces[member];
      members.push_back({piece.ino, {piece.index, at, piece.data.size()}});
      placements.push_back({member, 0, at, false});
      at += piece.data.size();
    }
    std::vector<std::pair<uint64_t, uint64_t>> holes;
    for (size_t hole : pack.holes) {
      holes.emplace_back(pieces[hole].ino, pieces[hole].index);
      placements.push_back({hole, 0, 0, true});
    }
    std::span<const uint8_t> bytes = pack.bytes;  // still where they are once moved
    write_extent(ExtentKind::kPack, 0, 0, bytes, std::move(pack.bytes), members, holes, *pack.plan,
                 std::move(placements));
    pack.bytes.clear();
    pack.members.clear();
    pack.holes.clear();
  };

  for (size_t i = 0; i < pieces.size() && failure.ok(); i++) {
    const SegmentPiece& piece = pieces[i];
    if (leave_out(piece)) continue;
    // Encrypted files are sealed with their own keys: each packs alone.
    Pack& pack = packs[piece.plan->chain.needs_key() ? fmt::format("{}\n{}", piece.plan->policy_stamp, piece.ino)
                                                      : piece.plan->policy_stamp];
    pack.plan = piece.plan.get();
    if (IsAllZero(piece.data)) {
      pack.holes.push_back(i);
      continue;
    }
    if (piece.data.size() > options.pack_threshold) {
      write_extent(ExtentKind::kFileSegment, piece.ino, piece.index * piece.segment_size, piece.data, {},
                   {{piece.ino, {piece.index, 0, piece.data.size()}}}, {}, *piece.plan, {{i, 0, 0, false}});
      continue;
    }
    if (!pack.bytes.empty() && pack.bytes.size() + piece.data.size() > options.segment_size) flush_pack(pack);
    pack.bytes.insert(pack.bytes.end(), piece.data.begin(), piece.data.end());
    pack.members.push_back(i);
  }
  for (auto& [stamp, pack] : packs) {
    if (failure.ok()) flush_pack(pack);
  }
  while (!ahead.empty()) write_oldest();  // also after a failure: every encode is waited for
  for (uint32_t disk : disks_written) {
    if (!failure.ok()) break;
    failure = archive.extents().SyncDisk(disk);
  }
  if (!failure.ok()) {
    for (const auto& extent : out.extents) archive.extents().ReleaseUncommitted(extent);
    return failure;
  }
  return out;
}

}  // namespace cairn
