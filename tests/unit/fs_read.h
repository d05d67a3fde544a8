// Reads through Filesystem::Read into one vector, the way the FUSE layer hands a reply's
// pieces to the kernel.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "fs/filesystem.h"

namespace cairn::test {

inline Result<std::vector<uint8_t>> ReadBytes(Filesystem& fs, FileHandle* fh, uint64_t offset, size_t size) {
  ReadReply reply(size);
  CAIRN_RETURN_IF_ERROR(fs.Read(fh, offset, size, reply));
  std::vector<uint8_t> bytes;
  bytes.reserve(reply.size());
  for (const iovec& piece : reply.pieces()) {
    const auto* data = static_cast<const uint8_t*>(piece.iov_base);
    bytes.insert(bytes.end(), data, data + piece.iov_len);
  }
  return bytes;
}

}  // namespace cairn::test
