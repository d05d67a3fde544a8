// Bounded fuzzer of the extent header parser: mutated valid headers (most with their
// checksum fixed up, so the field checks behind it are reached) and random blocks. Every
// input is refused with a Corruption/NotSupported naming where it was, or accepted with
// every field in range (so nothing downstream divides by or allocates from garbage) and
// re-encodes to a header that decodes to the same fields.
#include <catch2/catch.hpp>

#include <array>
#include <vector>

#include <fmt/format.h>

#include "backend/extent_format.h"
#include "fuzz.h"
#include "redundancy/striping.h"
#include "util/coding.h"

using namespace cairn;

namespace {

constexpr int kInputs = 20000;

std::vector<std::vector<uint8_t>> ValidHeaders() {
  struct Seed {
    const char* raid;
    const char* idr;
    const char* checksum;
    ExtentKind kind;
    uint64_t payload;
    size_t stamp;
  };
  const Seed seeds[] = {
      {"none", "none", "crc32c", ExtentKind::kFileSegment, 4 << 20, 60},
      {"mirror-3", "spc-16-1-s8", "xxh3", ExtentKind::kFileSegment, 1, 120},
      {"rs-4-2", "none", "sha256", ExtentKind::kFileSegment, 1 << 30, 0},
      {"rs-128-32", "spc-16-1", "blake3", ExtentKind::kPack, 65536, kMaxPolicyStamp},
      {"rs-1-1", "none", "crc32c", ExtentKind::kPack, 0, 7},
  };
  std::vector<std::vector<uint8_t>> out;
  for (const Seed& s : seeds) {
    ExtentHeader h;
    h.kind = s.kind;
    h.archive_id = ArchiveId{9, 8, 7, 6, 5, 4, 3, 2, 1};
    h.extent_id = 1234567;
    h.inode = 42;
    h.file_offset = 8 << 20;
    h.payload_length = s.payload;
    h.payload_crc = 0xdeadbeef;
    h.redundancy = *ParseRedundancy(s.raid, s.idr, s.checksum);
    h.chunk_index = static_cast<uint8_t>(h.redundancy.chunk_count() - 1);
    h.digest.fill(0x5a);
    h.policy_stamp = std::string(s.stamp, 'p');
    // Every other seed has a transform chain, which shrank the stored payload.
    h.extent_payload_length = s.payload;
    h.logical_length = out.size() % 2 ? s.payload : 2 * s.payload;
    h.chain_stamp = out.size() % 2 ? "" : "zstd@1 aes-256-gcm@3";
    auto bytes = EncodeExtentHeader(h);
    out.emplace_back(bytes.begin(), bytes.end());
  }
  return out;
}

// Makes header_len and the header checksum agree with the (mutated) version, stamp and
// chain lengths and checksum type, as a writer would have: the decoder then judges the
// fields themselves.
void FixUp(std::vector<uint8_t>& bytes, bool fix_length) {
  if (bytes.size() < kExtentHeaderSize) return;
  uint16_t version = GetFixed16(&bytes[8]);
  size_t fixed = ExtentHeaderFixedBytes(IsReadableFormat(version) ? version : 2);
  size_t stamp_len = GetFixed16(&bytes[68]);
  uint8_t checksum = bytes[12] >> 4;
  size_t digest_len = checksum <= static_cast<uint8_t>(kLastChecksumType) ? DigestSize(ChecksumType{checksum}) : 0;
  if (stamp_len > kMaxPolicyStamp) return;
  size_t chain_len =
      version >= 4 && IsReadableFormat(version) ? GetFixed16(&bytes[72 + stamp_len + digest_len + 24]) : 0;
  if (chain_len > kMaxChainStamp) return;
  size_t header_len = fixed + stamp_len + digest_len + chain_len;
  if (fix_length) PutFixed16(&bytes[10], static_cast<uint16_t>(header_len));
  size_t end = header_len - 4;
  PutFixed32(&bytes[end], MaskCrc(Crc32c({bytes.data(), end})));
}

// Overwrites a few of the fixed fields, the redundancy and length bytes most of all.
void PokeFields(std::vector<uint8_t>& bytes, test::Fuzz& fuzz) {
  static constexpr size_t kHot[] = {8, 9, 10, 11, 12, 13, 14, 15, 56, 57, 58, 59, 60, 61, 62, 63, 68, 69, 70, 71};
  for (uint64_t n = 1 + fuzz.Uniform(4); n > 0; n--) {
    size_t at = kHot[fuzz.Uniform(std::size(kHot))];
    if (at < bytes.size()) bytes[at] = static_cast<uint8_t>(fuzz.Uniform(3) == 0 ? fuzz.Uniform(256) : fuzz.Uniform(4));
  }
}

void ExpectSameFields(const ExtentHeader& a, const ExtentHeader& b) {
  CHECK(a.version == b.version);
  CHECK(a.kind == b.kind);
  CHECK(a.archive_id == b.archive_id);
  CHECK(a.extent_id == b.extent_id);
  CHECK(a.inode == b.inode);
  CHECK(a.file_offset == b.file_offset);
  CHECK(a.payload_length == b.payload_length);
  CHECK(a.payload_crc == b.payload_crc);
  CHECK(a.chunk_index == b.chunk_index);
  CHECK(a.redundancy == b.redundancy);
  CHECK(std::equal(a.digest.begin(), a.digest.begin() + DigestSize(a.redundancy.checksum), b.digest.begin()));
  CHECK(a.policy_stamp == b.policy_stamp);
  CHECK(a.extent_payload_length == b.extent_payload_length);
  CHECK(a.extent_payload_crc == b.extent_payload_crc);
  CHECK(a.members_length == b.members_length);
  CHECK(a.logical_length == b.logical_length);
  CHECK(a.chain_stamp == b.chain_stamp);
}

}  // namespace

TEST_CASE("Fuzz: the extent header parser refuses clearly or accepts only fields in range", "[fuzz]") {
  test::Fuzz fuzz("extent header", kInputs);
  const auto valid = ValidHeaders();
  uint64_t accepted = 0, past_checksum = 0;
  while (fuzz.Next()) {
    std::vector<uint8_t> bytes;
    if (fuzz.Uniform(8) == 0) {  // random block, with the magic half of the time
      bytes.resize(kExtentHeaderSize);
      for (auto& b : bytes) b = static_cast<uint8_t>(fuzz.Uniform(256));
      if (fuzz.Uniform(2)) std::copy(kExtentMagic, kExtentMagic + 8, bytes.begin());
    } else {
      bytes = valid[fuzz.Uniform(valid.size())];
      if (fuzz.Uniform(2)) PokeFields(bytes, fuzz);
      else fuzz.Mutate(bytes);  // anywhere: shifts, splices and runs change the length too
    }
    if (fuzz.Uniform(4) != 0) FixUp(bytes, fuzz.Uniform(2));
    auto header = DecodeExtentHeader(bytes, "fuzz-disk offset 4096");
    if (!header.ok()) {
      const Status& st = header.status();
      INFO(st.ToString());
      CHECK((st.IsCorruption() || st.code() == Status::Code::kNotSupported));
      CHECK(st.message().starts_with("fuzz-disk offset 4096: "));
      past_checksum += st.message().find("checksum mismatch") == std::string::npos;
      continue;
    }
    accepted++;
    const Redundancy& r = header->redundancy;
    INFO(fmt::format("input {}: scheme {} data {} parity {} idr {} checksum {} chunk {} payload {}",
                     fuzz.iterations(), static_cast<int>(r.scheme), r.data_chunks, r.parity_chunks, r.idr_scramble,
                     static_cast<int>(r.checksum), header->chunk_index, header->payload_length));
    REQUIRE(CheckRedundancy(r).ok());
    REQUIRE(r.chunk_count() >= 1);
    REQUIRE(ChunksNeeded(r) >= 1);
    REQUIRE(ChunksNeeded(r) <= r.chunk_count());
    REQUIRE(header->chunk_index < r.chunk_count());
    REQUIRE(header->payload_length <= kMaxStoredPayload);
    REQUIRE(header->extent_payload_length <= kMaxStoredPayload);
    REQUIRE(header->logical_length <= kMaxExtentPayload);
    REQUIRE(header->members_length <= header->logical_length);
    REQUIRE(CheckStoredLength(header->extent_payload_length, header->logical_length, header->chain_stamp, "").ok());
    REQUIRE(header->policy_stamp.size() <= kMaxPolicyStamp);
    uint64_t chunk = r.ChunkLength(header->payload_length);  // divides by data_chunks for rs
    CHECK(chunk <= header->payload_length + 63);
    CHECK(chunk * ChunksNeeded(r) >= header->payload_length);
    auto again = DecodeExtentHeader(EncodeExtentHeader(*header), "again");
    REQUIRE(again.ok());
    ExpectSameFields(*header, *again);
  }
  // Enough inputs reach the field checks behind the header checksum, and some pass them.
  CHECK(past_checksum > fuzz.iterations() / 4);
  CHECK(accepted > fuzz.iterations() / 50);
}
