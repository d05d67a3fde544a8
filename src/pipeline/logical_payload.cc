#include "pipeline/logical_payload.h"

#include <fmt/format.h>

#include "codec/transform_chain.h"

namespace cairn {

Result<std::vector<uint8_t>> LogicalPayload(Archive& archive, const ExtentRecord& extent, uint64_t ino,
                                            std::vector<uint8_t> stored) {
  if (extent.chain_stamp.empty()) return stored;  // the stored bytes are the logical ones
  auto chain = TransformChain::FromStamp(extent.chain_stamp);
  if (!chain.ok()) {
    return Status::NotSupported(fmt::format("extent {}: {}", extent.id, chain.status().message()));
  }
  SealContext seal{archive.id(), ino, extent.id, {}};
  FileKeys::DataKey key;  // held until decoded
  if (chain->needs_key()) {
    if (ino == 0) return Status::NotSupported(fmt::format("extent {} is encrypted, and whose it is is not known", extent.id));
    auto data_key = archive.file_keys().ForReading(ino);
    if (!data_key.ok()) {
      return Status::NotSupported(fmt::format("extent {} is encrypted, and the data key of inode {} is not available: {}",
                                              extent.id, ino, data_key.status().message()));
    }
    key = *data_key;
    seal.key = key->bytes();
  }
  auto logical = chain->Decode(std::move(stored), extent.logical_length, seal);
  if (!logical.ok()) return Status::Corruption(fmt::format("extent {}: {}", extent.id, logical.status().message()));
  return logical;
}

}  // namespace cairn
