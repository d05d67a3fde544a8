#include "pipeline/segment_writer.h"

#include <map>
#include <set>

#include "pipeline/member_metadata.h"
#include "util/coding.h"

namespace cairn {

Result<WrittenSegments> WriteSegments(Archive& archive, const std::vector<SegmentPiece>& pieces,
                                      const std::function<bool(const SegmentPiece&)>& skip) {
  const ArchiveOptions& options = archive.options();
  WrittenSegments out;
  std::set<uint32_t> disks_written;
  Status failure;

  // Every extent ends with the member table of the files it holds (a catalog can be rebuilt
  // from the disks): their metadata as the catalog has it now.
  DescribedInodes described;
  {
    std::set<uint64_t> inos;
    for (const SegmentPiece& piece : pieces) {
      if (!(skip && skip(piece))) inos.insert(piece.ino);
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
  auto write_extent = [&](ExtentKind kind, uint64_t ino, uint64_t file_offset, std::span<const uint8_t> data,
                          const std::vector<std::pair<uint64_t, MemberSegment>>& members,
                          const std::vector<std::pair<uint64_t, uint64_t>>& holes, const WritePlan& plan) {
    std::vector<uint8_t> table = EncodeMemberTable(MemberTableOf(described, members, holes, listed));
    std::vector<uint8_t> payload;
    payload.reserve(data.size() + table.size());
    payload.insert(payload.end(), data.begin(), data.end());
    payload.insert(payload.end(), table.begin(), table.end());
    // A pack goes with its first member's file: the tail of a file lands where the file is.
    uint64_t affinity = !members.empty() ? members.front().first : !holes.empty() ? holes.front().first : 0;
    ExtentEncoding encoding{plan.policy_stamp, plan.redundancy, plan.chain.Stamp(), payload.size(),
                            static_cast<uint32_t>(table.size()), plan.group, plan.placement, affinity};
    auto stored = plan.chain.Encode(std::move(payload));
    auto record = stored.ok() ? archive.extents().WriteExtentToDisk(kind, ino, file_offset, *stored, encoding)
                              : Result<ExtentRecord>(stored.status());
    if (!record.ok()) {
      if (failure.ok()) failure = record.status();
      return false;
    }
    for (const ChunkPlacement& chunk : record->chunks) disks_written.insert(chunk.disk);
    out.extents.push_back(*record);
    return true;
  };

  struct Pack {
    const WritePlan* plan = nullptr;
    std::vector<uint8_t> bytes;
    std::vector<size_t> members;  // pieces with data, in `bytes` in this order
    std::vector<size_t> holes;    // all-zero pieces: recorded, no bytes
  };
  std::map<std::string, Pack> packs;  // by plan (its stamp)
  auto flush_pack = [&](Pack& pack) {
    if (pack.members.empty() && pack.holes.empty()) return;
    std::vector<std::pair<uint64_t, MemberSegment>> members;
    uint64_t at = 0;
    for (size_t member : pack.members) {
      const SegmentPiece& piece = pieces[member];
      members.push_back({piece.ino, {piece.index, at, piece.data.size()}});
      at += piece.data.size();
    }
    std::vector<std::pair<uint64_t, uint64_t>> holes;
    for (size_t hole : pack.holes) holes.emplace_back(pieces[hole].ino, pieces[hole].index);
    if (write_extent(ExtentKind::kPack, 0, 0, pack.bytes, members, holes, *pack.plan)) {
      size_t extent = out.extents.size() - 1;
      uint64_t offset = 0;
      for (size_t member : pack.members) {
        out.placements.push_back({member, extent, offset, false});
        offset += pieces[member].data.size();
      }
      for (size_t hole : pack.holes) out.placements.push_back({hole, extent, 0, true});
    }
    pack.bytes.clear();
    pack.members.clear();
    pack.holes.clear();
  };

  for (size_t i = 0; i < pieces.size() && failure.ok(); i++) {
    const SegmentPiece& piece = pieces[i];
    if (skip && skip(piece)) continue;
    Pack& pack = packs[piece.plan->policy_stamp];
    pack.plan = piece.plan.get();
    if (IsAllZero(piece.data)) {
      pack.holes.push_back(i);
      continue;
    }
    if (piece.data.size() > options.pack_threshold) {
      if (write_extent(ExtentKind::kFileSegment, piece.ino, piece.index * piece.segment_size, piece.data,
                       {{piece.ino, {piece.index, 0, piece.data.size()}}}, {}, *piece.plan)) {
        out.placements.push_back({i, out.extents.size() - 1, 0, false});
      }
      continue;
    }
    if (!pack.bytes.empty() && pack.bytes.size() + piece.data.size() > options.segment_size) flush_pack(pack);
    pack.bytes.insert(pack.bytes.end(), piece.data.begin(), piece.data.end());
    pack.members.push_back(i);
  }
  for (auto& [stamp, pack] : packs) {
    if (failure.ok()) flush_pack(pack);
  }
  for (uint32_t disk : disks_written) {
    if (!failure.ok()) break;
    failure = archive.extents().SyncDisk(disk);
  }
  if (!failure.ok()) {
    std::lock_guard lock(archive.catalog_mutex());
    for (const auto& extent : out.extents) archive.extents().ReleaseUncommitted(extent);
    return failure;
  }
  return out;
}

}  // namespace cairn
