#include "archive/reconciler.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <set>

#include <fmt/format.h>

#include "policy/resolver.h"
#include "util/clock.h"
#include "util/coding.h"
#include "util/log.h"

namespace cairn {
namespace {

constexpr auto kPollInterval = std::chrono::seconds(1);
constexpr size_t kQueueBatch = 256;
constexpr size_t kListChunk = 1024;  // directory entries read at a time

bool SameSegments(const std::vector<SegmentRecord>& a, const std::vector<SegmentRecord>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const SegmentRecord& x, const SegmentRecord& y) {
    return x.index == y.index && x.extent_id == y.extent_id && x.extent_offset == y.extent_offset &&
           x.length == y.length;  // `cached` changes with reads and does not matter
  });
}

}  // namespace

Reconciler::Reconciler(Archive& archive, FileState& state, SegmentStore& store)
    : archive_(archive), state_(state), store_(store) {}

Reconciler::~Reconciler() { Stop(); }

void Reconciler::Start() { thread_ = std::thread([this] { Run(); }); }

void Reconciler::Stop() {
  {
    std::lock_guard lock(wake_mutex_);
    stopping_ = true;
  }
  cancel_ = true;
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Reconciler::Run() {
  for (;;) {
    {
      std::unique_lock lock(wake_mutex_);
      wake_.wait_for(lock, kPollInterval, [this] { return stopping_; });
      if (stopping_) return;
    }
    for (;;) {
      {
        std::lock_guard lock(archive_.catalog_mutex());
        int64_t quiet_ns = static_cast<int64_t>(archive_.options().reconcile_idle_seconds) * 1'000'000'000;
        if (NowNs() - state_.last_activity_ns < quiet_ns) break;  // the user comes first
      }
      auto removed = RunQueue(kQueueBatch);
      if (!removed.ok()) LogError("reconciler: {}", removed.status().message());
      if (!removed.ok() || *removed == 0 || cancel_) break;
    }
  }
}

Result<bool> Reconciler::InPolicy(const InodeRecord& inode) {
  Catalog& catalog = archive_.catalog();
  if (!S_ISREG(inode.mode) || inode.layout_id == 0) return true;  // nothing persisted to re-encode
  auto policy = ResolvePolicy(catalog, inode.ino, archive_.policy_context());
  if (!policy.ok()) return policy.status();
  auto stamp = catalog.LayoutStamp(inode.layout_id);
  if (!stamp.ok()) return stamp.status();
  return LayoutMatches(*stamp, *policy);
}

Result<size_t> Reconciler::RunQueue(size_t limit) {
  struct Work {
    uint64_t ino;
    uint32_t disk;
    uint64_t offset;
  };
  std::vector<Work> work;
  size_t removed = 0;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    Catalog& catalog = archive_.catalog();
    for (uint64_t ino : catalog.PolicyQueue(limit)) {
      auto inode = catalog.GetInode(ino);
      Status st = InTransaction(catalog, [&]() -> Status {
        if (inode.ok() && S_ISDIR(inode->mode)) {
          // The subtree may have a new policy: queue what is below, then forget the directory.
          for (uint64_t after = 0;;) {
            auto entries = catalog.ListEntries(ino, after, kListChunk);
            for (const auto& entry : entries) {
              auto child = catalog.GetInode(entry.ino);
              if (child.ok() && (S_ISDIR(child->mode) || child->layout_id != 0)) {
                CAIRN_RETURN_IF_ERROR(catalog.QueuePolicyCheck(entry.ino));
              }
            }
            if (entries.size() < kListChunk) break;
            after = entries.back().cookie;
          }
          return catalog.DequeuePolicyCheck(ino);
        }
        if (!inode.ok()) return catalog.DequeuePolicyCheck(ino);
        auto in_policy = InPolicy(*inode);
        if (!in_policy.ok()) return in_policy.status();
        if (*in_policy) return catalog.DequeuePolicyCheck(ino);
        auto first = catalog.GetSegments(ino);
        Work w{ino, UINT32_MAX, 0};
        for (const auto& segment : first) {
          auto extent = segment.extent_id == kHoleExtent ? Result<ExtentRecord>(Status::NotFound(""))
                                                         : catalog.GetExtent(segment.extent_id);
          if (extent.ok()) {
            w.disk = extent->disk;
            w.offset = extent->offset;
            break;
          }
        }
        work.push_back(w);
        return Status::OK();
      });
      if (!st.ok()) return st;
      if (work.empty() || work.back().ino != ino) removed++;
    }
  }
  // One batch visits each disk once, in offset order.
  std::sort(work.begin(), work.end(),
            [](const Work& a, const Work& b) { return std::tie(a.disk, a.offset) < std::tie(b.disk, b.offset); });
  for (const Work& w : work) {
    if (cancel_) break;
    uint64_t bytes = 0;
    Status st = Reencode(w.ino, true, &bytes);
    if (st.ok()) {
      removed++;
      LogInfo("reconciler: inode {} re-encoded ({} bytes)", w.ino, bytes);
    } else if (st.code() != Status::Code::kBusy) {
      LogError("reconciler: inode {} stays out of policy: {}", w.ino, st.message());
    }
  }
  return removed;
}

void Reconciler::CollectOutOfPolicy(uint64_t ino, std::vector<std::pair<uint64_t, uint64_t>>* files) {
  archive_.catalog().VisitTree(ino, [&](const InodeRecord& inode) {
    auto in_policy = InPolicy(inode);
    if (in_policy.ok() && !*in_policy) files->emplace_back(inode.ino, inode.size);
    return true;
  });
}

Status Reconciler::Apply(uint64_t ino, const ProgressFn& report) {
  std::vector<std::pair<uint64_t, uint64_t>> files;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    CollectOutOfPolicy(ino, &files);
  }
  Progress progress;
  progress.files_total = files.size();
  for (const auto& [file, size] : files) progress.bytes_total += size;
  if (!report(progress)) return Status::OK();
  for (const auto& [file, size] : files) {
    uint64_t bytes = 0;
    Status st = Reencode(file, false, &bytes);
    if (st.ok()) {
      progress.files_done++;
      progress.bytes_done += size;
    } else if (st.code() == Status::Code::kBusy) {
      progress.files_busy++;
      std::lock_guard lock(archive_.catalog_mutex());
      CAIRN_RETURN_IF_ERROR(InTransaction(archive_.catalog(), [&] { return archive_.catalog().QueuePolicyCheck(file); }));
    } else {
      return st;
    }
    if (!report(progress)) break;
  }
  return Status::OK();
}

Status Reconciler::Reencode(uint64_t ino, bool throttle, uint64_t* bytes) {
  std::lock_guard run(run_mutex_);
  InodeRecord inode;
  std::vector<SegmentRecord> old;
  std::string stamp;
  uint64_t segment_size = 0;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    Catalog& catalog = archive_.catalog();
    auto record = catalog.GetInode(ino);
    if (!record.ok()) return InTransaction(catalog, [&] { return catalog.DequeuePolicyCheck(ino); });
    if (state_.dirty.contains(ino) || record->dirty) {
      return Status::Busy(fmt::format("inode {} is being written; it is re-encoded once persisted", ino));
    }
    auto in_policy = InPolicy(*record);
    if (!in_policy.ok()) return in_policy.status();
    if (*in_policy) return InTransaction(catalog, [&] { return catalog.DequeuePolicyCheck(ino); });
    auto policy = ResolvePolicy(catalog, ino, archive_.policy_context());
    if (!policy.ok()) return policy.status();
    inode = *record;
    old = catalog.GetSegments(ino);
    stamp = policy->Effective();
    segment_size = policy->segment_size();
    state_.migrating = ino;
  }

  // Write the new layout next to the old one, which stays readable meanwhile.
  std::vector<ExtentRecord> extents;
  std::vector<SegmentRecord> fresh;
  std::set<uint32_t> disks;
  std::vector<uint8_t> buffer;
  Status st;
  for (uint64_t index = 0; index * segment_size < inode.size && st.ok(); index++) {
    if (cancel_) {
      st = Status::Busy("cancelled");
      break;
    }
    uint64_t start = index * segment_size;
    buffer.assign(std::min(segment_size, inode.size - start), 0);
    for (const SegmentRecord& segment : old) {  // the old segments overlapping [start, end)
      uint64_t seg_start = segment.index * inode.segment_size;
      uint64_t from = std::max(start, seg_start);
      uint64_t to = std::min(start + buffer.size(), seg_start + inode.segment_size);
      if (from >= to) continue;
      st = store_.Read(segment, from - seg_start, std::span(buffer).subspan(from - start, to - from));
      if (!st.ok()) break;
    }
    if (!st.ok()) break;
    SegmentRecord segment{ino, index, kHoleExtent, 0, buffer.size(), false};
    if (!IsAllZero(buffer)) {
      auto record = archive_.WriteExtentToDisk(ExtentKind::kFileSegment, ino, start, buffer, stamp);
      if (!record.ok()) {
        st = record.status();
        break;
      }
      record->refs = 1;
      extents.push_back(*record);
      disks.insert(record->disk);
      segment.extent_id = record->id;
    }
    fresh.push_back(segment);
    *bytes += buffer.size();
    if (throttle) Throttle(buffer.size());
  }
  for (uint32_t disk : disks) {
    if (st.ok()) st = archive_.disk(disk).Sync();
  }

  // Swap, unless the file changed meanwhile: under its data lock no write is half done.
  std::unique_lock data(state_.data_lock(ino));
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  state_.migrating = 0;
  auto current = catalog.GetInode(ino);
  if (st.ok() && (!current.ok() || current->size != inode.size || current->mtime_ns != inode.mtime_ns ||
                  current->layout_id != inode.layout_id || current->dirty || state_.dirty.contains(ino) ||
                  !SameSegments(catalog.GetSegments(ino), old))) {
    st = Status::Busy(fmt::format("inode {} changed while being re-encoded; it will be retried", ino));
  }
  if (st.ok()) {
    st = InTransaction(catalog, [&]() -> Status {
      for (const SegmentRecord& segment : old) {
        if (segment.extent_id != kHoleExtent) CAIRN_RETURN_IF_ERROR(archive_.UnrefExtent(segment.extent_id));
        CAIRN_RETURN_IF_ERROR(catalog.DeleteSegment(ino, segment.index));
      }
      for (const ExtentRecord& extent : extents) CAIRN_RETURN_IF_ERROR(catalog.InsertExtent(extent));
      for (const SegmentRecord& segment : fresh) CAIRN_RETURN_IF_ERROR(catalog.PutSegment(segment));
      auto layout = catalog.InternLayout(stamp);
      if (!layout.ok()) return layout.status();
      current->segment_size = segment_size;
      current->layout_id = *layout;
      CAIRN_RETURN_IF_ERROR(catalog.UpdateInode(*current));
      return catalog.DequeuePolicyCheck(ino);
    });
  }
  if (!st.ok()) {
    for (const ExtentRecord& extent : extents) archive_.ReleaseUncommitted(extent);
    return st;
  }
  // Durable before the old extents' space can be reused.
  return archive_.ReleaseFreedSpace();
}

void Reconciler::Throttle(uint64_t bytes) {
  uint64_t rate = archive_.options().reconcile_rate;
  if (rate == 0) return;
  int64_t now = NowNs();
  if (now - throttle_start_ns_ > 10'000'000'000) {  // a fresh window after a pause
    throttle_start_ns_ = now;
    throttle_bytes_ = 0;
  }
  throttle_bytes_ += bytes;
  int64_t due = throttle_start_ns_ + static_cast<int64_t>(throttle_bytes_ * 1'000'000'000.0 / rate);
  if (due <= now) return;
  std::unique_lock lock(wake_mutex_);
  wake_.wait_for(lock, std::chrono::nanoseconds(due - now), [this] { return stopping_; });
}

}  // namespace cairn
