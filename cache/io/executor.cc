#include "cache/io/executor.h"

#include <unistd.h>

#include <deque>
#include <thread>
#include <vector>

#include "cache/base/mutex.h"

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
  Mutex mu;
  CondVar wake;
  std::deque<std::function<void()>> queue GUARDED_BY(mu);
  std::vector<std::thread> workers GUARDED_BY(mu);  // started on first Submit
  bool stopping GUARDED_BY(mu) = false;

  void WorkerLoop() noexcept EXCLUDES(mu) {
    try {
      for (;;) {
        std::function<void()> task;
        {
          MutexLock lock(&mu);
          while (!stopping && queue.empty()) wake.Wait(&mu);
          if (queue.empty()) return;  // stopping and drained
          task = std::move(queue.front());
          queue.pop_front();
        }
        RunCatchingEverything(task);
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
    MutexLock lock(&state_->mu);
    state_->stopping = true;
    workers.swap(state_->workers);
  }
  state_->wake.SignalAll();
  for (std::thread& worker : workers) worker.join();
}

bool ThreadPool::Submit(std::function<void()> task) {
  if (::getpid() != state_->owner_pid) return false;
  {
    MutexLock lock(&state_->mu);
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
  state_->wake.Signal();
  return true;
}

unsigned ThreadPool::threads() const { return state_->thread_count; }

}  // namespace prescient::cache::io
