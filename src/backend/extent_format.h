// On-disk format v2: the disk superblock and the self-describing extent header.
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

constexpr uint32_t kFormatVersion = 2;
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
// and the policy stamp.
constexpr uint16_t kExtentHeaderSize = 4096;
constexpr size_t kMaxPolicyStamp = kExtentHeaderSize - 76 - sizeof(Digest);

// Persisted values: never renumber.
enum class ExtentKind : uint8_t {
  kFileSegment = 1,  // one segment of one file: inode + file offset say which
  kPack = 2,         // several small files back to back; members are listed in the catalog
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

// The largest payload an extent holds: one segment or one pack, each at most the largest
// segment_size (1 GiB).
constexpr uint64_t kMaxExtentPayload = 1ull << 30;

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
};

// REQUIRES: header.policy_stamp.size() <= kMaxPolicyStamp.
std::array<uint8_t, kExtentHeaderSize> EncodeExtentHeader(const ExtentHeader& header);
// Checks magic, version, header checksum and that every field is in range (CheckExtentHeader).
// `where` names disk and offset in messages.
Result<ExtentHeader> DecodeExtentHeader(std::span<const uint8_t> bytes, const std::string& where);

// Corruption naming `where` and the field unless the decoded fields are in range: the
// redundancy (CheckRedundancy), chunk_index below its chunk_count(), payload_length at most
// kMaxExtentPayload.
Status CheckExtentHeader(const ExtentHeader& header, const std::string& where);

// Bytes a chunk occupies on its disk: header + payload (with its intra-disk parity when
// idr_scramble > 0), in whole blocks.
uint64_t ExtentAllocation(uint64_t payload_length, uint8_t idr_scramble = 0);

}  // namespace cairn
