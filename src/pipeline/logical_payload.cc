#include "pipeline/logical_payload.h"

#include <fmt/format.h>

#include "codec/transform_chain.h"

namespace cairn {

Result<std::vector<uint8_t>> LogicalPayload(const ExtentRecord& extent, std::vector<uint8_t> stored) {
  if (extent.chain_stamp.empty()) return stored;  // the stored bytes are the logical ones
  auto chain = TransformChain::FromStamp(extent.chain_stamp);
  if (!chain.ok()) {
    return Status::NotSupported(fmt::format("extent {}: {}", extent.id, chain.status().message()));
  }
  auto logical = chain->Decode(std::move(stored), extent.logical_length);
  if (!logical.ok()) return Status::Corruption(fmt::format("extent {}: {}", extent.id, logical.status().message()));
  return logical;
}

}  // namespace cairn
