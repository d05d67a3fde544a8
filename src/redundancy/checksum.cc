#include "redundancy/checksum.h"

#include <blake3.h>
#include <openssl/evp.h>
#include <xxhash.h>

#include <fmt/format.h>

#include "util/coding.h"

namespace cairn {

Result<ChecksumType> ParseChecksum(std::string_view name) {
  if (name == "crc32c") return ChecksumType::kCrc32c;
  if (name == "xxh3") return ChecksumType::kXxh3;
  if (name == "sha256") return ChecksumType::kSha256;
  if (name == "blake3") return ChecksumType::kBlake3;
  return Status::InvalidArgument(fmt::format("checksum={} is not crc32c, xxh3, sha256 or blake3", name));
}

std::string_view ChecksumName(ChecksumType type) {
  switch (type) {
    case ChecksumType::kCrc32c: return "crc32c";
    case ChecksumType::kXxh3: return "xxh3";
    case ChecksumType::kSha256: return "sha256";
    case ChecksumType::kBlake3: return "blake3";
  }
  return "?";
}

size_t DigestSize(ChecksumType type) {
  switch (type) {
    case ChecksumType::kCrc32c: return 0;
    case ChecksumType::kXxh3: return 8;
    case ChecksumType::kSha256:
    case ChecksumType::kBlake3: return 32;
  }
  return 0;
}

Digest ComputeDigest(ChecksumType type, std::span<const uint8_t> data) {
  Digest digest{};
  if (type == ChecksumType::kXxh3) {
    PutFixed64(digest.data(), XXH3_64bits(data.data(), data.size()));
  } else if (type == ChecksumType::kSha256) {
    unsigned int length = 0;
    EVP_Digest(data.data(), data.size(), digest.data(), &length, EVP_sha256(), nullptr);
  } else if (type == ChecksumType::kBlake3) {
    blake3_hasher hasher;
    blake3_hasher_init(&hasher);
    blake3_hasher_update(&hasher, data.data(), data.size());
    blake3_hasher_finalize(&hasher, digest.data(), digest.size());
  }
  return digest;
}

}  // namespace cairn
