// On-disk format v4 (reads v2 and v3 too): the disk superblock and the self-describing extent header.
// Layouts, field widths and reader rules are documented in man/cairn-format.5.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "cairn/status.h"
#include "codec/transform.h"
#include "codec/transform_chain.h"
#include "redundancy/redundancy.h"

namespace cairn {

using ArchiveId = std::array<uint8_t, 16>;
std::string ArchiveIdToString(const ArchiveId& id);
Result<ArchiveId> ArchiveIdFromString(std::string_view text);
ArchiveId NewArchiveId();

constexpr uint32_t kFormatVersion = 4;        // written by this cairn
constexpr uint32_t kOldestFormatVersion = 2;  // the oldest it reads
// v3 adds to the extent header the whole extent's payload length and CRC and the length of
// the member table (backend/member_table.h) that ends the payload.
// v4 adds the logical payload's length and the chain stamp of the transforms (codec/) that
// made the stored payload from it.
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
// (92 in v3, 102 from v4 on), the policy stamp and (v4) the chain stamp.
constexpr uint16_t kExtentHeaderSize = 4096;
// Fixed bytes of an extent header of format `version` (IsReadableFormat).
constexpr size_t ExtentHeaderFixedBytes(uint32_t version) { return version >= 4 ? 102 : version == 3 ? 92 : 76; }
constexpr size_t kMaxPolicyStamp =
    kExtentHeaderSize - ExtentHeaderFixedBytes(kFormatVersion) - sizeof(Digest) - kMaxChainStamp;

// Persisted values: never renumber.
enum class ExtentKind : uint8_t {
  kFileSegment = 1,  // one segment of one file: inode + file offset say which
  kPack = 2,         // several small files back to back; members are listed in the catalog
                     // (and, from v3 on, in the member table)
};

// The largest segment_size: a segment or a pack holds at most that much file data.
constexpr uint64_t kMaxSegmentSize = 1ull << 30;
// The largest logical payload an extent holds: that much data and, from v3 on, its member
// table (whose length is a u32).
constexpr uint64_t kMaxExtentPayload = kMaxSegmentSize + UINT32_MAX;
// The largest stored payload: what the transform chain may make of the largest logical one.
constexpr uint64_t kMaxStoredPayload = MaxStoredLength(kMaxExtentPayload);

struct ExtentHeader {
  uint16_t version = kFormatVersion;
  ExtentKind kind = ExtentKind::kFileSegment;
  ArchiveId archive_id{};
  uint64_t extent_id = 0;
  uint64_t inode = 0;
  uint64_t file_offset = 0;
  uint64_t payload_length = 0;  // of this chunk (stored bytes), before intra-disk redundancy
  uint32_t payload_crc = 0;     // unmasked CRC32C of those bytes
  uint8_t chunk_index = 0;
  Redundancy redundancy;
  Digest digest{};  // of this chunk's bytes, per redundancy.checksum
  // The fully resolved policy the payload was written with ("raid=none ... plugins=none
  // policy=cold"), so the extent decodes after the policy definitions change.
  std::string policy_stamp;
  // v3: the whole extent's stored payload (all chunks joined) and its unmasked CRC32C, so a
  // catalog can be rebuilt from the chunks alone; and the length of the member table at the
  // end of the logical payload (0: none). v2 headers decode with the chunk's own length and
  // CRC when the chunk is the payload (no RS), else 0, and no member table.
  uint64_t extent_payload_length = 0;
  uint32_t extent_payload_crc = 0;
  uint32_t members_length = 0;
  // v4: the logical payload's length and the transform chain that made the stored payload
  // from it (TransformChain::Stamp(), "" when none). v2 and v3 decode with no chain and
  // the logical length equal to extent_payload_length.
  uint64_t logical_length = 0;
  std::string chain_stamp;
};

// REQUIRES: header.policy_stamp.size() <= kMaxPolicyStamp, header.chain_stamp.size() <=
// kMaxChainStamp. Encodes format h.version (that of the extent when one of its chunks is
// rewritten, else v4).
std::array<uint8_t, kExtentHeaderSize> EncodeExtentHeader(const ExtentHeader& header);
// Checks magic, version, header checksum and that every field is in range (CheckExtentHeader).
// `where` names disk and offset in messages.
Result<ExtentHeader> DecodeExtentHeader(std::span<const uint8_t> bytes, const std::string& where);

// Corruption naming `where` and the field unless the decoded fields are in range: the
// redundancy (CheckRedundancy), chunk_index below its chunk_count(), payload_length and
// extent_payload_length at most kMaxStoredPayload, logical_length at most
// kMaxExtentPayload, and a stored payload the chain could have made of the logical one
// (the same length when there is no chain).
Status CheckExtentHeader(const ExtentHeader& header, const std::string& where);

// Corruption starting with `what` unless a stored payload of `stored_length` bytes can be
// what the transform chain `chain_stamp` made of `logical_length` bytes: the same length
// without a chain, within MaxStoredLength() per transform with one.
Status CheckStoredLength(uint64_t stored_length, uint64_t logical_length, std::string_view chain_stamp,
                         std::string_view what);

// Bytes a chunk occupies on its disk: header + payload (with its intra-disk parity when
// idr_scramble > 0), in whole blocks.
uint64_t ExtentAllocation(uint64_t payload_length, uint8_t idr_scramble = 0);

}  // namespace cairn
