// Tests for SPC 16+1 intra-disk redundancy: the layout, the scrambling permutation, burst repair
// and detection of silent corruption.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "redundancy/intra_disk.h"
#include "test_util.h"
#include "util/coding.h"

using namespace cairn;

namespace {

constexpr uint64_t kMiB = 1 << 20;

std::vector<uint8_t> Encode(const std::vector<uint8_t>& payload, const IdrParams& p) {
  std::vector<uint8_t> image(IdrEncodedSize(payload.size()));
  IdrEncode(payload, p, image);
  return image;
}

uint8_t* BlockAt(std::vector<uint8_t>& image, uint64_t physical) { return image.data() + physical * kIdrBlockSize; }

std::vector<uint64_t> Range(uint64_t start, uint64_t len) {
  std::vector<uint64_t> out(len);
  std::iota(out.begin(), out.end(), start);
  return out;
}

}  // namespace

TEST_CASE("Idr: ParseIdr accepts and rejects", "[idr]") {
  auto none = ParseIdr("none");
  REQUIRE(none.ok());
  CHECK(!none->has_value());
  CHECK(**ParseIdr("spc-16-1") == IdrParams{1});
  CHECK(**ParseIdr("spc-16-1-s1") == IdrParams{1});
  CHECK(**ParseIdr("spc-16-1-s8") == IdrParams{8});
  CHECK(**ParseIdr("spc-16-1-s64") == IdrParams{64});
  for (const char* bad : {"spc-16-1-s0", "spc-16-1-s65", "spc-16-1-s", "spc-16-1-s8x", "spc-16-1-s-8", "spc-16-1-x8",
                          "spc-16-1s8", "spc-8-1", "spc-16-2", "SPC-16-1", "", "garbage", "spc-16-1-s99999999999"}) {
    INFO(bad);
    auto r = ParseIdr(bad);
    REQUIRE(!r.ok());
    CHECK(r.status().code() == Status::Code::kInvalidArgument);
  }
  CHECK(ParseIdr("spc-8-1").status().message().find("spc-16-1-sS") != std::string::npos);
}

TEST_CASE("Idr: encoded size is whole 68 KiB groups", "[idr]") {
  CHECK(IdrEncodedSize(0) == 0);
  CHECK(IdrEncodedSize(1) == 69632);
  CHECK(IdrEncodedSize(65536) == 69632);
  CHECK(IdrEncodedSize(65537) == 2 * 69632);
  CHECK(IdrGroupCount(kMiB) == 16);
  CHECK(IdrGroupCount(3 * kMiB + 17) == 49);
}

TEST_CASE("Idr: known parity vector", "[idr]") {
  // Data block j is filled with the byte j + 1, so the parity is 1 ^ 2 ^ ... ^ 16 = 0x10 everywhere.
  std::vector<uint8_t> payload(kIdrGroupDataSize);
  for (uint32_t j = 0; j < kIdrDataBlocks; j++) {
    std::memset(payload.data() + j * kIdrBlockSize, static_cast<int>(j + 1), kIdrBlockSize);
  }
  for (uint32_t s : {1u, 8u}) {  // a single group is never scrambled
    std::vector<uint8_t> image = Encode(payload, IdrParams{s});
    CHECK(std::equal(payload.begin(), payload.end(), image.begin()));
    CHECK(std::all_of(image.begin() + kIdrGroupDataSize, image.end(), [](uint8_t b) { return b == 0x10; }));
  }

  // Random data: each parity byte is the XOR of the 16 data bytes at that offset.
  payload = test::RandomBytes(kIdrGroupDataSize, 7);
  std::vector<uint8_t> image = Encode(payload, IdrParams{});
  for (size_t t = 0; t < kIdrBlockSize; t++) {
    uint8_t x = 0;
    for (uint32_t j = 0; j < kIdrDataBlocks; j++) x ^= payload[j * kIdrBlockSize + t];
    REQUIRE(image[kIdrGroupDataSize + t] == x);
  }

  // A 1-byte payload is zero-padded to a whole group; the parity repeats the byte.
  image = Encode({0xab}, IdrParams{});
  REQUIRE(image.size() == kIdrGroupEncodedSize);
  CHECK(image[0] == 0xab);
  CHECK(image[kIdrGroupDataSize] == 0xab);
  image[0] = image[kIdrGroupDataSize] = 0;
  CHECK(IsAllZero(image));
}

TEST_CASE("Idr: round trip", "[idr]") {
  for (uint64_t len : std::vector<uint64_t>{0, 1, 4095, 4096, 65536, 65537, kMiB, 3 * kMiB + 17}) {
    std::vector<uint8_t> payload = test::RandomBytes(len, static_cast<uint32_t>(len));
    for (uint32_t s : {1u, 4u, 8u, 16u}) {
      INFO("len " << len << " s " << s);
      IdrParams p{s};
      std::vector<uint8_t> image = Encode(payload, p);
      CHECK(IdrMismatchedGroups(image, p).empty());
      auto decoded = IdrDecode(image, len, p, {});
      REQUIRE(decoded.ok());
      CHECK(decoded->payload == payload);
      CHECK(decoded->repaired_blocks.empty());
    }
  }
}

TEST_CASE("Idr: buffers need no alignment", "[idr]") {
  IdrParams p{4};
  uint64_t len = 5 * kIdrGroupDataSize + 100;
  std::vector<uint8_t> payload_buf = test::RandomBytes(len + 1, 3);
  std::span<const uint8_t> payload(payload_buf.data() + 1, len);
  std::vector<uint8_t> image_buf(IdrEncodedSize(len) + 1);
  std::span<uint8_t> image(image_buf.data() + 1, IdrEncodedSize(len));
  IdrEncode(payload, p, image);
  uint64_t lost[] = {3};
  auto decoded = IdrDecode(image, len, p, lost);
  REQUIRE(decoded.ok());
  CHECK(std::equal(payload.begin(), payload.end(), decoded->payload.begin(), decoded->payload.end()));
}

TEST_CASE("Idr: scrambling permutation", "[idr]") {
  for (uint32_t s : {1u, 4u, 8u, 16u, 64u}) {
    for (uint64_t groups : std::vector<uint64_t>{1, 3, 8, 9, 16, 17, 49, 130}) {
      INFO("s " << s << " groups " << groups);
      IdrParams p{s};
      uint64_t blocks = groups * kIdrGroupBlocks;
      std::vector<bool> seen(blocks);
      for (uint64_t g = 0; g < groups; g++) {
        uint64_t first = g / s * s;
        uint64_t width = std::min<uint64_t>(s, groups - first);
        for (uint32_t j = 0; j < kIdrGroupBlocks; j++) {
          uint64_t phys = IdrPhysicalBlock(g, j, groups, p);
          REQUIRE(phys < blocks);
          REQUIRE(!seen[phys]);
          seen[phys] = true;
          // Each vtrack occupies its own contiguous run of blocks.
          REQUIRE(phys >= first * kIdrGroupBlocks);
          REQUIRE(phys < (first + width) * kIdrGroupBlocks);
          // slot = j * s + i inside a full vtrack; the partial last one interleaves its `width` groups.
          REQUIRE(phys - first * kIdrGroupBlocks == j * width + (g - first));
          if (width == s) REQUIRE(phys - first * kIdrGroupBlocks == j * s + (g - first));
          if (j > 0) REQUIRE(phys - IdrPhysicalBlock(g, j - 1, groups, p) == width);
          REQUIRE(IdrLogicalBlock(phys, groups, p) == IdrBlockRef{g, j});
        }
      }
      CHECK(std::all_of(seen.begin(), seen.end(), [](bool b) { return b; }));
    }
  }
  // Without scrambling the image is the groups back to back.
  CHECK(IdrPhysicalBlock(5, 3, 10, IdrParams{1}) == 5 * 17 + 3);
  // s = 8, second vtrack of a 16-group image: block 2 of group 11 is slot 2 * 8 + 3.
  CHECK(IdrPhysicalBlock(11, 2, 16, IdrParams{8}) == 136 + 19);
}

TEST_CASE("Idr: bursts of up to s unreadable blocks are repaired", "[idr]") {
  IdrParams p{8};
  std::vector<uint8_t> payload = test::RandomBytes(kMiB, 11);
  const std::vector<uint8_t> image = Encode(payload, p);
  uint64_t blocks = image.size() / kIdrBlockSize;
  REQUIRE(blocks == 272);
  std::vector<uint8_t> damaged = image;
  for (uint64_t len = 1; len <= 8; len++) {
    for (uint64_t start = 0; start + len <= blocks; start++) {
      std::memset(BlockAt(damaged, start), 0, len * kIdrBlockSize);
      std::vector<uint64_t> burst = Range(start, len);
      auto decoded = IdrDecode(damaged, payload.size(), p, burst);
      std::memcpy(BlockAt(damaged, start), image.data() + start * kIdrBlockSize, len * kIdrBlockSize);
      INFO("burst of " << len << " at " << start);
      REQUIRE(decoded.ok());
      REQUIRE(decoded->payload == payload);
      REQUIRE(decoded->repaired_blocks == burst);
    }
  }
}

TEST_CASE("Idr: a burst longer than s fails when it hits one group twice", "[idr]") {
  IdrParams p{8};
  std::vector<uint8_t> payload = test::RandomBytes(kMiB, 12);
  std::vector<uint8_t> image = Encode(payload, p);
  uint64_t blocks = image.size() / kIdrBlockSize;
  const uint64_t vtrack = 8 * kIdrGroupBlocks;  // 136 blocks, two full vtracks in this image
  for (uint64_t start = 0; start + 9 <= blocks; start++) {
    INFO("burst of 9 at " << start);
    auto decoded = IdrDecode(image, payload.size(), p, Range(start, 9));
    bool within_one_vtrack = start % vtrack + 9 <= vtrack;
    REQUIRE(decoded.ok() == !within_one_vtrack);
    if (!within_one_vtrack) REQUIRE(decoded->payload == payload);
  }

  auto r = IdrDecode(image, payload.size(), p, Range(0, 9));
  REQUIRE(r.status().IsCorruption());
  CHECK(r.status().message() == "idr: 1 of 16 parity groups cannot be repaired: group 0 lost 2 blocks (physical 0, 8)");
  r = IdrDecode(image, payload.size(), p, Range(127, 9));  // j = 15 and j = 16 of group 7
  REQUIRE(r.status().IsCorruption());
  CHECK(r.status().message().find("group 7 lost 2 blocks (physical 127, 135)") != std::string::npos);
  // Blocks 128..136 are the parity blocks of groups 0..7 and block 0 of group 8: all repairable.
  r = IdrDecode(image, payload.size(), p, Range(128, 9));
  REQUIRE(r.ok());
  CHECK(r->payload == payload);
}

TEST_CASE("Idr: a partial last vtrack tolerates shorter bursts", "[idr]") {
  // 49 groups with s = 8: six full vtracks, then one group alone (not scrambled).
  IdrParams p{8};
  std::vector<uint8_t> payload = test::RandomBytes(3 * kMiB + 17, 13);
  std::vector<uint8_t> image = Encode(payload, p);
  uint64_t last = 48 * kIdrGroupBlocks;
  CHECK(IdrPhysicalBlock(48, 5, 49, p) == last + 5);
  auto r = IdrDecode(image, payload.size(), p, Range(last + 3, 1));
  REQUIRE(r.ok());
  CHECK(r->payload == payload);
  r = IdrDecode(image, payload.size(), p, Range(last + 3, 2));
  REQUIRE(r.status().IsCorruption());
  CHECK(r.status().message().find("group 48 lost 2 blocks") != std::string::npos);
}

TEST_CASE("Idr: silent corruption is detected, never returned", "[idr]") {
  IdrParams p{4};
  uint64_t len = 10 * kIdrGroupDataSize - 5000;  // 10 groups, the last one partly padding
  std::vector<uint8_t> payload = test::RandomBytes(len, 21);
  const std::vector<uint8_t> image = Encode(payload, p);
  uint64_t blocks = image.size() / kIdrBlockSize;
  for (uint64_t phys = 0; phys < blocks; phys++) {
    std::vector<uint8_t> flipped = image;
    BlockAt(flipped, phys)[phys * 37 % kIdrBlockSize] ^= 0x04;
    uint64_t group = IdrLogicalBlock(phys, 10, p).group;
    INFO("flip in physical block " << phys);
    auto r = IdrDecode(flipped, len, p, {});
    REQUIRE(r.status().IsCorruption());
    REQUIRE(r.status().message() ==
            fmt::format("idr: 1 of 10 parity groups cannot be repaired: group {} parity mismatch", group));
    REQUIRE(IdrMismatchedGroups(flipped, p) == std::vector<uint64_t>{group});
  }

  // The padding of the last group is covered too.
  std::vector<uint8_t> flipped = image;
  flipped.back() ^= 1;
  CHECK(IdrMismatchedGroups(flipped, p) == std::vector<uint64_t>{9});
  CHECK(IdrDecode(flipped, len, p, {}).status().IsCorruption());
}

TEST_CASE("Idr: a caller checksum locates the bad block of a mismatched group", "[idr]") {
  IdrParams p{8};
  std::vector<uint8_t> payload = test::RandomBytes(kMiB, 22);
  uint32_t crc = Crc32c(payload);
  std::vector<uint8_t> image = Encode(payload, p);
  uint64_t bad = IdrPhysicalBlock(5, 9, 16, p);
  BlockAt(image, bad)[100] ^= 0x80;

  std::vector<uint64_t> groups = IdrMismatchedGroups(image, p);
  REQUIRE(groups == std::vector<uint64_t>{5});
  std::vector<uint64_t> fixes;
  for (uint32_t b = 0; b < kIdrGroupBlocks; b++) {
    uint64_t suspect[] = {IdrPhysicalBlock(groups[0], b, 16, p)};
    auto r = IdrDecode(image, payload.size(), p, suspect);
    REQUIRE(r.ok());  // one lost block per group is always "repairable"
    if (Crc32c(r->payload) == crc) fixes.push_back(suspect[0]);
  }
  CHECK(fixes == std::vector<uint64_t>{bad});
}

TEST_CASE("Idr: an unreadable parity block still returns the data", "[idr]") {
  IdrParams p{8};
  std::vector<uint8_t> payload = test::RandomBytes(kMiB, 31);
  std::vector<uint8_t> image = Encode(payload, p);
  uint64_t parity = IdrPhysicalBlock(3, kIdrDataBlocks, 16, p);
  std::memset(BlockAt(image, parity), 0x5a, kIdrBlockSize);
  uint64_t lost[] = {parity, parity};  // repeats are fine
  auto r = IdrDecode(image, payload.size(), p, lost);
  REQUIRE(r.ok());
  CHECK(r->payload == payload);
  CHECK(r->repaired_blocks == std::vector<uint64_t>{parity});
}

TEST_CASE("Idr: a group that lost a block cannot also detect corruption", "[idr]") {
  // Documents the limit of SPC: the caller's payload checksum is the last line of defence.
  IdrParams p{1};
  std::vector<uint8_t> payload = test::RandomBytes(2 * kIdrGroupDataSize, 32);
  std::vector<uint8_t> image = Encode(payload, p);
  image[5] ^= 1;          // group 0, data block 0, silently corrupt
  uint64_t lost[] = {3};  // group 0, data block 3, unreadable
  auto r = IdrDecode(image, payload.size(), p, lost);
  REQUIRE(r.ok());
  CHECK(r->payload != payload);
  CHECK(Crc32c(r->payload) != Crc32c(payload));
}

TEST_CASE("Idr: failures in many groups are all reported", "[idr]") {
  IdrParams p{8};
  std::vector<uint8_t> payload = test::RandomBytes(kMiB, 41);
  std::vector<uint8_t> image = Encode(payload, p);
  for (uint64_t g = 0; g < 16; g++) BlockAt(image, IdrPhysicalBlock(g, 0, 16, p))[0] ^= 1;
  // Group 2 also loses two blocks; that is what gets reported for it.
  uint64_t lost[] = {IdrPhysicalBlock(2, 4, 16, p), IdrPhysicalBlock(2, 16, 16, p)};
  auto r = IdrDecode(image, payload.size(), p, lost);
  REQUIRE(r.status().IsCorruption());
  CHECK(r.status().message() ==
        "idr: 16 of 16 parity groups cannot be repaired: group 0 parity mismatch; group 1 parity mismatch; "
        "group 2 lost 2 blocks (physical 34, 130); group 3 parity mismatch; group 4 parity mismatch; "
        "group 5 parity mismatch; group 6 parity mismatch; group 7 parity mismatch; and 8 more");
  CHECK(IdrMismatchedGroups(image, p).size() == 16);
}

TEST_CASE("Idr: decode rejects inconsistent arguments", "[idr]") {
  IdrParams p{4};
  std::vector<uint8_t> payload = test::RandomBytes(100000, 51);
  std::vector<uint8_t> image = Encode(payload, p);
  auto r = IdrDecode(image, 200000, p, {});
  CHECK(r.status().code() == Status::Code::kInvalidArgument);
  r = IdrDecode(std::span<const uint8_t>(image).first(image.size() - 1), payload.size(), p, {});
  CHECK(r.status().code() == Status::Code::kInvalidArgument);
  r = IdrDecode({}, UINT64_MAX, p, {});  // IdrEncodedSize wraps to 0 here
  CHECK(r.status().code() == Status::Code::kInvalidArgument);
  uint64_t outside[] = {2 * kIdrGroupBlocks};
  r = IdrDecode(image, payload.size(), p, outside);
  CHECK(r.status().code() == Status::Code::kInvalidArgument);

  auto empty = IdrDecode({}, 0, p, {});
  REQUIRE(empty.ok());
  CHECK(empty->payload.empty());
}
