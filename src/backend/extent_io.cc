#include "backend/extent_io.h"

#include <cstring>

#include <fmt/format.h>

#include "util/coding.h"

namespace cairn {

Status WriteExtent(Disk& disk, uint64_t offset, const ExtentHeader& header, std::span<const uint8_t> payload) {
  std::vector<uint8_t> buffer(ExtentAllocation(payload.size()), 0);
  auto encoded = EncodeExtentHeader(header);
  std::memcpy(buffer.data(), encoded.data(), encoded.size());
  if (!payload.empty()) std::memcpy(buffer.data() + kExtentHeaderSize, payload.data(), payload.size());
  return disk.WriteAt(offset, buffer);
}

Result<std::vector<uint8_t>> ReadExtent(Disk& disk, uint64_t offset, const ExtentExpectation& expect) {
  std::string where = fmt::format("{} offset {}", disk.Name(), offset);
  if (offset + kExtentHeaderSize + expect.payload_length > disk.Size()) {
    return Status::Corruption(fmt::format("{}: extent {} of {} bytes passes the end of the disk ({} bytes)", where,
                                          expect.extent_id, kExtentHeaderSize + expect.payload_length, disk.Size()));
  }
  std::array<uint8_t, kExtentHeaderSize> header_bytes;
  CAIRN_RETURN_IF_ERROR(disk.ReadAt(offset, header_bytes));
  auto header = DecodeExtentHeader(header_bytes, where);
  if (!header.ok()) return header.status();
  if (header->archive_id != expect.archive_id) {
    return Status::Corruption(fmt::format("{}: extent belongs to archive {} (this archive is {})", where,
                                          ArchiveIdToString(header->archive_id), ArchiveIdToString(expect.archive_id)));
  }
  if (header->extent_id != expect.extent_id) {
    return Status::Corruption(
        fmt::format("{}: holds extent {} (catalog expects {})", where, header->extent_id, expect.extent_id));
  }
  if (header->payload_length != expect.payload_length) {
    return Status::Corruption(fmt::format("{}: extent {} payload is {} bytes (catalog expects {})", where,
                                          expect.extent_id, header->payload_length, expect.payload_length));
  }
  // The payload goes straight into its own buffer: no copy on the read path.
  std::vector<uint8_t> payload(expect.payload_length);
  CAIRN_RETURN_IF_ERROR(disk.ReadAt(offset + kExtentHeaderSize, payload));
  uint32_t actual = Crc32c(payload);
  if (actual != header->payload_crc || actual != expect.payload_crc) {
    return Status::Corruption(fmt::format("{}: extent {} payload checksum mismatch (want={:08x} have={:08x})", where,
                                          expect.extent_id, expect.payload_crc, actual));
  }
  return payload;
}

}  // namespace cairn
