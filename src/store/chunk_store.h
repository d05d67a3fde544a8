// ChunkStore keeps the chunks of extents on one device or service: it reserves room for a
// chunk, writes, reads and verifies it, and frees it, naming it by an opaque ChunkLocator.
// Nothing above a store touches its allocator or a disk offset. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/extent_format.h"
#include "backend/extent_io.h"
#include "cairn/status.h"
#include "store/chunk_locator.h"

namespace cairn {

// A chunk the catalog places in a store: which extent's, and where.
struct PlacedChunk {
  uint64_t extent_id = 0;
  ChunkLocator locator;
};

class ChunkStore {
 public:
  virtual ~ChunkStore() = default;

  // Names the store in messages ("disk 3").
  virtual const std::string& name() const = 0;

  // Reserves room for a chunk of `chunk_length` bytes stored with intra-disk parity
  // `idr_scramble` (0: none); nullopt when the store has no room for it. The reservation
  // is the caller's until it is committed to the catalog or handed back with Release.
  virtual std::optional<ChunkLocator> Reserve(uint64_t chunk_length, uint8_t idr_scramble) = 0;
  // Marks the room of a committed chunk as used (the space map is rebuilt from the catalog
  // at open). Corruption when it overlaps another chunk or lies outside the store.
  virtual Status MarkUsed(const ChunkLocator& chunk) = 0;
  // Returns the room of a chunk that was never committed.
  virtual Status Release(const ChunkLocator& chunk) = 0;
  // Returns the room of a chunk whose deletion is durable and lets the device reclaim it.
  // An error after the room was returned (a failed discard) leaves the room free.
  virtual Status Free(const ChunkLocator& chunk) = 0;
  virtual uint64_t free_bytes() const = 0;
  // Of free_bytes(), what chunks taking `allocation` bytes each can use (a free range too
  // small for one holds none), and how many free ranges there are.
  virtual uint64_t free_bytes_in(uint64_t allocation) const = 0;
  virtual size_t free_ranges() const = 0;
  virtual uint64_t capacity() const = 0;

  // Writes a chunk (header and payload) into its reserved room, without syncing.
  virtual Status Write(const ChunkLocator& chunk, const ExtentHeader& header, std::span<const uint8_t> payload) = 0;
  // Writes a committed chunk again where it is, with the bytes it held (a repair), without
  // syncing: redundancy below the store, if any, already agrees with them.
  virtual Status Rewrite(const ChunkLocator& chunk, const ExtentHeader& header, std::span<const uint8_t> payload) = 0;
  // Reads and verifies a chunk against what the catalog says it holds (see ReadExtent in
  // backend/extent_io.h for *repaired and *header). A chunk that reads wrong and that
  // redundancy below the store rebuilds counts as repaired too (the caller rewrites it).
  virtual Result<std::vector<uint8_t>> Read(const ChunkLocator& chunk, const ExtentExpectation& expect,
                                            std::vector<uint64_t>* repaired = nullptr,
                                            ExtentHeader* header = nullptr) = 0;
  // The chunk's header alone, checked for itself (not against the catalog).
  virtual Result<ExtentHeader> ReadHeader(const ChunkLocator& chunk) = 0;
  // A hint that the chunk will not be read again soon (a scrub, rebuild or fsck streams
  // through the store): its cached copy can go.
  virtual void DropCached(const ChunkLocator& /*chunk*/) {}
  // Makes every write so far durable.
  virtual Status Sync() = 0;

  // Where byte `payload_offset` of the chunk's payload lies, for people ("disk3@1052672").
  virtual std::string Describe(const ChunkLocator& chunk, uint64_t payload_offset) const = 0;
  // Where the chunk (its header) is, for people ("disk 3 offset 8192").
  virtual std::string Locate(const ChunkLocator& chunk) const = 0;

  // fsck: calls `problem` for each of `chunks` (what the catalog places in this store) that
  // lies outside the store or overlaps another.
  virtual void CheckLayout(std::span<const PlacedChunk> chunks,
                           const std::function<void(const std::string&)>& problem) const = 0;
  // cairn recover: finds the chunks in the store without a catalog. Calls `found` for every
  // chunk header that checks (magic, CRC), `problem` for damaged headers and unreadable
  // ranges, and `progress` with the bytes looked at so far, every megabyte or so. `found`
  // returns whether the chunk is one of the archive's: its space is then skipped; another's
  // header (in a disk image stored in the archive, say) is looked inside, block by block.
  virtual void ScanChunks(const std::function<bool(const ChunkLocator&, ExtentHeader)>& found,
                          const std::function<void(const std::string&)>& problem,
                          const std::function<void(uint64_t)>& progress) = 0;
};

}  // namespace cairn
