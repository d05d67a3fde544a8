#include "backend/extent_format.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <tuple>

#include <fmt/format.h>

#include "redundancy/intra_disk.h"
#include "util/coding.h"

namespace cairn {

std::string ArchiveIdToString(const ArchiveId& id) {
  std::string out;
  for (uint8_t b : id) out += fmt::format("{:02x}", b);
  return out;
}

Result<ArchiveId> ArchiveIdFromString(std::string_view text) {
  ArchiveId id{};
  if (text.size() != 32) {
    return Status::InvalidArgument(fmt::format("archive id '{}' must be 32 hex digits", text));
  }
  for (size_t i = 0; i < 16; i++) {
    unsigned value = 0;
    for (size_t j = 0; j < 2; j++) {
      char c = text[2 * i + j];
      int digit = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
      if (digit < 0) return Status::InvalidArgument(fmt::format("archive id '{}' is not lowercase hex", text));
      value = value * 16 + static_cast<unsigned>(digit);
    }
    id[i] = static_cast<uint8_t>(value);
  }
  return id;
}

ArchiveId NewArchiveId() {
  ArchiveId id{};
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  bool filled = fd >= 0 && ::read(fd, id.data(), id.size()) == static_cast<ssize_t>(id.size());
  if (fd >= 0) ::close(fd);
  if (!filled) {
    std::random_device rd;
    for (auto& b : id) b = static_cast<uint8_t>(rd());
  }
  return id;
}

// Superblock layout (little-endian):
//   0 magic[8] | 8 u32 version | 12 u32 disk_index | 16 archive_id[16] | 32 u64 disk_size
//   40 u64 data_start | 48 u32 masked crc32c of bytes [0, 48)
std::array<uint8_t, kBlockSize> EncodeSuperblock(const Superblock& sb) {
  std::array<uint8_t, kBlockSize> block{};
  std::memcpy(block.data(), kDiskMagic, 8);
  PutFixed32(&block[8], sb.version);
  PutFixed32(&block[12], sb.disk_index);
  std::memcpy(&block[16], sb.archive_id.data(), 16);
  PutFixed64(&block[32], sb.disk_size);
  PutFixed64(&block[40], sb.data_start);
  PutFixed32(&block[48], MaskCrc(Crc32c({block.data(), 48})));
  return block;
}

Result<Superblock> DecodeSuperblock(std::span<const uint8_t> block, const std::string& where) {
  if (block.size() < kSuperblockEncodedSize) {
    return Status::Corruption(fmt::format("{}: superblock truncated ({} bytes)", where, block.size()));
  }
  if (std::memcmp(block.data(), kDiskMagic, 8) != 0) {
    return Status::Corruption(fmt::format("{}: not a cairn disk (no CAIRNDSK magic at offset 0)", where));
  }
  uint32_t stored = UnmaskCrc(GetFixed32(&block[48]));
  uint32_t actual = Crc32c(block.first(48));
  if (stored != actual) {
    return Status::Corruption(
        fmt::format("{}: superblock checksum mismatch (want={:08x} have={:08x})", where, stored, actual));
  }
  Superblock sb;
  sb.version = GetFixed32(&block[8]);
  if (!IsReadableFormat(sb.version)) {
    return Status::NotSupported(
        fmt::format("{}: disk format version {} is not supported (this cairn reads versions {} to {})", where,
                    sb.version, kOldestFormatVersion, kFormatVersion));
  }
  sb.disk_index = GetFixed32(&block[12]);
  std::memcpy(sb.archive_id.data(), &block[16], 16);
  sb.disk_size = GetFixed64(&block[32]);
  sb.data_start = GetFixed64(&block[40]);
  if (sb.data_start < kBlockSize || sb.data_start % kBlockSize != 0 || sb.data_start > sb.disk_size) {
    return Status::Corruption(fmt::format("{}: superblock data_start {} is not a block boundary within the disk "
                                          "({} bytes)",
                                          where, sb.data_start, sb.disk_size));
  }
  return sb;
}

// Extent header layout (little-endian), one 4096-byte block:
//   0 magic[8] | 8 u16 version | 10 u16 header_len (fixed + stamp_len + digest_len + chain_len;
//   fixed is 76 in v2, 92 in v3, 102 in v4)
//   12 u8 kind (bits 0-3) and checksum type (bits 4-7)
//   13 u8 chunk_index | 14 u8 scheme | 15 u8 data_chunks
//   16 archive_id[16] | 32 u64 extent_id | 40 u64 inode | 48 u64 file_offset
//   56 u64 payload_length | 64 u32 masked crc32c(payload) | 68 u16 stamp_len
//   70 u8 parity_chunks | 71 u8 idr_scramble
//   72 policy stamp[stamp_len] | digest[digest_len] (0, 8 or 32 bytes by checksum type)
//   v3 on: u64 extent_payload_length | u32 masked extent_payload_crc | u32 members_length
//   v4 on: u64 logical_length | u16 chain_len | chain stamp[chain_len]
//   then u32 masked crc32c of every byte before it | zeros
std::array<uint8_t, kExtentHeaderSize> EncodeExtentHeader(const ExtentHeader& h) {
  std::array<uint8_t, kExtentHeaderSize> out{};
  size_t fixed = ExtentHeaderFixedBytes(h.version);
  size_t digest_len = DigestSize(h.redundancy.checksum);
  size_t chain_len = h.version >= 4 ? std::min(h.chain_stamp.size(), kMaxChainStamp) : 0;
  size_t stamp_len = std::min(h.policy_stamp.size(), kExtentHeaderSize - fixed - digest_len - chain_len);
  std::memcpy(out.data(), kExtentMagic, 8);
  PutFixed16(&out[8], h.version);
  PutFixed16(&out[10], static_cast<uint16_t>(fixed + stamp_len + digest_len + chain_len));
  out[12] = static_cast<uint8_t>(static_cast<uint8_t>(h.kind) | static_cast<uint8_t>(h.redundancy.checksum) << 4);
  out[13] = h.chunk_index;
  out[14] = static_cast<uint8_t>(h.redundancy.scheme);
  out[15] = h.redundancy.data_chunks;
  out[70] = h.redundancy.parity_chunks;
  out[71] = h.redundancy.idr_scramble;
  std::memcpy(&out[16], h.archive_id.data(), 16);
  PutFixed64(&out[32], h.extent_id);
  PutFixed64(&out[40], h.inode);
  PutFixed64(&out[48], h.file_offset);
  PutFixed64(&out[56], h.payload_length);
  PutFixed32(&out[64], MaskCrc(h.payload_crc));
  PutFixed16(&out[68], static_cast<uint16_t>(stamp_len));
  std::memcpy(&out[72], h.policy_stamp.data(), stamp_len);
  size_t end = 72 + stamp_len;
  std::memcpy(&out[end], h.digest.data(), digest_len);
  end += digest_len;
  if (h.version >= 3) {
    PutFixed64(&out[end], h.extent_payload_length);
    PutFixed32(&out[end + 8], MaskCrc(h.extent_payload_crc));
    PutFixed32(&out[end + 12], h.members_length);
    end += 16;
  }
  if (h.version >= 4) {
    PutFixed64(&out[end], h.logical_length);
    PutFixed16(&out[end + 8], static_cast<uint16_t>(chain_len));
    std::memcpy(&out[end + 10], h.chain_stamp.data(), chain_len);
    end += 10 + chain_len;
  }
  PutFixed32(&out[end], MaskCrc(Crc32c({out.data(), end})));
  return out;
}

Result<ExtentHeader> DecodeExtentHeader(std::span<const uint8_t> bytes, const std::string& where) {
  if (bytes.size() < kExtentHeaderSize) {
    return Status::Corruption(
        fmt::format("{}: extent header truncated: {} of {} bytes", where, bytes.size(), kExtentHeaderSize));
  }
  if (std::all_of(bytes.begin(), bytes.begin() + 76, [](uint8_t b) { return b == 0; })) {
    return Status::Corruption(fmt::format("{}: no extent here (all-zero header)", where));
  }
  if (std::memcmp(bytes.data(), kExtentMagic, 8) != 0) {
    return Status::Corruption(fmt::format("{}: bad extent magic (want CAIRNEXT)", where));
  }
  uint16_t version = GetFixed16(&bytes[8]);
  if (!IsReadableFormat(version)) {
    return Status::NotSupported(fmt::format("{}: extent format version {} is not supported (this cairn reads {} to {})",
                                            where, version, kOldestFormatVersion, kFormatVersion));
  }
  size_t fixed = ExtentHeaderFixedBytes(version);
  uint16_t header_len = GetFixed16(&bytes[10]);
  uint16_t stamp_len = GetFixed16(&bytes[68]);
  uint8_t checksum = bytes[12] >> 4;
  size_t digest_len = checksum <= static_cast<uint8_t>(kLastChecksumType)
                          ? DigestSize(static_cast<ChecksumType>(checksum)) : 0;
  // The chain stamp's length sits 24 bytes after the policy stamp and the digest (v4).
  size_t chain_len = version >= 4 && fixed + stamp_len + digest_len <= kExtentHeaderSize
                         ? GetFixed16(&bytes[72 + stamp_len + digest_len + 24]) : 0;
  if (fixed + stamp_len + digest_len + chain_len > kExtentHeaderSize ||
      header_len != fixed + stamp_len + digest_len + chain_len) {
    return Status::Corruption(
        fmt::format("{}: extent header length {} does not fit its policy stamp of {} bytes", where, header_len,
                    stamp_len));
  }
  size_t end = header_len - 4;
  uint32_t stored = UnmaskCrc(GetFixed32(&bytes[end]));
  uint32_t actual = Crc32c(bytes.first(end));
  if (stored != actual) {
    return Status::Corruption(
        fmt::format("{}: extent header checksum mismatch (want={:08x} have={:08x})", where, stored, actual));
  }
  ExtentHeader h;
  h.version = version;
  uint8_t kind = bytes[12] & 0x0f;
  if (checksum > static_cast<uint8_t>(kLastChecksumType)) {
    return Status::Corruption(fmt::format("{}: unknown checksum type {}", where, checksum));
  }
  if (kind != static_cast<uint8_t>(ExtentKind::kFileSegment) && kind != static_cast<uint8_t>(ExtentKind::kPack)) {
    return Status::Corruption(fmt::format("{}: unknown extent kind {}", where, kind));
  }
  h.kind = static_cast<ExtentKind>(kind);
  std::memcpy(h.archive_id.data(), &bytes[16], 16);
  h.extent_id = GetFixed64(&bytes[32]);
  h.inode = GetFixed64(&bytes[40]);
  h.file_offset = GetFixed64(&bytes[48]);
  h.payload_length = GetFixed64(&bytes[56]);
  h.payload_crc = UnmaskCrc(GetFixed32(&bytes[64]));
  h.chunk_index = bytes[13];
  // 2d (scheme 3) came with lonestar groups, in version 4 headers.
  auto last_scheme = version >= 4 ? Redundancy::Scheme::kTwoDimensional : Redundancy::Scheme::kReedSolomon;
  if (bytes[14] > static_cast<uint8_t>(last_scheme)) {
    return Status::Corruption(fmt::format("{}: unknown redundancy scheme {}", where, bytes[14]));
  }
  h.redundancy.scheme = static_cast<Redundancy::Scheme>(bytes[14]);
  h.redundancy.data_chunks = bytes[15];
  h.redundancy.parity_chunks = bytes[70];
  h.redundancy.idr_scramble = bytes[71];
  h.policy_stamp.assign(reinterpret_cast<const char*>(&bytes[72]), stamp_len);
  h.redundancy.checksum = static_cast<ChecksumType>(checksum);
  std::memcpy(h.digest.data(), &bytes[72 + stamp_len], digest_len);
  size_t at = 72 + stamp_len + digest_len;
  if (version == 2) {
    if (h.redundancy.scheme != Redundancy::Scheme::kReedSolomon) {
      h.extent_payload_length = h.payload_length;
      h.extent_payload_crc = h.payload_crc;
    }
  } else {
    h.extent_payload_length = GetFixed64(&bytes[at]);
    h.extent_payload_crc = UnmaskCrc(GetFixed32(&bytes[at + 8]));
    h.members_length = GetFixed32(&bytes[at + 12]);
  }
  h.logical_length = h.extent_payload_length;
  if (version >= 4) {
    h.logical_length = GetFixed64(&bytes[at + 16]);
    h.chain_stamp.assign(reinterpret_cast<const char*>(&bytes[at + 26]), chain_len);
    auto bad = std::find_if(h.chain_stamp.begin(), h.chain_stamp.end(), [](char c) { return c < 0x20 || c > 0x7e; });
    if (bad != h.chain_stamp.end()) {
      return Status::Corruption(fmt::format("{}: chain stamp has byte 0x{:02x} (printable ASCII only)", where,
                                            static_cast<uint8_t>(*bad)));
    }
  }
  if (h.members_length > h.logical_length) {
    return Status::Corruption(fmt::format("{}: member table of {} bytes is longer than the {}-byte payload", where,
                                          h.members_length, h.logical_length));
  }
  CAIRN_RETURN_IF_ERROR(CheckExtentHeader(h, where));
  return h;
}

Status CheckExtentHeader(const ExtentHeader& h, const std::string& where) {
  Status redundancy = CheckRedundancy(h.redundancy);
  if (!redundancy.ok()) return Status::Corruption(fmt::format("{}: extent header: {}", where, redundancy.message()));
  if (h.chunk_index >= h.redundancy.chunk_count()) {
    return Status::Corruption(fmt::format("{}: extent header: chunk_index {} but the redundancy has {} chunks", where,
                                          h.chunk_index, h.redundancy.chunk_count()));
  }
  for (auto [field, length, maximum] : {std::tuple{"payload_length", h.payload_length, kMaxStoredPayload},
                                       std::tuple{"extent_payload_length", h.extent_payload_length, kMaxStoredPayload},
                                       std::tuple{"logical_length", h.logical_length, kMaxExtentPayload}}) {
    if (length > maximum) {
      return Status::Corruption(fmt::format("{}: extent header: {} {} is above the maximum of {}", where, field,
                                            length, maximum));
    }
  }
  return CheckStoredLength(h.extent_payload_length, h.logical_length, h.chain_stamp,
                           fmt::format("{}: extent header", where));
}

Status CheckStoredLength(uint64_t stored_length, uint64_t logical_length, std::string_view chain_stamp,
                         std::string_view what) {
  uint64_t most = logical_length;
  if (!chain_stamp.empty()) {
    size_t stages = std::count(chain_stamp.begin(), chain_stamp.end(), ' ') + 1;
    for (; stages > 0 && most < stored_length; stages--) {  // stops before it could overflow
      most = MaxStoredLength(most);
    }
  }
  if (chain_stamp.empty() ? stored_length != logical_length : stored_length > most) {
    return Status::Corruption(fmt::format("{}: a stored payload of {} bytes cannot hold a logical one of {} bytes {}",
                                          what, stored_length, logical_length,
                                          chain_stamp.empty() ? std::string("without a transform chain")
                                                              : fmt::format("through the chain '{}'", chain_stamp)));
  }
  return Status::OK();
}

uint64_t ExtentAllocation(uint64_t payload_length, uint8_t idr_scramble) {
  uint64_t stored = idr_scramble == 0 ? payload_length : IdrEncodedSize(payload_length);
  return RoundUpToBlock(kExtentHeaderSize + stored);
}

}  // namespace cairn
