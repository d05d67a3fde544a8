// SegmentStore serves reads of persisted data that is not in the staging cache: it reads
// whole extents from the disks, verifies and decodes them, and keeps the most recently used
// logical payloads in memory so that a sequential read costs one disk read per extent; the
// extent after one read sequentially is loaded ahead on the archive's transform pool.
// Thread-safe.
#pragma once

#include <cstdint>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "archive/archive.h"
#include "pipeline/logical_payload.h"

namespace cairn {

class SegmentStore {
 public:
  SegmentStore(Archive& archive, size_t capacity) : archive_(archive), capacity_(capacity) {}
  ~SegmentStore() { WaitForLoadsAhead(); }

  using Payload = std::shared_ptr<const std::vector<uint8_t>>;
  // Bytes [offset, offset + n) of `segment` where they are in memory, cut short where its
  // stored bytes end (the rest reads as zeros), and the payload that holds them.
  struct View {
    std::span<const uint8_t> bytes;
    Payload payload;
  };
  Result<View> ViewOf(const SegmentRecord& segment, uint64_t offset, uint64_t n);
  // Copies bytes [offset, offset + dst.size()) of `segment` into dst; bytes past the
  // segment's stored length read as zeros.
  Status Read(const SegmentRecord& segment, uint64_t offset, std::span<uint8_t> dst);
  // Starts loading the extent of `segment` on the transform pool unless it is buffered or
  // being loaded already (a reader will likely want it next). Errors are the reader's.
  void LoadAhead(const SegmentRecord& segment);
  // How many extents a sequential reader's next are loaded ahead at once: one per transform
  // worker (decoding keeps pace with the replies), at most a quarter of the buffered payloads
  // (two readers at a time keep what they read ahead until they read it).
  size_t LoadsAhead() const;
  // Returns once the loads started ahead are over (their payloads buffered).
  void WaitForLoadsAhead();
  // A sequential reader went on from this extent to another: the extent is the first to make
  // room for those loaded ahead of the reader, which are not read yet.
  void ReadPast(uint64_t extent_id);
  // Drops a buffered payload (its extent was freed).
  void Forget(uint64_t extent_id);
  // Drops every buffered payload, and the buffers kept for reuse (data keys were erased: what
  // they decrypted goes too).
  void ForgetAll();

 private:
  // An extent's verified logical payload and the segments its member table records.
  struct Loaded {
    Payload payload;
    std::shared_ptr<const RecordedSegments> recorded;
  };
  // The payload of the extent `segment` points into, once its member table says the segment
  // is there: buffered, being loaded by another caller (then waited for), or loaded now.
  Result<Payload> Load(const SegmentRecord& segment);
  Result<Loaded> LoadExtent(const SegmentRecord& segment);
  Result<Loaded> ReadAndDecode(const SegmentRecord& segment);

  Archive& archive_;
  const size_t capacity_;
  std::mutex mutex_;
  std::list<std::pair<uint64_t, Loaded>> lru_;  // most recent first; guarded by mutex_
  std::unordered_map<uint64_t, std::list<std::pair<uint64_t, Loaded>>::iterator> index_;  // guarded by mutex_
  // Loads under way, by extent, with the generation they began in: a reader joins only one of
  // its own generation (one begun before a ForgetAll may have decrypted with an erased key).
  struct Loading {
    uint64_t generation;
    std::shared_future<Result<Loaded>> result;
  };
  std::unordered_map<uint64_t, Loading> loading_;  // guarded by mutex_
  std::vector<std::future<Result<std::vector<uint8_t>>>> ahead_;  // loads started ahead; guarded by mutex_
  uint64_t generation_ = 0;  // counts ForgetAll calls; guarded by mutex_
};

}  // namespace cairn
