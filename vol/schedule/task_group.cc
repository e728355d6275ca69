#include "vol/schedule/task_group.h"

#include <memory>

#include "cache/base/mutex.h"

namespace prescient::vol {

void TaskGroup::Run(std::function<void()> task) {
  {
    cache::MutexLock lock(&mutex_);
    ++running_;
  }
  // Shared so that whichever of the two paths below runs the task owns it.
  auto body = std::make_shared<std::function<void()>>(std::move(task));
  auto guarded = [this, body] {
    bool failed = false;
    try {
      (*body)();
    } catch (...) {
      failed = true;
    }
    Finished(failed);
  };
  if (!executor_.Submit(guarded)) guarded();
}

void TaskGroup::Finished(bool failed) {
  cache::MutexLock lock(&mutex_);
  if (failed) ++failures_;
  if (--running_ == 0) all_done_.SignalAll();
}

void TaskGroup::Wait() {
  cache::MutexLock lock(&mutex_);
  while (running_ > 0) all_done_.Wait(&mutex_);
}

std::size_t TaskGroup::failures() const {
  cache::MutexLock lock(&mutex_);
  return failures_;
}

}  // namespace prescient::vol
