#include "cache/io/executor.h"

#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace prescient::cache::io {
namespace {

void RunCatchingEverything(std::function<void()>& task) noexcept {
  try {
    task();
  } catch (...) {
    // Nothing may escape a thread entry point (it would call std::terminate
    // and take the training job down); tasks report errors themselves.
  }
}

}  // namespace

bool InlineExecutor::Submit(std::function<void()> task) {
  RunCatchingEverything(task);
  return true;
}

struct ThreadPool::State {
  unsigned thread_count = 1;
  pid_t owner_pid = 0;  // the process whose threads these are
  std::mutex mu;
  std::condition_variable wake;
  std::deque<std::function<void()>> queue;  // guarded by mu
  std::vector<std::thread> workers;         // guarded by mu; started on first Submit
  bool stopping = false;                    // guarded by mu

  void WorkerLoop() noexcept {
    try {
      std::unique_lock lock(mu);
      while (true) {
        wake.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;  // stopping and drained
        std::function<void()> task = std::move(queue.front());
        queue.pop_front();
        lock.unlock();
        RunCatchingEverything(task);
        lock.lock();
      }
    } catch (...) {
      // Only a failing mutex operation can land here; the thread just ends.
    }
  }
};

ThreadPool::ThreadPool(ThreadPoolOptions options) : state_(std::make_unique<State>()) {
  state_->thread_count = options.threads == 0 ? 1 : options.threads;
  state_->owner_pid = ::getpid();
}

ThreadPool::~ThreadPool() {
  if (::getpid() != state_->owner_pid) {
    // A forked child: the threads and possibly the mutex's holder do not exist
    // here. Joining would hang or crash; leaking the memory is the safe choice.
    (void)state_.release();
    return;
  }
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(state_->mu);
    state_->stopping = true;
    workers.swap(state_->workers);
  }
  state_->wake.notify_all();
  for (std::thread& worker : workers) worker.join();
}

bool ThreadPool::Submit(std::function<void()> task) {
  if (::getpid() != state_->owner_pid) return false;
  {
    std::lock_guard lock(state_->mu);
    if (state_->stopping) return false;
    if (state_->workers.empty()) {
      try {
        for (unsigned i = 0; i < state_->thread_count; ++i) {
          state_->workers.emplace_back([state = state_.get()] { state->WorkerLoop(); });
        }
      } catch (...) {
        // Could not start (all) threads: run with those that did start.
        if (state_->workers.empty()) return false;
      }
    }
    state_->queue.push_back(std::move(task));
  }
  state_->wake.notify_one();
  return true;
}

unsigned ThreadPool::threads() const { return state_->thread_count; }

}  // namespace prescient::cache::io
