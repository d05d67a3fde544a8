// TransformPool: a fixed set of threads, one per core unless told, that run the transform
// chains (compression, encryption) of extents for every writer of an archive. Callers keep
// their own order and bound their memory by how many results they wait for at once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "cairn/status.h"

namespace cairn {

class TransformPool {
 public:
  using Work = std::function<Result<std::vector<uint8_t>>()>;

  // `threads` 0: one per core.
  explicit TransformPool(size_t threads);
  ~TransformPool();  // runs what is queued, then joins
  TransformPool(const TransformPool&) = delete;
  TransformPool& operator=(const TransformPool&) = delete;

  // Runs `work` on a pool thread; its result (or exception) arrives through the future.
  std::future<Result<std::vector<uint8_t>>> Submit(Work work);
  size_t threads() const { return threads_.size(); }

 private:
  void Run();
  void Stop();  // runs what is queued, then joins every thread

  std::mutex mutex_;
  std::condition_variable ready_;                                      // with mutex_
  std::deque<std::packaged_task<Result<std::vector<uint8_t>>()>> queue_;  // guarded by mutex_
  bool stopping_ = false;                                             // guarded by mutex_
  std::vector<std::thread> threads_;
};

}  // namespace cairn
