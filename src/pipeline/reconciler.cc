#include "pipeline/reconciler.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <set>

#include <fmt/format.h>

#include "catalog/record_checks.h"
#include "catalog/tree_walk.h"
#include "pipeline/segment_map_update.h"
#include "policy/resolver.h"
#include "util/clock.h"
#include "util/coding.h"
#include "util/log.h"

namespace cairn {
namespace {

constexpr auto kPollInterval = std::chrono::seconds(1);
constexpr size_t kQueueBatch = 256;
constexpr size_t kListChunk = 1024;  // directory entries read at a time
constexpr size_t kWalkStep = 256;    // inodes looked at per hold of the catalog mutex
constexpr uint64_t kWriteChunk = 32 << 20;  // bytes read ahead of writing them
constexpr uint64_t kCommitBytes = 256 << 20;  // a commit per this many bytes or files
constexpr size_t kCommitFiles = 256;
constexpr int64_t kFailedRetryNs = 600'000'000'000;  // an unreadable file is retried after 10 minutes

bool SameSegments(const std::vector<SegmentRecord>& a, const std::vector<SegmentRecord>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const SegmentRecord& x, const SegmentRecord& y) {
    return x.index == y.index && x.extent_id == y.extent_id && x.extent_offset == y.extent_offset &&
           x.length == y.length && x.hole_record == y.hole_record;  // `cached` changes with reads, does not matter
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
    QueueAgeScan();
    for (uint64_t after = 0;;) {  // a pass through the queue
      {
        std::lock_guard lock(archive_.catalog_mutex());
        int64_t quiet_ns = static_cast<int64_t>(archive_.options().reconcile_idle_seconds) * 1'000'000'000;
        if (NowNs() - state_.last_activity_ns < quiet_ns) break;  // the user comes first
      }
      auto looked = RunQueue(&after, kQueueBatch);
      if (!looked.ok()) LogError("reconciler: {}", looked.status().message());
      if (!looked.ok() || *looked == 0 || cancel_) break;
    }
  }
}

void Reconciler::QueueAgeScan() {
  constexpr int64_t kDayNs = 86'400'000'000'000;
  PolicyContext context = archive_.policy_context();
  bool ages = false;
  for (const Rule& rule : context.rules->rules()) {
    for (const Condition& condition : rule.conditions()) {
      ages |= condition.kind == Condition::Kind::kMtime || condition.kind == Condition::Kind::kAtime;
    }
  }
  if (!ages) return;
  std::lock_guard lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  int64_t now = NowNs();
  auto last = catalog.GetMeta("age_scan_ns");
  if (!last.ok() && !last.status().IsNotFound()) {
    LogError("reconciler: cannot tell when age rules were last checked: {}", last.status().message());
    return;
  }
  if (last.ok() && now - std::strtoll(last->c_str(), nullptr, 10) < kDayNs) return;
  Status st = InTransaction(catalog, [&]() -> Status {
    CAIRN_RETURN_IF_ERROR(catalog.QueuePolicyCheck(kRootInode));
    return catalog.SetMeta("age_scan_ns", std::to_string(now));
  });
  if (!st.ok()) LogError("reconciler: cannot queue the daily check of age rules: {}", st.message());
}

Result<bool> Reconciler::InPolicy(const InodeRecord& inode, ResolvedPolicy* resolved) {
  Catalog& catalog = archive_.catalog();
  if (!S_ISREG(inode.mode) || inode.layout_id == 0) return true;  // nothing persisted to re-encode
  auto policy = ResolvePolicy(catalog, inode.ino, archive_.policy_context());
  if (!policy.ok()) return policy.status();
  auto stamp = catalog.LayoutStamp(inode.layout_id);
  if (!stamp.ok()) return stamp.status();
  bool matches = LayoutMatches(*stamp, *policy);
  if (resolved) *resolved = std::move(*policy);
  return matches;
}

Result<size_t> Reconciler::RunQueue(uint64_t* after, size_t limit) {
  struct Work {
    uint64_t ino;
    uint32_t disk;
    uint64_t position;  // of its first chunk, in that disk's store
  };
  std::vector<Work> work;
  Catalog& catalog = archive_.catalog();
  Result<std::vector<uint64_t>> queued = Status::NotFound("");
  {
    std::lock_guard lock(archive_.catalog_mutex());
    queued = catalog.PolicyQueue(*after, limit);
  }
  if (!queued.ok()) return queued.status();
  if (queued->empty()) return 0;
  *after = queued->back();
  auto log_failure = [](uint64_t ino, const Status& st) {  // it stays queued, for the next pass
    LogError("reconciler: inode {}: {}", ino, st.message());
  };
  for (uint64_t ino : *queued) {  // the catalog mutex is let go between entries
    std::unique_lock lock(archive_.catalog_mutex());
    auto inode = catalog.GetInode(ino);
    if (!inode.ok() && !inode.status().IsNotFound()) {
      log_failure(ino, inode.status());
      continue;
    }
    if (inode.ok() && S_ISDIR(inode->mode)) {
      lock.unlock();
      Status st = QueueChildren(ino);
      if (!st.ok()) log_failure(ino, st);
      continue;
    }
    {
      Status st = InTransaction(catalog, [&]() -> Status {
        if (!inode.ok()) return catalog.DequeuePolicyCheck(ino);  // deleted
        auto in_policy = InPolicy(*inode);
        if (!in_policy.ok()) return in_policy.status();
        if (*in_policy) return catalog.DequeuePolicyCheck(ino);
        auto first = catalog.GetSegments(ino);
        if (!first.ok()) return first.status();
        Work w{ino, UINT32_MAX, 0};
        for (const auto& segment : *first) {  // where its data starts, to visit the disks in order
          auto extent = segment.extent_id == kHoleExtent ? Result<ExtentRecord>(Status::NotFound(""))
                                                         : catalog.GetExtent(segment.extent_id);
          if (!extent.ok() && extent.status().code() == Status::Code::kIOError) return extent.status();
          if (extent.ok()) {
            w.disk = extent->chunks[0].disk;
            w.position = extent->chunks[0].locator().address;
            break;
          }
        }
        work.push_back(w);
        return Status::OK();
      });
      if (!st.ok()) log_failure(ino, st);
    }
  }
  // One batch visits each disk once, in the order of its store's layout.
  std::sort(work.begin(), work.end(),
            [](const Work& a, const Work& b) { return std::tie(a.disk, a.position) < std::tie(b.disk, b.position); });
  std::vector<uint64_t> inos;
  for (const Work& w : work) inos.push_back(w.ino);
  Progress progress;
  Status st = Reencode(inos, true, &progress, {});
  if (!st.ok()) LogError("reconciler: {}", st.message());
  if (progress.files_done > 0) {
    LogInfo("reconciler: {} file(s) re-encoded ({} bytes)", progress.files_done, progress.bytes_done);
  }
  return queued->size();
}

Status Reconciler::QueueChildren(uint64_t dir) {
  Catalog& catalog = archive_.catalog();
  for (uint64_t after = 0;;) {
    std::lock_guard lock(archive_.catalog_mutex());
    bool last = false;
    CAIRN_RETURN_IF_ERROR(InTransaction(catalog, [&]() -> Status {
      auto entries = catalog.ListEntries(dir, after, kListChunk);
      if (!entries.ok()) return entries.status();
      for (const auto& entry : *entries) {
        auto child = catalog.GetInode(entry.ino);
        if (!child.ok() && !child.status().IsNotFound()) return child.status();
        if (child.ok() && (S_ISDIR(child->mode) || child->layout_id != 0)) {
          CAIRN_RETURN_IF_ERROR(catalog.QueuePolicyCheck(entry.ino));
        }
      }
      last = entries->size() < kListChunk;
      if (!last) after = entries->back().cookie;
      return last ? catalog.DequeuePolicyCheck(dir) : Status::OK();
    }));
    if (last) return Status::OK();
  }
}

Status Reconciler::CollectOutOfPolicy(uint64_t ino, std::vector<std::pair<uint64_t, uint64_t>>* files,
                                      std::vector<uint64_t>* dirs) {
  Status failed;
  TreeWalk walk(ino);
  for (bool more = true; more && failed.ok();) {  // the catalog mutex is let go between steps
    std::lock_guard lock(archive_.catalog_mutex());
    auto stepped = walk.Step(archive_.catalog(), kWalkStep, [&](const InodeRecord& inode) {
      if (S_ISDIR(inode.mode)) dirs->push_back(inode.ino);
      auto in_policy = InPolicy(inode);
      if (!in_policy.ok()) {
        failed = in_policy.status();
        return false;
      }
      if (!*in_policy) files->emplace_back(inode.ino, inode.size);
      return true;
    });
    if (!stepped.ok()) return stepped.status();
    more = *stepped;
  }
  return failed;
}

Status Reconciler::Apply(uint64_t ino, const ProgressFn& report) {
  std::vector<std::pair<uint64_t, uint64_t>> files;
  std::vector<uint64_t> dirs;
  CAIRN_RETURN_IF_ERROR(CollectOutOfPolicy(ino, &files, &dirs));
  Progress progress;
  progress.files_total = files.size();
  std::vector<uint64_t> inos;
  for (const auto& [file, size] : files) {
    progress.bytes_total += size;
    inos.push_back(file);
  }
  if (!report(progress)) return Status::OK();
  bool finished = true;
  CAIRN_RETURN_IF_ERROR(Reencode(inos, false, &progress, [&](const Progress& p) { return finished = report(p); }));
  if (!finished) return Status::OK();
  // Every file below was looked at: the queued directories need no expanding any more.
  Archive::PendingSync pending;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    Catalog& catalog = archive_.catalog();
    CAIRN_RETURN_IF_ERROR(InTransaction(catalog, [&]() -> Status {
      for (uint64_t dir : dirs) CAIRN_RETURN_IF_ERROR(catalog.DequeuePolicyCheck(dir));
      return Status::OK();
    }));
    CAIRN_RETURN_IF_ERROR(archive_.Commit(Archive::SyncWhen::kAlways, &pending));
  }
  return archive_.MakeDurable(std::move(pending));
}

struct Reconciler::Job {
  InodeRecord inode;               // as planned
  std::vector<SegmentRecord> old;  // its segments as planned
  std::shared_ptr<const WritePlan> plan;  // the new policy's
  bool failed = false;             // its data could not be read or written: it stays as it is
  bool had_key = false;            // it had a data key row when planned
};

// Files being re-encoded together: pieces read and not yet written, extents written and
// not yet committed, and where each new segment went.
struct Reconciler::Batch {
  struct Placed {
    size_t job;
    NewSegment segment;  // its extent: an index into `extents`
  };
  std::vector<Job> jobs;
  std::vector<SegmentPiece> pending;
  std::vector<size_t> pending_job;  // the job of each pending piece
  uint64_t pending_bytes = 0;
  uint64_t bytes = 0;
  std::vector<ExtentRecord> extents;
  std::vector<Placed> placed;
};

bool Reconciler::Plan(uint64_t ino, bool background, Job* job, Progress* progress) {
  Catalog& catalog = archive_.catalog();
  auto retry = retry_after_.find(ino);
  if (retry != retry_after_.end()) {
    if (background && retry->second > NowNs()) return false;  // it failed lately: not every second
    retry_after_.erase(retry);
  }
  auto queue = [&](bool add) {
    Status st = InTransaction(catalog, [&] {
      return add ? catalog.QueuePolicyCheck(ino) : catalog.DequeuePolicyCheck(ino);
    });
    if (!st.ok()) LogError("reconciler: inode {}: {}", ino, st.message());
  };
  auto record = catalog.GetInode(ino);
  if (!record.ok()) {
    if (record.status().IsNotFound()) {
      queue(false);
    } else {  // stays queued
      LogError("reconciler: inode {}: {}", ino, record.status().message());
    }
    return false;
  }
  if (state_.dirty.contains(ino) || record->dirty) {  // re-encoded once persisted
    progress->files_busy++;
    queue(true);
    return false;
  }
  auto segments = catalog.SummarizeSegments(ino);
  Status valid = segments.ok() ? CheckSegmentSummary(*record, *segments, S_ISREG(record->mode) && record->layout_id != 0)
                               : segments.status();
  if (!valid.ok()) {  // re-encoding would read and write by damaged sizes
    LogError("reconciler: inode {} stays as it is: {}", ino, valid.message());
    progress->files_failed++;
    queue(false);
    return false;
  }
  ResolvedPolicy policy;
  auto in_policy = InPolicy(*record, &policy);
  if (!in_policy.ok()) {
    LogError("reconciler: inode {}: {}", ino, in_policy.status().message());
    return false;
  }
  if (*in_policy) {
    progress->files_in_policy++;
    queue(false);
    return false;
  }
  auto plan = PlanWrite(policy);
  Status fits = plan.ok() ? CheckPlanFits(archive_, **plan) : plan.status();
  if (!fits.ok()) {  // alone: the batch would fail with it
    LogError("reconciler: inode {} stays as it is: {}", ino, fits.message());
    retry_after_[ino] = NowNs() + kFailedRetryNs;
    progress->files_failed++;
    return false;
  }
  auto segments_now = catalog.GetSegments(ino);
  if (!segments_now.ok()) {  // stays queued
    LogError("reconciler: inode {}: {}", ino, segments_now.status().message());
    return false;
  }
  // A crypto-erase while the plaintext is being rewritten must not be undone by the new
  // extents: they are sealed with the key the file has now or not at all (had_data_key),
  // and Commit checks that its key row is still there.
  auto key = catalog.GetFileKey(ino);
  if (!key.ok() && !key.status().IsNotFound()) {  // stays queued
    LogError("reconciler: inode {}: {}", ino, key.status().message());
    return false;
  }
  job->had_key = key.ok();
  job->inode = *record;
  job->old = std::move(*segments_now);
  job->plan = std::move(*plan);
  return true;
}

bool Reconciler::Unchanged(const Job& job) {
  Catalog& catalog = archive_.catalog();
  auto now = catalog.GetInode(job.inode.ino);
  auto segments = catalog.GetSegments(job.inode.ino);
  if (!segments.ok()) LogError("reconciler: inode {} stays queued: {}", job.inode.ino, segments.status().message());
  return now.ok() && now->size == job.inode.size && now->mtime_ns == job.inode.mtime_ns &&
         now->layout_id == job.inode.layout_id && !now->dirty && !state_.dirty.contains(job.inode.ino) &&
         segments.ok() && SameSegments(*segments, job.old);
}

Status Reconciler::ReadNewSegment(const Job& job, uint64_t index, std::vector<uint8_t>* data) {
  uint64_t start = index * job.plan->segment_size;
  data->assign(std::min(job.plan->segment_size, job.inode.size - start), 0);
  uint64_t old_size = job.inode.segment_size;
  for (const SegmentRecord& segment : job.old) {  // the old segments overlapping [start, end)
    uint64_t seg_start = segment.index * old_size;
    uint64_t from = std::max(start, seg_start);
    uint64_t to = std::min(start + data->size(), seg_start + old_size);
    if (from >= to) continue;
    CAIRN_RETURN_IF_ERROR(store_.Read(segment, from - seg_start, std::span(*data).subspan(from - start, to - from)));
  }
  return Status::OK();
}

Status Reconciler::WritePending(Batch& batch) {
  if (batch.pending.empty()) return Status::OK();
  auto written = WriteSegments(archive_, batch.pending);
  if (!written.ok()) return written.status();
  for (size_t i = 0; i < batch.pending.size(); i++) {  // without all its pieces a file stays as it is
    auto left_out = written->left_out.find(batch.pending[i].ino);
    if (left_out == written->left_out.end()) continue;
    Job& job = batch.jobs[batch.pending_job[i]];
    if (!job.failed) LogError("reconciler: inode {} stays out of policy: {}", job.inode.ino, left_out->second.message());
    job.failed = true;
  }
  for (const auto& p : written->placements) {
    const SegmentPiece& piece = batch.pending[p.piece];
    NewSegment segment{piece.ino, piece.index, piece.data.size(), batch.extents.size() + p.extent, p.offset, p.hole};
    batch.placed.push_back({batch.pending_job[p.piece], segment});
  }
  batch.extents.insert(batch.extents.end(), written->extents.begin(), written->extents.end());
  batch.pending.clear();
  batch.pending_job.clear();
  batch.pending_bytes = 0;
  return Status::OK();
}

Status Reconciler::Commit(Batch& batch, Progress* progress) {
  std::vector<uint64_t> inos;
  for (const Job& job : batch.jobs) inos.push_back(job.inode.ino);
  // Under the files' data locks no write is half done.
  auto held = state_.data_locks.Exclusive(inos);
  std::unique_lock lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  state_.migrating = 0;
  std::vector<bool> swap(batch.jobs.size());
  std::vector<bool> erased(batch.jobs.size());
  std::vector<bool> key_gone(batch.jobs.size());  // its new extents hold what an erased key sealed
  for (size_t j = 0; j < batch.jobs.size(); j++) {
    Job& job = batch.jobs[j];
    bool unchanged = Unchanged(job);
    // A crypto-erase meanwhile: the new extents hold what the erased data key sealed, and
    // swapping them in would undo the erase.
    if (job.had_key) {
      auto key = catalog.GetFileKey(job.inode.ino);
      if (key.status().IsNotFound()) {
        LogInfo("reconciler: inode {} stays as it is: its data key was erased", job.inode.ino);
        key_gone[j] = true;
        erased[j] = unchanged;  // else it is re-planned, without a key now
        unchanged = false;
      } else if (!key.ok()) {
        LogError("reconciler: inode {} stays out of policy: {}", job.inode.ino, key.status().message());
        job.failed = true;
      }
    }
    swap[j] = !job.failed && unchanged;
  }
  // The new extents of a file whose data key was erased hold its data, in clear if the new
  // policy has no encryption: no other file's segments may keep one (a pack) on the disks
  // either. Those files wait for the next pass; Finish discards the extents nobody keeps.
  std::set<size_t> sealed_by_erased_key;
  for (const auto& p : batch.placed) {
    if (key_gone[p.job] && !p.segment.hole) sealed_by_erased_key.insert(p.segment.extent);
  }
  for (const auto& p : batch.placed) {
    if (swap[p.job] && sealed_by_erased_key.contains(p.segment.extent)) {
      LogInfo("reconciler: inode {} waits for the next pass: its new extent also holds a crypto-erased file's data",
              batch.jobs[p.job].inode.ino);
      swap[p.job] = false;
    }
  }
  SegmentMapUpdate update(archive_, batch.extents, false);  // read from the disks: not in the cache
  Status st = InTransaction(catalog, [&]() -> Status {
    for (size_t j = 0; j < batch.jobs.size(); j++) {
      const Job& job = batch.jobs[j];
      // Its data is gone for good: every later pass would fail to read it, and back off
      // only to fail again.
      if (erased[j]) {
        CAIRN_RETURN_IF_ERROR(catalog.DequeuePolicyCheck(job.inode.ino));
        continue;
      }
      if (!swap[j]) {  // changed meanwhile, or unreadable: stays queued, the latter backs off
        if (job.failed) retry_after_[job.inode.ino] = NowNs() + kFailedRetryNs;
        CAIRN_RETURN_IF_ERROR(catalog.QueuePolicyCheck(job.inode.ino));
        continue;
      }
      CAIRN_RETURN_IF_ERROR(DropSegments(archive_, job.inode.ino, job.old));
    }
    for (const auto& p : batch.placed) {
      if (swap[p.job]) CAIRN_RETURN_IF_ERROR(update.Put(p.segment));
    }
    CAIRN_RETURN_IF_ERROR(update.InsertReferenced());
    for (size_t j = 0; j < batch.jobs.size(); j++) {
      if (!swap[j]) continue;
      auto inode = catalog.GetInode(batch.jobs[j].inode.ino);
      if (!inode.ok()) return inode.status();
      CAIRN_RETURN_IF_ERROR(update.SetLayout(*inode, *batch.jobs[j].plan));
      CAIRN_RETURN_IF_ERROR(catalog.UpdateInode(*inode));
      // Every segment was rewritten: a file no longer encrypted needs no data key.
      if (!batch.jobs[j].plan->chain.needs_key()) CAIRN_RETURN_IF_ERROR(catalog.DeleteFileKey(inode->ino));
      // A policy change while it was being rewritten leaves it queued for another pass.
      auto policy = ResolvePolicy(catalog, inode->ino, archive_.policy_context());
      if (!policy.ok()) return policy.status();
      if (LayoutMatches(batch.jobs[j].plan->policy_stamp, *policy)) {
        CAIRN_RETURN_IF_ERROR(catalog.DequeuePolicyCheck(inode->ino));
      }
    }
    return Status::OK();
  });
  if (!st.ok()) {
    lock.unlock();
    held.clear();
    update.Finish(false);  // discards: after the locks
    return st;
  }
  for (size_t j = 0; j < batch.jobs.size(); j++) {
    if (swap[j]) {
      progress->files_done++;
      if (!batch.jobs[j].plan->chain.needs_key()) archive_.file_keys().Forget(batch.jobs[j].inode.ino);
    } else {
      (batch.jobs[j].failed || erased[j] ? progress->files_failed : progress->files_busy)++;
    }
  }
  // Durable before the old extents' space can be reused. The swap is committed: the files
  // are free for writes and reads (of the new extents) while the catalog syncs.
  Archive::PendingSync pending;
  Status committed = archive_.Commit(Archive::SyncWhen::kAlways, &pending);
  lock.unlock();
  held.clear();
  update.Finish(true);  // the extents of files that changed meanwhile
  CAIRN_RETURN_IF_ERROR(committed);
  return archive_.MakeDurable(std::move(pending));
}

Status Reconciler::Reencode(const std::vector<uint64_t>& inos, bool throttle, Progress* progress,
                            const ProgressFn& report) {
  std::lock_guard run(run_mutex_);
  Batch batch;
  auto abandon = [&](Status st) {
    {
      std::lock_guard lock(archive_.catalog_mutex());
      state_.migrating = 0;
    }
    for (const ExtentRecord& extent : batch.extents) archive_.extents().ReleaseUncommitted(extent);  // discards
    return st;
  };
  // A batch that cannot be written (a full group, a failing disk) waits before its files
  // are tried again in the background, rather than being read and written at every pass.
  auto failed = [&](Status st) {
    for (const Job& job : batch.jobs) retry_after_[job.inode.ino] = NowNs() + kFailedRetryNs;
    return abandon(st);
  };
  auto commit = [&]() {
    Status st = WritePending(batch);
    if (!st.ok()) return failed(st);
    st = Commit(batch, progress);
    batch = Batch();
    return st;
  };
  for (uint64_t ino : inos) {
    if (cancel_) return abandon(Status::OK());
    Job job;
    {
      std::lock_guard lock(archive_.catalog_mutex());
      if (!Plan(ino, throttle, &job, progress)) continue;
      state_.migrating = ino;
    }
    size_t j = batch.jobs.size();
    batch.jobs.push_back(std::move(job));
    const Job& planned = batch.jobs[j];
    for (uint64_t index = 0; index * planned.plan->segment_size < planned.inode.size; index++) {
      if (cancel_) return abandon(Status::OK());
      SegmentPiece piece{ino, index, planned.plan->segment_size, planned.plan, {}};
      piece.had_data_key = planned.had_key;
      Status st = ReadNewSegment(planned, index, &piece.data);
      if (!st.ok()) {  // this file stays as it is; the others go on
        bool changed;
        {
          std::lock_guard lock(archive_.catalog_mutex());
          changed = !Unchanged(planned);
        }
        if (changed) {  // a truncate or a write freed what it read: queued again, without a back-off
          LogInfo("reconciler: inode {} changed while it was read; it is planned again", ino);
        } else {
          LogError("reconciler: inode {} stays out of policy: {}", ino, st.message());
          batch.jobs[j].failed = true;
        }
        break;
      }
      if (batch.pending_bytes + piece.data.size() > kWriteChunk) {
        st = WritePending(batch);
        if (!st.ok()) return failed(st);
        if (report && !report(*progress)) return abandon(Status::OK());  // cancelled
      }
      if (throttle) Throttle(piece.data.size());
      progress->bytes_done += piece.data.size();
      batch.pending_bytes += piece.data.size();
      batch.bytes += piece.data.size();
      batch.pending.push_back(std::move(piece));
      batch.pending_job.push_back(j);
    }
    if (batch.bytes >= kCommitBytes || batch.jobs.size() >= kCommitFiles) {
      CAIRN_RETURN_IF_ERROR(commit());
      if (report && !report(*progress)) return Status::OK();
    }
  }
  CAIRN_RETURN_IF_ERROR(commit());
  if (report) report(*progress);
  return Status::OK();
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
