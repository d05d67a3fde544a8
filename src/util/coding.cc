#include "util/coding.h"

#include <isa-l/crc.h>

namespace cairn {

uint32_t Crc32c(std::span<const uint8_t> data, uint32_t crc) {
  // isa-l's crc32_iscsi takes and returns the raw register; the standard CRC32C
  // pre- and post-inverts it.
  return ~crc32_iscsi(const_cast<unsigned char*>(data.data()), static_cast<int>(data.size()), ~crc);
}

}  // namespace cairn
