#include "pipeline/segment_store.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "pipeline/logical_payload.h"
#include "util/buffer_pool.h"
#include "util/log.h"

namespace cairn {

void SegmentStore::WaitForLoadsAhead() {
  std::vector<std::future<Result<std::vector<uint8_t>>>> ahead;
  {
    std::lock_guard lock(mutex_);
    ahead.swap(ahead_);
  }
  for (auto& load : ahead) load.wait();
}

Result<SegmentStore::Payload> SegmentStore::Load(const SegmentRecord& segment) {
  auto loaded = LoadExtent(segment);
  if (!loaded.ok()) return loaded.status();
  if (Status owned = loaded->recorded->Check(segment); !owned.ok()) {
    LogError("{}", owned.message());
    return owned;
  }
  return loaded->payload;
}

Result<SegmentStore::Loaded> SegmentStore::LoadExtent(const SegmentRecord& segment) {
  const uint64_t extent_id = segment.extent_id;
  std::promise<Result<Loaded>> mine;
  std::shared_future<Result<Loaded>> other;
  uint64_t generation;
  {
    std::lock_guard lock(mutex_);
    generation = generation_;
    if (auto it = index_.find(extent_id); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
    if (auto it = loading_.find(extent_id); it != loading_.end() && it->second.generation == generation) {
      other = it->second.result;
    } else {
      loading_.insert_or_assign(extent_id, Loading{generation, mine.get_future().share()});
    }
  }
  if (other.valid()) return other.get();  // one read of the extent serves every waiting reader
  Result<Loaded> loaded = Status::IOError("");
  try {
    loaded = ReadAndDecode(segment);
  } catch (const std::bad_alloc&) {  // the waiting readers must hear of it too
    loaded = Status::IOError(fmt::format("out of memory reading extent {}", extent_id));
  }
  {
    std::lock_guard lock(mutex_);
    if (loaded.ok() && generation == generation_ && !index_.contains(extent_id)) {
      lru_.emplace_front(extent_id, *loaded);
      index_[extent_id] = lru_.begin();
      while (lru_.size() > capacity_) {
        index_.erase(lru_.back().first);
        lru_.pop_back();
      }
    }
    if (auto it = loading_.find(extent_id); it != loading_.end() && it->second.generation == generation) {
      loading_.erase(it);  // not a later generation's load of it
    }
  }
  mine.set_value(loaded);
  return loaded;
}

Result<SegmentStore::Loaded> SegmentStore::ReadAndDecode(const SegmentRecord& segment) {
  const uint64_t extent_id = segment.extent_id;
  ExtentRecord extent;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    auto record = archive_.catalog().GetExtent(extent_id);
    if (record.status().IsNotFound()) {
      // A segment pointing at no extent is a damaged catalog, not a missing file: EIO.
      return Status::Corruption(fmt::format("catalog: segments row ({}, {}): extent {} does not exist", segment.ino,
                                            segment.index, extent_id));
    }
    if (!record.ok()) return record.status();
    extent = *record;
  }
  ExtentHeader header;
  auto stored = archive_.extents().ReadExtentPayload(extent, &header);
  auto bytes = stored.ok() ? LogicalPayload(archive_, extent, segment.ino, std::move(*stored)) : stored;
  auto recorded = bytes.ok() ? RecordedSegments::Of(header, *bytes) : bytes.status();
  if (!recorded.ok()) bytes = recorded.status();
  if (!bytes.ok()) {
    LogError("read of extent {} failed: {}", extent_id, bytes.status().message());
    // Whatever went wrong (unreadable, damaged, unknown version), the reader gets EIO.
    return Status::Corruption(bytes.status().message());
  }
  // Once no reader holds it, the payload's buffer goes back to the pool for the next load.
  Payload payload(new std::vector<uint8_t>(std::move(*bytes)), [](std::vector<uint8_t>* payload) {
    BufferPool::Default().Give(std::move(*payload));
    delete payload;
  });
  return Loaded{std::move(payload), std::make_shared<const RecordedSegments>(std::move(*recorded))};
}

size_t SegmentStore::LoadsAhead() const {
  return std::clamp<size_t>(archive_.transform_pool().threads(), 1, std::max<size_t>(1, capacity_ / 4));
}

void SegmentStore::LoadAhead(const SegmentRecord& segment) {
  if (segment.extent_id == kHoleExtent) return;
  std::lock_guard lock(mutex_);
  if (index_.contains(segment.extent_id) || loading_.contains(segment.extent_id)) return;
  std::erase_if(ahead_, [](auto& load) { return load.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
  if (ahead_.size() >= LoadsAhead()) return;  // the reader is behind: no more memory for it
  ahead_.push_back(archive_.transform_pool().Submit([this, segment]() -> Result<std::vector<uint8_t>> {
    auto loaded = Load(segment);  // buffered for the reader; a failure is logged, and its reader's
    if (!loaded.ok()) return loaded.status();
    return std::vector<uint8_t>();
  }));
}

Result<SegmentStore::View> SegmentStore::ViewOf(const SegmentRecord& segment, uint64_t offset, uint64_t n) {
  if (offset >= segment.length || segment.extent_id == kHoleExtent) return View{};
  auto payload = Load(segment);
  if (!payload.ok()) return payload.status();
  const auto& bytes = **payload;
  uint64_t start = segment.extent_offset + offset;
  n = std::min(n, segment.length - offset);
  if (start + n > bytes.size()) {
    return Status::Corruption(fmt::format("extent {} is {} bytes; segment of inode {} needs bytes up to {}",
                                          segment.extent_id, bytes.size(), segment.ino, start + n));
  }
  return View{std::span(bytes).subspan(start, n), std::move(*payload)};
}

Status SegmentStore::Read(const SegmentRecord& segment, uint64_t offset, std::span<uint8_t> dst) {
  auto view = ViewOf(segment, offset, dst.size());
  if (!view.ok()) return view.status();
  size_t n = view->bytes.size();
  if (n > 0) std::memcpy(dst.data(), view->bytes.data(), n);
  std::memset(dst.data() + n, 0, dst.size() - n);  // past the stored length: zeros
  return Status::OK();
}

void SegmentStore::ReadPast(uint64_t extent_id) {
  std::lock_guard lock(mutex_);
  if (auto it = index_.find(extent_id); it != index_.end()) lru_.splice(lru_.end(), lru_, it->second);
}

void SegmentStore::ForgetAll() {
  {
    std::lock_guard lock(mutex_);
    generation_++;  // a load under way is not kept either
    lru_.clear();
    index_.clear();
  }
  BufferPool::Default().Clear();  // with the payloads just given back to it
}

void SegmentStore::Forget(uint64_t extent_id) {
  std::lock_guard lock(mutex_);
  auto it = index_.find(extent_id);
  if (it == index_.end()) return;
  lru_.erase(it->second);
  index_.erase(it);
}

}  // namespace cairn
