#include "pipeline/persister.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <ctime>
#include <future>
#include <map>
#include <new>
#include <set>

#include <fmt/format.h>

#include "codec/transform_pool.h"
#include "pipeline/segment_map_update.h"
#include "policy/resolver.h"
#include "util/buffer_pool.h"
#include "util/clock.h"
#include "util/coding.h"
#include "util/log.h"
#include "util/wait_for_all.h"

namespace cairn {
namespace {

// A piece that carries no data: it only marks its (clean) file's inode for the commit.
constexpr uint64_t kMarker = UINT64_MAX;

constexpr auto kPollInterval = std::chrono::milliseconds(250);
constexpr int64_t kQuietNs = 500'000'000;
constexpr size_t kPiecesPerCommit = 512;  // bounds how long one commit holds the catalog
constexpr int64_t kRetryDelayNs = 5'000'000'000;
// A file's slice per round: this many segments' worth of bytes read, of the archive's
// segment size (bounds memory and how long other files wait), or kPiecesPerCommit segments.
constexpr auto kReleaseGrace = std::chrono::seconds(2);
constexpr uint64_t kSegmentsPerCommit = 16;
// What an owner's files may take per round: kSegmentsPerCommit segments' worth of bytes
// read, each segment (a hole too) counting 1/kPieceCostDivisor of a segment more: about
// one slice, so many files of one user do not hold up another's, while a round still
// packs a thousand small files.
constexpr uint64_t kPieceCostDivisor = 64;

}  // namespace

Persister::Persister(Archive& archive, FileState& state, SegmentStore& store)
    : archive_(archive), state_(state), store_(store) {}

Persister::~Persister() {
  if (thread_.joinable()) Stop();
}

void Persister::Start() { thread_ = std::thread([this] { Run(); }); }

void Persister::Stop() {
  {
    std::lock_guard lock(wake_mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Persister::Run() {
  bool more = false;  // files left unfinished by the last round go on without a pause
  for (;;) {
    {
      std::unique_lock lock(wake_mutex_);
      // Polling (rather than a wakeup per close) keeps tar's per-file cost down and
      // gathers files closed together into shared packs.
      if (!more) wake_.wait_for(lock, kPollInterval, [this] { return stopping_; });
      if (stopping_) return;
    }
    more = false;
    std::vector<uint64_t> due;
    {
      std::lock_guard lock(archive_.catalog_mutex());
      due = DueFiles(NowNs());
    }
    if (!due.empty()) {
      std::map<uint64_t, Status> left_out;  // logged, and queued for a retry
      auto unfinished = PersistRound(due, &left_out);
      std::lock_guard lock(archive_.catalog_mutex());
      if (!unfinished.ok()) {
        LogError("persisting {} file(s) failed, will retry: {}", due.size(), unfinished.status().message());
        RequeueAfterFailure(due);  // DueFiles took them off the queue
      } else {
        // Back in the queue, due at once: the next round serves them again, together with
        // the files that became due meanwhile. Open files are not: DueFiles picks them
        // again while they qualify.
        for (uint64_t ino : *unfinished) {
          auto live = state_.live.find(ino);
          bool writing = live != state_.live.end() && live->second.nwriters > 0;
          if (state_.dirty.contains(ino) && !writing && !state_.persist_queue.contains(ino)) {
            state_.persist_queue[ino] = 0;
          }
        }
        more = !unfinished->empty();
      }
    }
    if (after_batch_) after_batch_();  // also when idle: a file closed since may be evictable now
    Archive::PendingSync pending;
    Status st;
    {
      std::lock_guard lock(archive_.catalog_mutex());
      st = archive_.Commit(Archive::SyncWhen::kIfWaiting, &pending);
    }
    if (st.ok()) st = archive_.MakeDurable(std::move(pending));
    if (!st.ok()) LogError("cannot commit the catalog: {}", st.message());
  }
}

std::vector<uint64_t> Persister::DueFiles(int64_t now_ns) {
  std::vector<uint64_t> due;
  int64_t idle_ns = static_cast<int64_t>(archive_.options().persist_idle_seconds) * 1'000'000'000;
  // Closed files wait for a quiet moment (while tar or rsync runs, persisting would only
  // compete with them), for persist_idle seconds at most, or until the cache fills.
  bool quiet = now_ns - state_.last_activity_ns >= kQuietNs;
  bool pressure = state_.dirty_bytes > archive_.options().cache_size / 4;
  int64_t horizon = quiet || pressure ? now_ns : now_ns - idle_ns;
  for (auto it = state_.persist_queue.begin(); it != state_.persist_queue.end();) {
    if (it->second <= horizon) {
      due.push_back(it->first);
      it = state_.persist_queue.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [ino, dirty] : state_.dirty) {
    auto live = state_.live.find(ino);
    bool open_for_write = live != state_.live.end() && live->second.nwriters > 0;
    // Open files are persisted when idle, and behind the writer once unpersisted data fills
    // half the cache (a long copy must not wait for close to reach the disks).
    bool idle = dirty.last_write_ns + idle_ns <= now_ns;
    bool behind = (dirty.all_cached || dirty.segments.size() > kSegmentsPerCommit) &&
                  state_.dirty_bytes > archive_.options().cache_size / 2;
    if (open_for_write && (idle || behind) && !state_.persist_queue.contains(ino) &&
        std::find(due.begin(), due.end(), ino) == due.end()) {
      due.push_back(ino);
    }
  }
  return due;
}

Status Persister::PersistAll() {
  // close() returns before the kernel's RELEASE reaches the daemon, so right after
  // `cp f MNT/` the file may still count as open for writing. A file written to during the
  // persist is tried again at once; files that are only still open get a moment to close.
  auto deadline = std::chrono::steady_clock::now() + kReleaseGrace;
  for (int attempt = 0;;) {
    std::vector<uint64_t> all;
    {
      std::lock_guard lock(archive_.catalog_mutex());
      for (const auto& [ino, dirty] : state_.dirty) all.push_back(ino);
      state_.persist_queue.clear();
    }
    std::map<uint64_t, Status> left_out;
    for (std::vector<uint64_t> inos = all; !inos.empty();) {
      auto unfinished = PersistRound(inos, &left_out);
      if (after_batch_) after_batch_();
      if (!unfinished.ok()) {  // the files not reached yet wait for the background's retry
        std::lock_guard lock(archive_.catalog_mutex());
        RequeueAfterFailure(all);
        return unfinished.status();
      }
      inos = std::move(*unfinished);
    }
    if (!left_out.empty()) {  // the other files are persisted: durably so, then the error
      CAIRN_RETURN_IF_ERROR(archive_.CommitDurably());
      const auto& [ino, why] = *left_out.begin();
      std::string more = left_out.size() > 1 ? fmt::format(" (and {} other file(s))", left_out.size() - 1) : "";
      return Status::IOError(fmt::format("inode {}{}: not persisted: {}", ino, more, why.message()));
    }
    std::unique_lock lock(archive_.catalog_mutex());
    if (state_.dirty.empty()) {  // "persisted" must survive a power loss too
      lock.unlock();
      return archive_.CommitDurably();
    }
    auto all_open = [this] {
      return std::all_of(state_.dirty.begin(), state_.dirty.end(), [this](const auto& entry) {
        auto live = state_.live.find(entry.first);
        return live != state_.live.end() && live->second.nwriters > 0;
      });
    };
    if (!all_open()) {
      if (++attempt < 3) continue;
    } else if (state_.writers_closed.wait_until(lock, deadline, [&] { return state_.dirty.empty() || !all_open(); })) {
      continue;  // a writer closed, or the background persister finished the open files meanwhile
    }
    return Status::Busy(fmt::format("{} file(s) are still being written; persist again later", state_.dirty.size()));
  }
}

void Persister::RequeueAfterFailure(const std::vector<uint64_t>& inos) {
  for (uint64_t ino : inos) {
    if (state_.dirty.contains(ino) && !state_.persist_queue.contains(ino)) {
      state_.persist_queue[ino] = NowNs() + kRetryDelayNs;
    }
  }
}

Result<std::vector<uint32_t>> Persister::OwnersOf(const std::vector<uint64_t>& inos) {
  std::vector<uint32_t> owners;
  std::lock_guard lock(archive_.catalog_mutex());
  for (uint64_t ino : inos) {
    auto inode = archive_.catalog().GetInode(ino);
    if (!inode.ok() && !inode.status().IsNotFound()) return inode.status();
    owners.push_back(inode.ok() ? inode->uid : 0);  // a deleted file: Snapshot drops it
  }
  return owners;
}

Result<std::vector<uint64_t>> Persister::PersistRound(const std::vector<uint64_t>& inos,
                                                      std::map<uint64_t, Status>* left_out) {
  std::lock_guard run(run_mutex_);
  auto found_owners = OwnersOf(inos);
  if (!found_owners.ok()) return found_owners.status();
  const std::vector<uint32_t>& owners = *found_owners;
  std::map<uint32_t, uint64_t> spent;  // by owner, this round
  const uint64_t owner_budget = kSegmentsPerCommit * archive_.options().segment_size;
  const uint64_t piece_cost = archive_.options().segment_size / kPieceCostDivisor;
  std::vector<SegmentPiece> pieces;
  std::vector<uint64_t> unfinished;
  uint64_t pending_bytes = 0;
  auto flush = [&]() {
    Status st = WriteAndCommit(pieces, left_out);
    for (SegmentPiece& piece : pieces) BufferPool::Default().Give(std::move(piece.data));  // for the next reads
    pieces.clear();
    pending_bytes = 0;
    return st;
  };
  for (size_t f = 0; f < inos.size(); f++) {
    uint64_t ino = inos[f];
    if (spent[owners[f]] >= owner_budget) {
      unfinished.push_back(ino);  // its owner had its share of this round
      continue;
    }
    size_t before = pieces.size();
    auto more = Snapshot(ino, pieces);
    if (!more.ok()) {  // logged; this file waits, the others go on
      pieces.erase(pieces.begin() + static_cast<std::ptrdiff_t>(before), pieces.end());
      left_out->emplace(ino, more.status());
      std::lock_guard lock(archive_.catalog_mutex());
      if (auto dirty = state_.dirty.find(ino); dirty != state_.dirty.end()) {
        RecountIfFirstPersist(ino, dirty->second);
        state_.persist_queue[ino] = NowNs() + kRetryDelayNs;
      }
      continue;
    }
    if (*more) unfinished.push_back(ino);
    for (size_t i = before; i < pieces.size(); i++) {
      pending_bytes += pieces[i].data.size();
      spent[owners[f]] += pieces[i].data.size() + piece_cost;
    }
    if (pending_bytes >= kSegmentsPerCommit * archive_.options().segment_size || pieces.size() >= kPiecesPerCommit) {
      // A failed batch goes back to the queue; retrying it here would spin.
      CAIRN_RETURN_IF_ERROR(flush());
    }
  }
  CAIRN_RETURN_IF_ERROR(flush());
  // Left out, they wait for their retry: another slice now would only fail again.
  std::erase_if(unfinished, [left_out](uint64_t ino) { return left_out->contains(ino); });
  return unfinished;
}

// REQUIRES: catalog mutex held.
void Persister::RecountIfFirstPersist(uint64_t ino, DirtyFile& dirty) {
  auto inode = archive_.catalog().GetInode(ino);
  if (!inode.ok() || inode->segment_size == 0) dirty.all_cached = true;  // a failing query: counted again too
}

Result<bool> Persister::Snapshot(uint64_t ino, std::vector<SegmentPiece>& pieces) {
  auto data = state_.data_locks.Exclusive(ino);
  InodeRecord inode;
  std::shared_ptr<const WritePlan> plan;
  std::vector<uint64_t> candidates;
  {
    std::lock_guard lock(archive_.catalog_mutex());
    auto record = archive_.catalog().GetInode(ino);
    auto catalog_failure = [ino](const Status& st) {
      LogError("inode {}: cannot read its catalog record: {}", ino, st.message());
      return st;
    };
    if (!record.ok() && !record.status().IsNotFound()) return catalog_failure(record.status());  // still dirty: tried again
    auto dirty_it = state_.dirty.find(ino);
    if (!record.ok() || dirty_it == state_.dirty.end()) {
      state_.EraseDirty(ino);
      left_out_logged_.erase(ino);
      return false;
    }
    inode = *record;
    DirtyFile& dirty = dirty_it->second;
    // The policy is decided now, at first persist, not at create: rsync's rename and
    // tar's late setfattr have happened by then. Later writes keep it; changing it is
    // the reconciler's job.
    auto planned = PlanOfInode(archive_, inode);
    if (!planned.ok()) {
      LogError("inode {}: cannot resolve its policy into a write plan: {}", ino, planned.status().message());
      return planned.status();
    }
    plan = std::move(*planned);
    if (inode.layout_id == 0) dirty.planned_at = archive_.catalog().policy_changes();
    uint64_t segment_size = plan->segment_size;
    uint64_t count = (inode.size + segment_size - 1) / segment_size;
    if (dirty.all_cached) {
      auto segments = archive_.catalog().GetSegments(ino);
      if (!segments.ok()) return catalog_failure(segments.status());
      std::map<uint64_t, bool> cached;
      for (const auto& s : *segments) cached[s.index] = s.cached;
      for (uint64_t i = 0; i < count; i++) {
        auto it = cached.find(i);
        if (it == cached.end() || it->second) dirty.segments.insert(i);
      }
      dirty.all_cached = false;
    }
    // The last dirty segment of a file still being written is most likely half done:
    // leave it for a later pass instead of writing it twice.
    auto live = state_.live.find(ino);
    bool active = live != state_.live.end() && live->second.nwriters > 0 &&
                  dirty.last_write_ns + static_cast<int64_t>(archive_.options().persist_idle_seconds) * 1'000'000'000 >
                      NowNs();
    uint64_t skip = active && !dirty.segments.empty() ? *dirty.segments.rbegin() : UINT64_MAX;
    // Candidates keep their dirty marks until read: the data lock keeps writers out meanwhile.
    for (auto it = dirty.segments.begin(); it != dirty.segments.end() && candidates.size() < kPiecesPerCommit;) {
      if (*it == skip) break;
      if (*it >= count) {
        it = dirty.segments.erase(it);  // truncated away
        continue;
      }
      candidates.push_back(*it);
      ++it;
    }
    inode.segment_size = segment_size;
    if (candidates.empty()) {
      // Nothing left to write (empty file, or truncated away): the file is clean now.
      SegmentPiece marker;
      marker.ino = ino;
      marker.segment_size = segment_size;
      marker.plan = plan;
      marker.index = kMarker;
      pieces.push_back(std::move(marker));
      return false;
    }
  }
  auto cache_failure = [ino](const Status& st) {
    LogError("inode {}: cannot read dirty data from the staging cache: {}", ino, st.message());
    return st;
  };
  auto file = archive_.cache().Open(ino);
  if (!file.ok()) return cache_failure(file.status());
  // The segments are read on the transform pool, side by side: its workers would otherwise
  // wait for this whole slice before they transform the first extent of it. Every read is
  // over before this returns (and so before the data lock and the cache file go), even when
  // it throws.
  struct Read {
    size_t piece;  // in `pieces`
    std::future<Result<std::vector<uint8_t>>> bytes;
  };
  std::vector<Read> reads;
  reads.reserve(candidates.size());
  WaitForAll wait_for_reads{reads, &Read::bytes};
  const int fd = (*file)->fd();
  size_t taken = 0;
  uint64_t segments_read = 0;
  // A slice reads kSegmentsPerCommit segments of the archive's size at most (a file's own
  // segments may be up to 1 GiB each), and always one.
  const uint64_t slice_bytes = kSegmentsPerCommit * archive_.options().segment_size;
  uint64_t bytes_read = 0;
  for (; taken < candidates.size(); taken++) {
    SegmentPiece piece;
    piece.ino = ino;
    piece.index = candidates[taken];
    piece.segment_size = inode.segment_size;
    piece.plan = plan;
    uint64_t start = piece.index * inode.segment_size;
    uint64_t length = std::min(inode.segment_size, inode.size - start);
    auto has_data = StagingCache::HasData(fd, start, length);
    if (!has_data.ok()) return cache_failure(has_data.status());
    if (*has_data) {
      if (segments_read > 0 && bytes_read + length > slice_bytes) break;
      auto read = [fd, start, length]() -> Result<std::vector<uint8_t>> {
        try {
          std::vector<uint8_t> bytes = BufferPool::Default().Take(length);  // the read fills it whole
          CAIRN_RETURN_IF_ERROR(StagingCache::ReadAt(fd, start, bytes));
          return bytes;
        } catch (const std::bad_alloc&) {  // the file waits for its retry; the daemon stays
          return Status::IOError(fmt::format("out of memory reading a segment of {} bytes", length));
        }
      };
      reads.push_back({pieces.size(), archive_.transform_pool().Submit(std::move(read))});  // reserved: no throw
      segments_read++;
      bytes_read += length;
    } else {
      piece.hole_length = length;  // all zeros, as a read would have shown
    }
    pieces.push_back(std::move(piece));
  }
  Status read_failure;
  for (Read& read : reads) {
    auto bytes = read.bytes.get();
    if (!bytes.ok()) {
      if (read_failure.ok()) read_failure = bytes.status();
      continue;
    }
    pieces[read.piece].data = std::move(*bytes);
  }
  if (!read_failure.ok()) return cache_failure(read_failure);
  // The rows will say the cache file holds these segments whole: a tail never written (a file
  // grown by truncate) must lie inside it, as a hole, or it would look cut short.
  uint64_t end_of_reads = 0;
  for (const Read& read : reads) {
    const SegmentPiece& piece = pieces[read.piece];
    end_of_reads = std::max(end_of_reads, piece.index * piece.segment_size + piece.data.size());
  }
  if (Status extended = StagingCache::ExtendTo(fd, end_of_reads); !extended.ok()) {
    LogError("inode {}: cannot lengthen its staging cache file to hold the segments read: {}", ino, extended.message());
    return extended;
  }
  // The rows will say these segments are in the staging cache, and reads (and a recovery,
  // which persists every cached segment of a file changed since again) trust its copy: it
  // must survive a power loss as the disks' does, or zeros would stand in for them. Synced
  // under the data lock, it is what was read.
  if (segments_read > 0 && ::fdatasync(fd) != 0) {
    int err = errno;
    std::lock_guard lock(archive_.catalog_mutex());
    state_.writeback_failed.insert(ino);  // the kernel tells one sync: the file's next Fsync fails too
    return cache_failure(Status::FromErrno(fmt::format("staging cache file of inode {}: fdatasync", ino), err));
  }
  std::lock_guard lock(archive_.catalog_mutex());
  auto dirty_it = state_.dirty.find(ino);
  if (dirty_it != state_.dirty.end()) {
    for (size_t i = 0; i < taken; i++) {
      dirty_it->second.segments.erase(candidates[i]);
      dirty_it->second.persisting.insert(candidates[i]);
    }
  }
  return taken < candidates.size() || candidates.size() == kPiecesPerCommit;
}

Status Persister::WriteAndCommit(std::vector<SegmentPiece>& pieces, std::map<uint64_t, Status>* left_out) {
  if (pieces.empty()) return Status::OK();
  auto written = WriteSegments(archive_, pieces, [](const SegmentPiece& piece) { return piece.index == kMarker; });
  // The rows will say the segments are in the staging cache too: a name a power loss could
  // still take would leave them pointing at nothing there.
  Status names = written.ok() ? archive_.cache().SyncNames() : Status::OK();
  if (!names.ok()) {  // their room goes back before the lock is taken: discards may wait for disks
    for (const ExtentRecord& extent : written->extents) archive_.extents().ReleaseUncommitted(extent);
  }

  std::unique_lock lock(archive_.catalog_mutex());
  Catalog& catalog = archive_.catalog();
  // The pieces (of the files `only` names, or all) are dirty again, their files retried later.
  auto retry_later = [&](const std::map<uint64_t, Status>* only) {
    for (const SegmentPiece& piece : pieces) {
      if (only && !only->contains(piece.ino)) continue;
      auto dirty = state_.dirty.find(piece.ino);
      if (dirty != state_.dirty.end()) {
        if (dirty->second.persisting.erase(piece.index)) dirty->second.segments.insert(piece.index);
        RecountIfFirstPersist(piece.ino, dirty->second);
      }
      state_.persist_queue[piece.ino] = NowNs() + kRetryDelayNs;
    }
  };
  if (!written.ok()) {  // WriteSegments gave back what it wrote
    retry_later(nullptr);
    return written.status();
  }
  if (!names.ok()) {
    retry_later(nullptr);
    return names;
  }
  for (const auto& [ino, why] : written->left_out) {
    auto [logged, fresh] = left_out_logged_.try_emplace(ino, why.message());
    if (fresh || logged->second != why.message()) {
      LogError("inode {}: not persisted, will retry (logged again if the reason changes): {}", ino, why.message());
      logged->second = why.message();
    }
    left_out->emplace(ino, why);
  }
  retry_later(&written->left_out);

  SegmentMapUpdate update(archive_, written->extents, true);  // read from the cache, which keeps them
  Status st = catalog.Begin();
  std::map<uint64_t, InodeRecord> inodes;
  for (const auto& p : written->placements) {
    if (!st.ok()) break;
    const SegmentPiece& piece = pieces[p.piece];
    // Deleted or truncated away meanwhile: its bytes are stale even if the file has grown
    // over the segment again.
    auto dirty = state_.dirty.find(piece.ino);
    if (dirty == state_.dirty.end() || !dirty->second.persisting.contains(piece.index)) continue;
    st = update.Replace({piece.ino, piece.index, piece.length(), p.extent, p.offset, p.hole});
  }
  if (st.ok()) st = update.InsertReferenced();
  const uint64_t policy_changes = catalog.policy_changes();  // before the checks queued below
  for (const SegmentPiece& piece : pieces) {
    if (!st.ok()) break;
    if (inodes.contains(piece.ino) || written->left_out.contains(piece.ino)) continue;
    auto inode = catalog.GetInode(piece.ino);
    if (!inode.ok() && !inode.status().IsNotFound()) {
      st = inode.status();
      break;
    }
    if (!inode.ok()) continue;  // deleted meanwhile
    const bool first = inode->layout_id == 0;
    if (!first) {
      // Rewritten data keeps the file's layout; whether a new size or age calls for
      // another one is the reconciler's question.
      st = catalog.QueuePolicyCheck(piece.ino);
      if (!st.ok()) break;
    }
    st = update.SetLayout(*inode, *piece.plan);
    if (!st.ok()) break;
    auto dirty = state_.dirty.find(piece.ino);
    if (first && (dirty == state_.dirty.end() || dirty->second.planned_at != policy_changes)) {
      // Its policy may have changed since the plan was made (a setfattr on a directory above
      // it, a rename, a rules reload), and the reconciler passed over it then: no layout yet.
      auto policy = ResolvePolicy(catalog, piece.ino, archive_.policy_context());
      st = policy.ok() ? Status::OK() : policy.status();
      if (st.ok() && !LayoutMatches(piece.plan->policy_stamp, *policy)) st = catalog.QueuePolicyCheck(piece.ino);
      if (!st.ok()) break;
    }
    // What it has persisting is all in this batch (a file's slice is never split).
    inode->dirty = dirty != state_.dirty.end() && (dirty->second.all_cached || !dirty->second.segments.empty());
    st = catalog.UpdateInode(*inode);
    inodes[piece.ino] = *inode;
  }
  if (st.ok()) st = catalog.Commit();
  if (!st.ok()) {
    catalog.Rollback();
    retry_later(nullptr);
    lock.unlock();
    update.Finish(false);  // discards: after the lock
    return st;
  }
  Archive::PendingSync pending;
  st = archive_.Commit(Archive::SyncWhen::kIfWaiting, &pending);
  std::vector<uint64_t> clean;
  for (const auto& [ino, inode] : inodes) {
    if (left_out_logged_.erase(ino)) LogInfo("inode {}: its data reaches the disks again", ino);
    if (auto dirty = state_.dirty.find(ino); dirty != state_.dirty.end()) {
      dirty->second.persisting.clear();
      // What reached the disks takes their space now: only the segments still dirty wait
      // for room (a long copy is persisted behind its writer, open and dirty throughout).
      if (!dirty->second.all_cached) {
        state_.ChargeAtMost(ino, dirty->second.segments.size() * inode.segment_size);
      }
    }
    if (!inode.dirty) state_.EraseDirty(ino);
    auto live = state_.live.find(ino);
    bool writing = live != state_.live.end() && live->second.nwriters > 0;
    if (!inode.dirty && !writing) clean.push_back(ino);
  }
  lock.unlock();
  update.Finish(true);  // the room of extents whose segments went meanwhile (deleted, truncated)
  if (st.ok()) st = archive_.MakeDurable(std::move(pending));
  if (on_clean_) on_clean_(clean);
  return st;
}

}  // namespace cairn
