// SPC 16+1 intra-disk redundancy: encoding, the scrambling permutation and check-on-read.
// With parity_math.cc, the only files that call isa-l's XOR (RAID) functions.
#include "redundancy/intra_disk.h"

#include <isa-l/raid.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <charconv>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace cairn {

namespace {

// isa-l's xor_gen wants 32-byte aligned vectors; caller buffers are copied through this.
struct alignas(64) AlignedBlock {
  uint8_t bytes[kIdrBlockSize];
};

// The blocks of one group in group order (data blocks, then parity), aligned for isa-l.
class GroupScratch {
 public:
  GroupScratch() : blocks_(kIdrGroupBlocks) {}

  uint8_t* block(uint32_t j) { return blocks_[j].bytes; }

  // XOR of every block except `target` into `target`: computes the parity, or rebuilds a lost block.
  void Rebuild(uint32_t target) {
    void* vectors[kIdrGroupBlocks];
    int n = 0;
    for (uint32_t j = 0; j < kIdrGroupBlocks; j++) {
      if (j != target) vectors[n++] = block(j);
    }
    vectors[n++] = block(target);  // xor_gen's destination is the last vector
    [[maybe_unused]] int rc = xor_gen(n, static_cast<int>(kIdrBlockSize), vectors);
    assert(rc == 0);
  }

  // True when all blocks XOR to zero, i.e. the parity matches the data.
  bool ParityHolds() {
    void* vectors[kIdrGroupBlocks];
    for (uint32_t j = 0; j < kIdrGroupBlocks; j++) vectors[j] = block(j);
    return xor_check(kIdrGroupBlocks, static_cast<int>(kIdrBlockSize), vectors) == 0;
  }

  // Copies block j of `group` from the image; `lost` blocks (a bit per j) are skipped.
  void Gather(std::span<const uint8_t> image, uint64_t group, uint64_t group_count, const IdrParams& p,
              uint32_t lost = 0) {
    for (uint32_t j = 0; j < kIdrGroupBlocks; j++) {
      if (lost & (1u << j)) continue;
      uint64_t physical = IdrPhysicalBlock(group, j, group_count, p);
      std::memcpy(block(j), image.data() + physical * kIdrBlockSize, kIdrBlockSize);
    }
  }

 private:
  std::vector<AlignedBlock> blocks_;
};

// Groups in the vtrack that starts at `first_group`: s, or fewer for the last vtrack.
uint64_t VtrackWidth(uint64_t first_group, uint64_t group_count, const IdrParams& p) {
  return std::min<uint64_t>(p.scramble, group_count - first_group);
}

std::string JoinNumbers(const std::vector<uint64_t>& values) {
  std::string out;
  for (uint64_t v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

}  // namespace

Result<std::optional<IdrParams>> ParseIdr(std::string_view value) {
  if (value == "none") return std::optional<IdrParams>();
  constexpr std::string_view kSpc = "spc-16-1";
  if (value == kSpc) return std::optional<IdrParams>(IdrParams{});
  if (value.starts_with(kSpc) && value.substr(kSpc.size()).starts_with("-s")) {
    std::string_view digits = value.substr(kSpc.size() + 2);
    uint32_t s = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), s);
    if (!digits.empty() && ec == std::errc() && ptr == digits.data() + digits.size() && s >= 1 &&
        s <= kIdrMaxScramble) {
      return std::optional<IdrParams>(IdrParams{s});
    }
  }
  return Status::InvalidArgument(
      fmt::format("idr '{}' is not valid (allowed: none, spc-16-1, spc-16-1-sS with S 1..{})", value, kIdrMaxScramble));
}

uint64_t IdrPhysicalBlock(uint64_t group, uint32_t block, uint64_t group_count, const IdrParams& p) {
  assert(group < group_count && block < kIdrGroupBlocks);
  uint64_t first = group / p.scramble * p.scramble;
  return first * kIdrGroupBlocks + block * VtrackWidth(first, group_count, p) + (group - first);
}

IdrBlockRef IdrLogicalBlock(uint64_t physical, uint64_t group_count, const IdrParams& p) {
  assert(physical < group_count * kIdrGroupBlocks);
  uint64_t first = physical / (uint64_t{p.scramble} * kIdrGroupBlocks) * p.scramble;
  uint64_t slot = physical - first * kIdrGroupBlocks;
  uint64_t width = VtrackWidth(first, group_count, p);
  return IdrBlockRef{first + slot % width, static_cast<uint32_t>(slot / width)};
}

void IdrEncode(std::span<const uint8_t> payload, const IdrParams& p, std::span<uint8_t> out) {
  assert(out.size() == IdrEncodedSize(payload.size()));
  uint64_t group_count = IdrGroupCount(payload.size());
  GroupScratch scratch;
  for (uint64_t g = 0; g < group_count; g++) {
    for (uint32_t j = 0; j < kIdrDataBlocks; j++) {
      uint64_t offset = g * kIdrGroupDataSize + uint64_t{j} * kIdrBlockSize;
      size_t n = offset < payload.size() ? std::min<uint64_t>(kIdrBlockSize, payload.size() - offset) : 0;
      if (n > 0) std::memcpy(scratch.block(j), payload.data() + offset, n);
      std::memset(scratch.block(j) + n, 0, kIdrBlockSize - n);
    }
    scratch.Rebuild(kIdrDataBlocks);
    for (uint32_t j = 0; j < kIdrGroupBlocks; j++) {
      uint64_t physical = IdrPhysicalBlock(g, j, group_count, p);
      std::memcpy(out.data() + physical * kIdrBlockSize, scratch.block(j), kIdrBlockSize);
    }
  }
}

std::vector<uint64_t> IdrMismatchedGroups(std::span<const uint8_t> image, const IdrParams& p) {
  assert(image.size() % kIdrGroupEncodedSize == 0);
  uint64_t group_count = image.size() / kIdrGroupEncodedSize;
  std::vector<uint64_t> mismatched;
  GroupScratch scratch;
  for (uint64_t g = 0; g < group_count; g++) {
    scratch.Gather(image, g, group_count, p);
    if (!scratch.ParityHolds()) mismatched.push_back(g);
  }
  return mismatched;
}

Result<IdrDecodeResult> IdrDecode(std::span<const uint8_t> image, uint64_t payload_len, const IdrParams& p,
                                  std::span<const uint64_t> unreadable_blocks) {
  if (payload_len > image.size() || image.size() != IdrEncodedSize(payload_len)) {  // the first test catches wrap
    return Status::InvalidArgument(fmt::format("idr: image of {} bytes cannot hold a payload of {} bytes (want {})",
                                               image.size(), payload_len, IdrEncodedSize(payload_len)));
  }
  uint64_t group_count = IdrGroupCount(payload_len);
  uint64_t block_count = group_count * kIdrGroupBlocks;
  std::vector<bool> unreadable(block_count);
  for (uint64_t b : unreadable_blocks) {
    if (b >= block_count) {
      return Status::InvalidArgument(fmt::format("idr: unreadable block {} is outside the image of {} blocks", b,
                                                 block_count));
    }
    unreadable[b] = true;
  }

  IdrDecodeResult result;
  result.payload.resize(payload_len);
  std::vector<std::string> failures;  // one entry per group that cannot be repaired
  GroupScratch scratch;
  for (uint64_t g = 0; g < group_count; g++) {
    uint32_t lost = 0;
    std::vector<uint64_t> lost_physical;
    for (uint32_t j = 0; j < kIdrGroupBlocks; j++) {
      uint64_t physical = IdrPhysicalBlock(g, j, group_count, p);
      if (unreadable[physical]) {
        lost |= 1u << j;
        lost_physical.push_back(physical);
      }
    }
    if (lost_physical.size() > 1) {
      failures.push_back(fmt::format("group {} lost {} blocks (physical {})", g, lost_physical.size(),
                                     JoinNumbers(lost_physical)));
      continue;
    }
    scratch.Gather(image, g, group_count, p, lost);
    if (lost_physical.empty()) {
      if (!scratch.ParityHolds()) {
        failures.push_back(fmt::format("group {} parity mismatch", g));
        continue;
      }
    } else {
      scratch.Rebuild(static_cast<uint32_t>(std::countr_zero(lost)));
      result.repaired_blocks.push_back(lost_physical[0]);
    }
    if (!failures.empty()) continue;  // the payload will not be returned
    for (uint32_t j = 0; j < kIdrDataBlocks; j++) {
      uint64_t offset = g * kIdrGroupDataSize + uint64_t{j} * kIdrBlockSize;
      if (offset >= payload_len) break;
      size_t n = std::min<uint64_t>(kIdrBlockSize, payload_len - offset);
      std::memcpy(result.payload.data() + offset, scratch.block(j), n);
    }
  }

  if (!failures.empty()) {
    constexpr size_t kMaxListed = 8;
    std::string detail;
    for (size_t i = 0; i < std::min(failures.size(), kMaxListed); i++) detail += (i ? "; " : "") + failures[i];
    if (failures.size() > kMaxListed) detail += fmt::format("; and {} more", failures.size() - kMaxListed);
    return Status::Corruption(
        fmt::format("idr: {} of {} parity groups cannot be repaired: {}", failures.size(), group_count, detail));
  }
  std::sort(result.repaired_blocks.begin(), result.repaired_blocks.end());
  return result;
}

}  // namespace cairn
