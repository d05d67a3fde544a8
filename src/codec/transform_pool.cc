#include "codec/transform_pool.h"

#include <algorithm>

namespace cairn {

TransformPool::TransformPool(size_t threads) {
  size_t n = threads ? threads : std::max<size_t>(1, std::thread::hardware_concurrency());
  try {
    for (size_t i = 0; i < n; i++) threads_.emplace_back([this] { Run(); });
  } catch (...) {  // the ones started stop again before the error goes on
    Stop();
    throw;
  }
}

void TransformPool::Stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

TransformPool::~TransformPool() { Stop(); }

std::future<Result<std::vector<uint8_t>>> TransformPool::Submit(Work work) {
  std::packaged_task<Result<std::vector<uint8_t>>()> task(std::move(work));
  auto result = task.get_future();
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(task));
  }
  ready_.notify_one();
  return result;
}

void TransformPool::Run() {
  for (;;) {
    std::packaged_task<Result<std::vector<uint8_t>>()> task;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // an exception goes into the future
  }
}

}  // namespace cairn
