// TransformChain: the segment codec stage between segments and extents. Its transforms
// turn an extent's logical payload (file data and member table) into the stored payload
// that redundancy spreads over disks, and back. Extents record it as a chain stamp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/status.h"
#include "codec/transform.h"

namespace cairn {

// The longest chain stamp an extent header holds.
constexpr size_t kMaxChainStamp = 256;

// Immutable; thread-safe.
class TransformChain {
 public:
  TransformChain() = default;  // empty: the stored bytes are the logical bytes

  // One transform of a chain to write: its name and parameters ("" or "key=value,...").
  struct Stage {
    std::string name;
    std::string params;
  };
  // The transforms given, at their current versions, applied in that order. NotSupported
  // naming one that is not installed; InvalidArgument when the stamp would pass kMaxChainStamp.
  static Result<TransformChain> ForWriting(const std::vector<Stage>& stages);
  // The chain a chain stamp describes. "" is the empty chain; a transform or version not
  // installed is NotSupported, a malformed stamp Corruption, each naming the stamp.
  static Result<TransformChain> FromStamp(std::string_view stamp);

  // "name@version" (":params" when it has any) per transform, in order, separated by single
  // spaces; "" when empty.
  std::string Stamp() const;
  bool empty() const { return stages_.empty(); }
  // Whether a transform of it needs the file's data key in the SealContext.
  bool needs_key() const;

  // The stored payload of `logical` (moved through untouched by the empty chain), sealed
  // with `seal` when needs_key(). InvalidArgument naming the transform when one breaks its
  // MaxStoredLength() bound.
  Result<std::vector<uint8_t>> Encode(std::vector<uint8_t> logical, const SealContext& seal = {}) const;
  // The logical payload of `stored`: the stages undone in reverse order. Corruption when a
  // stage fails (a sealed payload with another `seal` than it was made with included) or
  // the result is not `logical_length` bytes.
  Result<std::vector<uint8_t>> Decode(std::vector<uint8_t> stored, uint64_t logical_length,
                                      const SealContext& seal = {}) const;

 private:
  explicit TransformChain(std::vector<std::shared_ptr<const Transform>> stages) : stages_(std::move(stages)) {}

  std::vector<std::shared_ptr<const Transform>> stages_;
};

}  // namespace cairn
