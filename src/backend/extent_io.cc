#include "backend/extent_io.h"

#include <array>
#include <cstring>

#include <fmt/format.h>

#include "redundancy/intra_disk.h"
#include "util/buffer_pool.h"
#include "util/coding.h"

namespace cairn {
namespace {

// The payload of an extent with intra-disk parity: rebuilds what the disk could not read,
// then, if the CRC still disagrees, tries each block of each group whose parity is off.
Result<std::vector<uint8_t>> DecodeWithIdr(Disk& disk, uint64_t at, const ExtentExpectation& expect,
                                           const std::string& where, std::vector<uint64_t>* repaired) {
  IdrParams params{expect.idr_scramble};
  std::vector<uint8_t> image(IdrEncodedSize(expect.payload_length));
  std::vector<uint64_t> unreadable;
  if (!disk.ReadAt(at, image).ok()) {  // find the blocks that fail
    for (uint64_t block = 0; block < image.size() / kIdrBlockSize; block++) {
      std::span<uint8_t> part(image.data() + block * kIdrBlockSize, kIdrBlockSize);
      if (!disk.ReadAt(at + block * kIdrBlockSize, part).ok()) {
        std::memset(part.data(), 0, part.size());
        unreadable.push_back(block);
      }
    }
  }
  auto decoded = IdrDecode(image, expect.payload_length, params, unreadable);
  if (decoded.ok() && Crc32c(decoded->payload) == expect.payload_crc) {
    if (repaired) *repaired = decoded->repaired_blocks;
    return std::move(decoded->payload);
  }
  if (unreadable.empty()) {
    uint64_t groups = IdrGroupCount(expect.payload_length);
    auto bad = IdrMismatchedGroups(image, params);
    if (bad.size() == 1) {
      for (uint32_t b = 0; b < kIdrGroupBlocks; b++) {
        uint64_t suspect = IdrPhysicalBlock(bad[0], b, groups, params);
        auto attempt = IdrDecode(image, expect.payload_length, params, {&suspect, 1});
        if (attempt.ok() && Crc32c(attempt->payload) == expect.payload_crc) {
          if (repaired) *repaired = attempt->repaired_blocks;
          return std::move(attempt->payload);
        }
      }
    }
  }
  return Status::Corruption(fmt::format("{}: extent {} chunk {} cannot be repaired by its intra-disk parity: {}",
                                        where, expect.extent_id, expect.chunk_index,
                                        decoded.ok() ? "checksum mismatch" : decoded.status().message()));
}

}  // namespace

Status WriteExtent(Disk& disk, uint64_t offset, const ExtentHeader& header, std::span<const uint8_t> payload) {
  if (header.redundancy.idr_scramble != 0) return disk.WriteAt(offset, EncodeExtent(header, payload));
  // Without intra-disk parity the payload goes to the disk as it is: header block, payload,
  // zeros up to the allocation (no copy of the payload in memory).
  static const std::array<uint8_t, kBlockSize> kZeros{};
  std::array<uint8_t, kExtentHeaderSize> header_block{};
  auto encoded = EncodeExtentHeader(header);
  std::memcpy(header_block.data(), encoded.data(), encoded.size());
  uint64_t tail = ExtentAllocation(payload.size(), 0) - kExtentHeaderSize - payload.size();
  const std::span<const uint8_t> pieces[] = {header_block, payload, std::span(kZeros).first(tail)};
  return disk.WriteGatherAt(offset, pieces);
}

std::vector<uint8_t> EncodeExtent(const ExtentHeader& header, std::span<const uint8_t> payload) {
  uint8_t scramble = header.redundancy.idr_scramble;
  std::vector<uint8_t> buffer(ExtentAllocation(payload.size(), scramble), 0);
  auto encoded = EncodeExtentHeader(header);
  std::memcpy(buffer.data(), encoded.data(), encoded.size());
  if (scramble != 0) {
    std::span<uint8_t> image = std::span(buffer).subspan(kExtentHeaderSize, IdrEncodedSize(payload.size()));
    IdrEncode(payload, IdrParams{scramble}, image);
  } else if (!payload.empty()) {
    std::memcpy(buffer.data() + kExtentHeaderSize, payload.data(), payload.size());
  }
  return buffer;
}

Result<std::vector<uint8_t>> ReadExtent(Disk& disk, uint64_t offset, const ExtentExpectation& expect,
                                        std::vector<uint64_t>* repaired, ExtentHeader* header_out) {
  std::string where = fmt::format("{} offset {}", disk.Name(), offset);
  uint64_t allocation = ExtentAllocation(expect.payload_length, expect.idr_scramble);
  if (offset + allocation > disk.Size()) {
    return Status::Corruption(fmt::format("{}: extent {} of {} bytes passes the end of the disk ({} bytes)", where,
                                          expect.extent_id, allocation, disk.Size()));
  }
  std::array<uint8_t, kExtentHeaderSize> header_bytes;
  CAIRN_RETURN_IF_ERROR(disk.ReadAt(offset, header_bytes));
  auto header = DecodeExtentHeader(header_bytes, where);
  if (!header.ok()) return header.status();
  if (header->archive_id != expect.archive_id) {
    return Status::Corruption(fmt::format("{}: extent belongs to archive {} (this archive is {})", where,
                                          ArchiveIdToString(header->archive_id), ArchiveIdToString(expect.archive_id)));
  }
  if (header->extent_id != expect.extent_id || header->chunk_index != expect.chunk_index) {
    return Status::Corruption(fmt::format("{}: holds extent {} chunk {} (catalog expects {} chunk {})", where,
                                          header->extent_id, header->chunk_index, expect.extent_id,
                                          expect.chunk_index));
  }
  if (header->payload_length != expect.payload_length || header->redundancy.idr_scramble != expect.idr_scramble) {
    return Status::Corruption(fmt::format("{}: extent {} payload is {} bytes (catalog expects {})", where,
                                          expect.extent_id, header->payload_length, expect.payload_length));
  }
  if (header->payload_crc != expect.payload_crc) {
    return Status::Corruption(fmt::format("{}: extent {} header checksum {:08x} differs from the catalog's {:08x}",
                                          where, expect.extent_id, header->payload_crc, expect.payload_crc));
  }
  if (header->redundancy.checksum != expect.checksum || header->digest != expect.digest) {
    return Status::Corruption(fmt::format("{}: extent {} header {} digest differs from the catalog's", where,
                                          expect.extent_id, ChecksumName(expect.checksum)));
  }
  Result<std::vector<uint8_t>> payload = std::vector<uint8_t>();
  if (expect.idr_scramble != 0) {
    payload = DecodeWithIdr(disk, offset + kExtentHeaderSize, expect, where, repaired);
  } else {
    // The payload goes straight into its own buffer, which the read fills whole: no copy on
    // the read path, and a buffer taken from the pool is not zeroed first.
    payload = BufferPool::Default().Take(expect.payload_length);
    CAIRN_RETURN_IF_ERROR(disk.ReadAt(offset + kExtentHeaderSize, *payload));
    uint32_t actual = Crc32c(*payload);
    if (actual != expect.payload_crc) {
      return Status::Corruption(fmt::format("{}: extent {} payload checksum mismatch (want={:08x} have={:08x})",
                                            where, expect.extent_id, expect.payload_crc, actual));
    }
  }
  if (payload.ok() && expect.checksum != ChecksumType::kCrc32c &&
      ComputeDigest(expect.checksum, *payload) != expect.digest) {
    return Status::Corruption(fmt::format("{}: extent {} chunk {} {} mismatch", where, expect.extent_id,
                                          expect.chunk_index, ChecksumName(expect.checksum)));
  }
  if (payload.ok() && header_out) *header_out = std::move(*header);
  return payload;
}

}  // namespace cairn
