// On-disk format v3 (reads v2 too): the disk superblock and the self-describing extent header.
// Layouts, field widths and reader rules are documented in man/cairn-format.5.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "cairn/status.h"
#include "redundancy/checksum.h"

namespace cairn {

using ArchiveId = std::array<uint8_t, 16>;
std::string ArchiveIdToString(const ArchiveId& id);
Result<ArchiveId> ArchiveIdFromString(std::string_view text);
ArchiveId NewArchiveId();

constexpr uint32_t kFormatVersion = 3;        // written by this cairn
constexpr uint32_t kOldestFormatVersion = 2;  // the oldest it reads
// v3 adds to the extent header the whole extent's payload length and CRC and the length of
// the member table (backend/member_table.h) that ends the payload.
inline bool IsReadableFormat(uint32_t version) { return version >= kOldestFormatVersion && version <= kFormatVersion; }
constexpr uint64_t kBlockSize = 4096;  // allocation unit and superblock size
inline uint64_t RoundUpToBlock(uint64_t n) { return (n + kBlockSize - 1) / kBlockSize * kBlockSize; }

// --- Disk superblock: bytes [0, 4096) of every disk. -------------------------------
constexpr char kDiskMagic[8] = {'C', 'A', 'I', 'R', 'N', 'D', 'S', 'K'};
constexpr size_t kSuperblockEncodedSize = 52;

struct Superblock {
  uint32_t version = kFormatVersion;
  uint32_t disk_index = 0;
  ArchiveId archive_id{};
  uint64_t disk_size = 0;
  uint64_t data_start = kBlockSize;
};

std::array<uint8_t, kBlockSize> EncodeSuperblock(const Superblock& sb);
// `where` names the disk in error messages.
Result<Superblock> DecodeSuperblock(std::span<const uint8_t> block, const std::string& where);

// --- Extent header: precedes every extent's payload. --------------------------------
constexpr char kExtentMagic[8] = {'C', 'A', 'I', 'R', 'N', 'E', 'X', 'T'};
// The header fills one block, so payloads start block aligned; it holds 76 fixed bytes
// (92 from v3 on) and the policy stamp.
constexpr uint16_t kExtentHeaderSize = 4096;
// Fixed bytes of an extent header of format `version` (IsReadableFormat).
constexpr size_t ExtentHeaderFixedBytes(uint32_t version) { return version >= 3 ? 92 : 76; }
constexpr size_t kMaxPolicyStamp = kExtentHeaderSize - ExtentHeaderFixedBytes(kFormatVersion) - sizeof(Digest);

// Persisted values: never renumber.
enum class ExtentKind : uint8_t {
  kFileSegment = 1,  // one segment of one file: inode + file offset say which
  kPack = 2,         // several small files back to back; members are listed in the catalog
                     // (and, from v3 on, in the member table)
};

// How an extent's payload is spread over chunks, each stored as its own on-disk extent on
// its own disk. Persisted values: never renumber.
struct Redundancy {
  enum class Scheme : uint8_t {
    kNone = 0,         // one chunk: the payload
    kMirror = 1,       // 1 + parity_chunks identical copies
    kReedSolomon = 2,  // data_chunks slices + parity_chunks Cauchy RS parity (isa-l)
  };
  Scheme scheme = Scheme::kNone;
  uint8_t data_chunks = 1;
  uint8_t parity_chunks = 0;
  uint8_t idr_scramble = 0;  // 0: no intra-disk redundancy; else SPC 16+1 with this scrambling
  ChecksumType checksum = ChecksumType::kCrc32c;  // kept with each chunk besides its CRC32C
  size_t chunk_count() const { return scheme == Scheme::kMirror ? 1u + parity_chunks : data_chunks + parity_chunks; }
  // Bytes of payload each chunk carries (RS slices are padded to a multiple of 64).
  uint64_t ChunkLength(uint64_t payload_length) const;
  bool operator==(const Redundancy&) const = default;
};
constexpr uint8_t kMaxMirrorCopies = 8;  // mirror-2 .. mirror-8

// Corruption naming the field unless `r` is a scheme this build knows with its fields in
// range: none is 1 + 0 chunks, mirror 1 + 1..7, rs-K-M K 1..128 and M 1..32, idr_scramble
// 0..64, a known checksum. Then chunk_count() >= 1 and ChunkLength() cannot divide by zero.
Status CheckRedundancy(const Redundancy& r);

// The largest segment_size: a segment or a pack holds at most that much file data.
constexpr uint64_t kMaxSegmentSize = 1ull << 30;
// The largest payload an extent holds: that much data and, from v3 on, its member table
// (whose length is a u32).
constexpr uint64_t kMaxExtentPayload = kMaxSegmentSize + UINT32_MAX;

struct ExtentHeader {
  uint16_t version = kFormatVersion;
  ExtentKind kind = ExtentKind::kFileSegment;
  ArchiveId archive_id{};
  uint64_t extent_id = 0;
  uint64_t inode = 0;
  uint64_t file_offset = 0;
  uint64_t payload_length = 0;  // of this chunk, before intra-disk redundancy
  uint32_t payload_crc = 0;     // unmasked CRC32C of those bytes
  uint8_t chunk_index = 0;
  Redundancy redundancy;
  Digest digest{};  // of this chunk's bytes, per redundancy.checksum
  // The fully resolved policy the payload was written with ("raid=none ... plugins=none
  // policy=cold"), so the extent decodes after the policy definitions change.
  std::string policy_stamp;
  // v3: the whole extent's payload (all chunks joined) and its unmasked CRC32C, so a catalog
  // can be rebuilt from the chunks alone; and the length of the member table at the end of
  // that payload (0: none). v2 headers decode with the chunk's own length and CRC when the
  // chunk is the payload (no RS), else 0, and no member table.
  uint64_t extent_payload_length = 0;
  uint32_t extent_payload_crc = 0;
  uint32_t members_length = 0;
};

// REQUIRES: header.policy_stamp.size() <= kMaxPolicyStamp.
std::array<uint8_t, kExtentHeaderSize> EncodeExtentHeader(const ExtentHeader& header);
// Encodes format h.version (v2 when a v2 extent's chunk is rewritten, else v3).
// Checks magic, version, header checksum and that every field is in range (CheckExtentHeader).
// `where` names disk and offset in messages.
Result<ExtentHeader> DecodeExtentHeader(std::span<const uint8_t> bytes, const std::string& where);

// Corruption naming `where` and the field unless the decoded fields are in range: the
// redundancy (CheckRedundancy), chunk_index below its chunk_count(), payload_length and
// extent_payload_length at most kMaxExtentPayload.
Status CheckExtentHeader(const ExtentHeader& header, const std::string& where);

// Bytes a chunk occupies on its disk: header + payload (with its intra-disk parity when
// idr_scramble > 0), in whole blocks.
uint64_t ExtentAllocation(uint64_t payload_length, uint8_t idr_scramble = 0);

}  // namespace cairn
