// Intra-disk redundancy (IDR), as in LoneStar: SPC 16+1 over 4 KiB blocks with optional parity-group
// scrambling, so one disk can rebuild a bad block of an extent payload and detect silent corruption.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "cairn/status.h"

namespace cairn {

// On-disk layout of an encoded payload (the "image"):
//
//   The payload is cut into parity groups (iPGs) of kIdrDataBlocks 4 KiB data blocks; the last group is
//   zero-padded. Each group gets one parity block, the XOR of its data blocks, so a group is 68 KiB on
//   disk and an empty payload encodes to nothing. Block j of a group is a data block for j < 16 and
//   the parity block for j = 16.
//
//   Groups are laid out in vtracks of s = scramble consecutive groups. Inside a vtrack holding w
//   groups, block j of the vtrack's group i (0 <= i < w, 0 <= j < 17) sits at slot j * w + i, so the
//   blocks of one group are w slots apart and a burst of up to w consecutive bad blocks costs each
//   group at most one block. Every vtrack but the last holds w = s groups. The last one holds the
//   remaining group_count mod s groups (when that is not 0) and interleaves only those: images are
//   never padded to whole vtracks, at the price of a shorter burst tolerance at the end. With s = 1
//   (or a single group) the image is the groups back to back.
//
// Every function here is a pure computation on caller buffers and is safe to call concurrently.
constexpr size_t kIdrBlockSize = 4096;
constexpr uint32_t kIdrDataBlocks = 16;
constexpr uint32_t kIdrGroupBlocks = kIdrDataBlocks + 1;  // data blocks, then the parity block
constexpr uint64_t kIdrGroupDataSize = uint64_t{kIdrDataBlocks} * kIdrBlockSize;
constexpr uint64_t kIdrGroupEncodedSize = uint64_t{kIdrGroupBlocks} * kIdrBlockSize;
constexpr uint32_t kIdrMaxScramble = 64;

// The only code today is SPC 16+1, so the scrambling factor is all there is to choose.
struct IdrParams {
  uint32_t scramble = 1;  // groups per vtrack; REQUIRES: 1 <= scramble <= kIdrMaxScramble

  bool operator==(const IdrParams&) const = default;
};

// Parses a user.cairn.idr value: "none" gives nullopt (no IDR), "spc-16-1" gives scramble 1 and
// "spc-16-1-sS" gives scramble S (1..64). Anything else is InvalidArgument.
Result<std::optional<IdrParams>> ParseIdr(std::string_view value);

// Parity groups needed for a payload of `payload_len` bytes.
inline uint64_t IdrGroupCount(uint64_t payload_len) {
  return (payload_len + kIdrGroupDataSize - 1) / kIdrGroupDataSize;
}
// Bytes of the encoded image of such a payload: whole groups, each with its parity block.
inline uint64_t IdrEncodedSize(uint64_t payload_len) { return IdrGroupCount(payload_len) * kIdrGroupEncodedSize; }

// Where block `block` (0..16) of group `group` sits in an image of `group_count` groups, in blocks
// from the start of the image. REQUIRES: group < group_count, block < kIdrGroupBlocks.
uint64_t IdrPhysicalBlock(uint64_t group, uint32_t block, uint64_t group_count, const IdrParams& p);

struct IdrBlockRef {
  uint64_t group;
  uint32_t block;  // 0..15 data, 16 parity

  bool operator==(const IdrBlockRef&) const = default;
};
// The inverse of IdrPhysicalBlock. REQUIRES: physical < group_count * kIdrGroupBlocks.
IdrBlockRef IdrLogicalBlock(uint64_t physical, uint64_t group_count, const IdrParams& p);

// Writes the image of `payload` to `out`. Buffers need no alignment.
// REQUIRES: out.size() == IdrEncodedSize(payload.size()).
void IdrEncode(std::span<const uint8_t> payload, const IdrParams& p, std::span<uint8_t> out);

// The groups (ascending) whose blocks do not XOR to zero: each holds at least one corrupt block that
// SPC cannot locate. A caller with its own checksum can try each block of such a group in turn by
// passing IdrPhysicalBlock(group, b, ...) to IdrDecode as unreadable.
// REQUIRES: image.size() is a multiple of kIdrGroupEncodedSize.
std::vector<uint64_t> IdrMismatchedGroups(std::span<const uint8_t> image, const IdrParams& p);

struct IdrDecodeResult {
  std::vector<uint8_t> payload;
  // Physical blocks (ascending) that were unreadable and have been rebuilt, parity blocks included;
  // the caller rewrites them in place so the drive remaps the bad sectors.
  std::vector<uint64_t> repaired_blocks;
};

// Check-on-read: rebuilds each block listed in `unreadable_blocks` (physical indexes into the image,
// any order, repeats allowed; their bytes in `image` are ignored) from the rest of its group, checks
// the parity of every group that lost no block, and returns the payload.
//
// A group that lost a block has no redundancy left, so silent corruption elsewhere in that group goes
// undetected and yields wrong bytes: the caller's payload checksum must still be checked. Corruption
// naming the groups when a group lost two or more blocks or its parity does not match; the caller then
// recovers from cross-disk redundancy. InvalidArgument when the image size does not match payload_len
// or an unreadable index is out of range.
Result<IdrDecodeResult> IdrDecode(std::span<const uint8_t> image, uint64_t payload_len, const IdrParams& p,
                                  std::span<const uint64_t> unreadable_blocks);

}  // namespace cairn
