#include "redundancy/striping.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>

#include <fmt/format.h>

#include "redundancy/erasure_code.h"
#include "redundancy/intra_disk.h"

namespace cairn {
namespace {

// One ErasureCode per (k, m), built on first use and kept: its decode tables are a cache.
const ErasureCode& CodeFor(int k, int m) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, std::unique_ptr<ErasureCode>> codes;
  std::lock_guard lock(mutex);
  auto& code = codes[{k, m}];
  if (!code) code = std::move(*ErasureCode::Create(k, m));  // k, m were validated by ParseRedundancy
  return *code;
}

bool ParseNumbers(std::string_view text, std::initializer_list<uint64_t*> out) {
  for (uint64_t* n : out) {
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *n);
    if (ec != std::errc()) return false;
    text.remove_prefix(static_cast<size_t>(ptr - text.data()));
    if (!text.empty() && text[0] == '-') text.remove_prefix(1);
  }
  return text.empty();
}

}  // namespace

Result<Redundancy> ParseRedundancy(std::string_view raid, std::string_view idr, std::string_view checksum) {
  Redundancy r;
  uint64_t a = 0, b = 0;
  if (raid == "none") {
  } else if (raid == "2d") {
    r.scheme = Redundancy::Scheme::kTwoDimensional;
  } else if (raid.starts_with("mirror-") && ParseNumbers(raid.substr(7), {&a}) && a >= 2 && a <= kMaxMirrorCopies) {
    r.scheme = Redundancy::Scheme::kMirror;
    r.parity_chunks = static_cast<uint8_t>(a - 1);
  } else if (raid.starts_with("rs-") && ParseNumbers(raid.substr(3), {&a, &b}) && a >= 1 &&
             a <= ErasureCode::kMaxDataChunks && b >= 1 && b <= ErasureCode::kMaxParityChunks) {
    r.scheme = Redundancy::Scheme::kReedSolomon;
    r.data_chunks = static_cast<uint8_t>(a);
    r.parity_chunks = static_cast<uint8_t>(b);
  } else {
    return Status::InvalidArgument(fmt::format("raid={} is not none, mirror-N, rs-K-M or 2d", raid));
  }
  auto params = ParseIdr(idr);
  if (!params.ok()) return params.status();
  if (*params) r.idr_scramble = static_cast<uint8_t>((*params)->scramble);
  auto type = ParseChecksum(checksum);
  if (!type.ok()) return type.status();
  r.checksum = *type;
  return r;
}

std::vector<std::vector<uint8_t>> MakeChunks(std::span<const uint8_t> payload, const Redundancy& r) {
  if (r.scheme != Redundancy::Scheme::kReedSolomon) {
    return std::vector<std::vector<uint8_t>>(r.chunk_count(), std::vector<uint8_t>(payload.begin(), payload.end()));
  }
  uint64_t length = r.ChunkLength(payload.size());
  std::vector<std::vector<uint8_t>> chunks(r.chunk_count(), std::vector<uint8_t>(length, 0));
  for (size_t i = 0; i < r.data_chunks; i++) {
    uint64_t start = std::min<uint64_t>(i * length, payload.size());
    uint64_t n = std::min<uint64_t>(length, payload.size() - start);
    if (n > 0) std::memcpy(chunks[i].data(), payload.data() + start, n);
  }
  std::vector<const uint8_t*> data;
  std::vector<uint8_t*> parity;
  for (size_t i = 0; i < chunks.size(); i++) {
    if (i < r.data_chunks) data.push_back(chunks[i].data());
    else parity.push_back(chunks[i].data());
  }
  CodeFor(r.data_chunks, r.parity_chunks).Encode(length, data.data(), parity.data());
  return chunks;
}

Status RebuildChunks(ChunkSet& chunks, const Redundancy& r, uint64_t payload_length, std::span<const size_t> wanted) {
  size_t alive = std::count_if(chunks.begin(), chunks.end(), [](const auto& c) { return c.has_value(); });
  if (chunks.size() != r.chunk_count() || alive < ChunksNeeded(r)) {
    return Status::Corruption(fmt::format("only {} of {} chunks are readable; {} are needed", alive, chunks.size(),
                                          ChunksNeeded(r)));
  }
  for (size_t i : wanted) {
    if (i >= chunks.size()) return Status::InvalidArgument(fmt::format("there is no chunk {}", i));
  }
  if (r.scheme != Redundancy::Scheme::kReedSolomon) {
    const auto& copy = *std::find_if(chunks.begin(), chunks.end(), [](const auto& c) { return c.has_value(); });
    for (size_t i : wanted) {
      if (!chunks[i]) chunks[i] = copy;
    }
    return Status::OK();
  }
  // The decoder reads the first k present chunks: every absent chunk before the k-th present
  // one is rebuilt too (it would otherwise be taken as a source), later ones only if wanted.
  uint64_t length = r.ChunkLength(payload_length);
  std::vector<bool> erase(chunks.size());
  for (size_t i = 0, present = 0; i < chunks.size() && present < r.data_chunks; i++) {
    if (chunks[i]) present++;
    else erase[i] = true;
  }
  for (size_t i : wanted) erase[i] = !chunks[i];
  std::vector<int> erased;
  std::vector<uint8_t*> pointers(chunks.size(), nullptr);
  for (size_t i = 0; i < chunks.size(); i++) {
    if (erase[i]) {
      erased.push_back(static_cast<int>(i));
      chunks[i].emplace(length);
    }
    if (chunks[i]) pointers[i] = chunks[i]->data();
  }
  return CodeFor(r.data_chunks, r.parity_chunks).Reconstruct(length, pointers.data(), erased);
}

Result<std::vector<uint8_t>> JoinChunks(ChunkSet& chunks, const Redundancy& r, uint64_t payload_length) {
  std::vector<size_t> data(r.data_chunks);
  std::iota(data.begin(), data.end(), size_t{0});
  CAIRN_RETURN_IF_ERROR(RebuildChunks(chunks, r, payload_length, data));
  if (r.scheme != Redundancy::Scheme::kReedSolomon) {  // a whole copy: no need to copy it again
    std::vector<uint8_t> copy = std::move(*chunks[0]);
    chunks[0]->clear();
    copy.resize(payload_length);
    return copy;
  }
  uint64_t length = r.ChunkLength(payload_length);
  std::vector<uint8_t> payload(payload_length);
  for (size_t i = 0; i < r.data_chunks; i++) {
    uint64_t start = std::min<uint64_t>(i * length, payload_length);
    uint64_t n = std::min<uint64_t>(length, payload_length - start);
    if (n > 0) std::memcpy(payload.data() + start, chunks[i]->data(), n);
  }
  return payload;
}

}  // namespace cairn
