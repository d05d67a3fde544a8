#include "pipeline/logical_payload.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "backend/member_table.h"
#include "codec/transform_chain.h"
#include "util/log.h"

namespace cairn {

Result<std::vector<uint8_t>> LogicalPayload(Archive& archive, const ExtentRecord& extent, uint64_t ino,
                                            std::vector<uint8_t> stored) {
  if (extent.chain_stamp.empty()) return stored;  // the stored bytes are the logical ones
  auto chain = TransformChain::FromStamp(extent.chain_stamp);
  if (!chain.ok()) {
    return Status::NotSupported(fmt::format("extent {}: {}", extent.id, chain.status().message()));
  }
  SealContext seal;
  FileKeys::DataKey key;  // held until decoded
  if (chain->needs_key()) {
    if (ino == 0) return Status::NotFound(fmt::format("extent {} is encrypted, and whose it is is not known", extent.id));
    auto data_key = archive.file_keys().ForReading(ino);
    if (!data_key.ok()) {
      auto message = fmt::format("extent {} is encrypted, and the data key of inode {} is not available: {}",
                                 extent.id, ino, data_key.status().message());
      switch (data_key.status().code()) {
        case Status::Code::kNotFound: return Status::NotFound(message);      // no key: erased, or lost
        case Status::Code::kCorruption: return Status::Corruption(message);  // a damaged wrapped key
        default: return Status::NotSupported(message);                       // the master key is not at hand
      }
    }
    key = *data_key;
    seal = SealContext{archive.id(), ino, extent.id, key->bytes()};
  }
  auto logical = chain->Decode(std::move(stored), extent.logical_length, seal);
  if (!logical.ok()) return Status::Corruption(fmt::format("extent {}: {}", extent.id, logical.status().message()));
  return logical;
}

Result<RecordedSegments> RecordedSegments::Of(const ExtentHeader& header, std::span<const uint8_t> logical) {
  RecordedSegments out;
  out.extent_id_ = header.extent_id;
  if (header.members_length == 0) return out;
  if (header.members_length > logical.size()) {
    return Status::Corruption(fmt::format("extent {}: its member table ({} bytes) is longer than its payload ({})",
                                          header.extent_id, header.members_length, logical.size()));
  }
  auto table = DecodeMemberTable(logical.last(header.members_length), header.version,
                                 fmt::format("extent {}", header.extent_id));
  if (!table.ok()) {
    // The payload's CRC covers the table: it is as it was written. Tables of some cairns
    // before 2026-11-27 (names of 64 KiB or more) do not decode: their rows go unchecked.
    LogWarning("{}; the segments pointing into it are not checked against it", table.status().message());
    return out;
  }
  out.has_table_ = true;
  for (const MemberNode& node : table->nodes) {
    for (const MemberSegment& s : node.segments) out.segments_.push_back({node.ino, s.index, s.offset, s.length});
  }
  std::ranges::sort(out.segments_, {}, [](const Segment& s) { return std::tie(s.ino, s.index); });
  return out;
}

Status RecordedSegments::Check(const SegmentRecord& row) const {
  if (!has_table_ || row.extent_id == kHoleExtent) return Status::OK();
  auto it = std::ranges::lower_bound(segments_, std::tie(row.ino, row.index), {},
                                     [](const Segment& s) { return std::tie(s.ino, s.index); });
  if (it != segments_.end() && it->ino == row.ino && it->index == row.index && it->offset == row.extent_offset &&
      it->length >= row.length) {
    return Status::OK();
  }
  bool file_there = std::ranges::any_of(segments_, [&](const Segment& s) { return s.ino == row.ino; });
  return Status::Corruption(fmt::format("catalog: segment {} of inode {} points to bytes {}+{} of extent {}, whose "
                                        "member table does not record them as that segment's ({})",
                                        row.index, row.ino, row.extent_offset, row.length, extent_id_,
                                        file_there ? "another segment's data" : "another file's data"));
}

}  // namespace cairn
