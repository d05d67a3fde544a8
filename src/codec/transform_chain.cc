#include "codec/transform_chain.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include <fmt/format.h>

#include "codec/transform_registry.h"
#include "util/buffer_pool.h"

namespace cairn {

Result<TransformChain> TransformChain::ForWriting(const std::vector<Stage>& wanted) {
  std::vector<std::shared_ptr<const Transform>> stages;
  for (const Stage& want : wanted) {
    if (want.params.find(' ') != std::string::npos) {
      return Status::InvalidArgument(fmt::format("transform {}: parameters '{}' hold a space", want.name, want.params));
    }
    auto stage = TransformForWriting(want.name, want.params);
    if (!stage.ok()) return stage.status();
    stages.push_back(std::move(*stage));
  }
  TransformChain chain(std::move(stages));
  if (std::string stamp = chain.Stamp(); stamp.size() > kMaxChainStamp) {
    return Status::InvalidArgument(
        fmt::format("transform chain '{}' is {} bytes long (at most {})", stamp, stamp.size(), kMaxChainStamp));
  }
  return chain;
}

Result<TransformChain> TransformChain::FromStamp(std::string_view stamp) {
  std::vector<std::shared_ptr<const Transform>> stages;
  auto malformed = [&](std::string_view why) {
    return Status::Corruption(fmt::format("transform chain '{}': {}", stamp, why));
  };
  if (stamp.size() > kMaxChainStamp) return malformed("longer than its maximum");
  for (size_t start = 0; start < stamp.size();) {
    size_t end = std::min(stamp.find(' ', start), stamp.size());
    std::string_view element = stamp.substr(start, end - start);
    size_t at = element.find('@');
    size_t colon = element.find(':', at == std::string_view::npos ? 0 : at);
    std::string_view params = colon == std::string_view::npos ? std::string_view() : element.substr(colon + 1);
    uint32_t version = 0;
    std::string_view digits =
        at == std::string_view::npos ? std::string_view() : element.substr(at + 1, colon == std::string_view::npos ? std::string_view::npos : colon - at - 1);
    auto [rest, error] = std::from_chars(digits.data(), digits.data() + digits.size(), version);
    if (at == 0 || digits.empty() || error != std::errc() || rest != digits.data() + digits.size()) {
      return malformed(fmt::format("'{}' is not name@version or name@version:params", element));
    }
    auto stage = TransformForReading(element.substr(0, at), version, params);
    if (!stage.ok()) {
      return Status::NotSupported(fmt::format("transform chain '{}': {}", stamp, stage.status().message()));
    }
    stages.push_back(std::move(*stage));
    if (end + 1 == stamp.size()) return malformed("ends with a space");
    start = end + 1;
  }
  return TransformChain(std::move(stages));
}

std::string TransformChain::Stamp() const {
  std::string out;
  for (const auto& stage : stages_) {
    out += fmt::format("{}{}@{}", out.empty() ? "" : " ", stage->name(), stage->version());
    if (!stage->params().empty()) out += fmt::format(":{}", stage->params());
  }
  return out;
}

bool TransformChain::needs_key() const {
  return std::any_of(stages_.begin(), stages_.end(), [](const auto& stage) { return stage->needs_key(); });
}

Result<std::vector<uint8_t>> TransformChain::Encode(std::vector<uint8_t> logical, const SealContext& seal) const {
  for (const auto& stage : stages_) {
    auto encoded = stage->Encode(logical, seal);
    if (!encoded.ok()) return encoded.status();
    if (encoded->size() > MaxStoredLength(logical.size())) {
      return Status::InvalidArgument(fmt::format("transform {}@{} made {} bytes of {} (at most {})", stage->name(),
                                                 stage->version(), encoded->size(), logical.size(),
                                                 MaxStoredLength(logical.size())));
    }
    BufferPool::Default().Give(std::exchange(logical, std::move(*encoded)));
  }
  return logical;
}

Result<std::vector<uint8_t>> TransformChain::Decode(std::vector<uint8_t> stored, uint64_t logical_length,
                                                    const SealContext& seal) const {
  // What stage k was given when encoding is at most bounds[k] bytes: exactly the logical
  // length for the first, then at most what each stage may grow it to.
  std::vector<uint64_t> bounds{logical_length};
  for (size_t k = 1; k < stages_.size(); k++) bounds.push_back(MaxStoredLength(bounds.back()));
  for (size_t k = stages_.size(); k-- > 0;) {
    const auto& stage = stages_[k];
    auto decoded = stage->Decode(stored, bounds[k], seal);
    if (!decoded.ok()) {
      return Status::Corruption(fmt::format("transform {}@{} cannot decode: {}", stage->name(), stage->version(),
                                            decoded.status().message()));
    }
    BufferPool::Default().Give(std::exchange(stored, std::move(*decoded)));
  }
  if (stored.size() != logical_length) {
    return Status::Corruption(fmt::format("transform chain '{}' decoded {} bytes, {} expected", Stamp(),
                                          stored.size(), logical_length));
  }
  return stored;
}

}  // namespace cairn
