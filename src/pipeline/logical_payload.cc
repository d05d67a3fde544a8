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

}  // namespace cairn
