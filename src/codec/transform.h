// Transform: one stage of the segment codec, a reversible change of an extent's payload
// (compression, encryption, ...) that a plugin implements and registers by name
// (codec/transform_registry.h). Extents record the chain of transforms that made them.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "cairn/status.h"

namespace cairn {

// The most bytes a transform may turn `input_length` bytes into: room for the framing of
// incompressible data or an authentication tag, and a bound readers can check.
constexpr uint64_t MaxStoredLength(uint64_t input_length) { return input_length + input_length / 8 + 4096; }

// Where a transform runs in a chain, always in this order (the numbers are the plugin ABI's).
enum class TransformStage : uint32_t { kCompress = 1, kEncrypt = 2, kCustom = 3 };

// Who a payload is and the key to seal it with, for the transforms that need a key
// (encryption): they bind their output to these, so the bytes read back in another place,
// of another file or from an older write do not decode. Empty (no key) for all others.
struct SealContext {
  std::array<uint8_t, 16> archive_id{};
  uint64_t file_id = 0;  // the inode whose data key it is
  // Never the same for two payloads of one archive: the extent's id, which the catalog
  // records for each segment it holds (so an older or another extent is told apart).
  uint64_t version = 0;
  std::span<const uint8_t> key;  // the file's data key
};

// Implementations are immutable once made and safe to call from several threads at once.
class Transform {
 public:
  virtual ~Transform() = default;

  // The name it is registered under and the version of its output: both are recorded in
  // the chain stamp of every extent it encodes ("name@version"). The version changes
  // whenever the output for the same input does; readers keep decoding older versions.
  virtual std::string_view name() const = 0;
  virtual uint32_t version() const = 0;
  // What it was made with ("" or "key=value,..."; no spaces): recorded in the chain stamp
  // after the version, and given back to its factory to read what it wrote.
  virtual std::string_view params() const { return {}; }
  // Whether it reads SealContext::key (and refuses to work without one).
  virtual bool needs_key() const { return false; }

  // The encoded form of `input`, at most MaxStoredLength(input.size()) bytes.
  virtual Result<std::vector<uint8_t>> Encode(std::span<const uint8_t> input, const SealContext& seal) const = 0;
  // What Encode was given, at most `max_length` bytes; Corruption when `encoded` is not
  // something it made, or would decode to more.
  virtual Result<std::vector<uint8_t>> Decode(std::span<const uint8_t> encoded, uint64_t max_length,
                                              const SealContext& seal) const = 0;
};

}  // namespace cairn
