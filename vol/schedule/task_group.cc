#include "vol/schedule/task_group.h"

#include <memory>

namespace prescient::vol {

void TaskGroup::Run(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
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
  std::lock_guard lock(mutex_);
  if (failed) ++failures_;
  if (--running_ == 0) all_done_.notify_all();
}

void TaskGroup::Wait() {
  std::unique_lock lock(mutex_);
  all_done_.wait(lock, [&] { return running_ == 0; });
}

std::size_t TaskGroup::failures() const {
  std::lock_guard lock(mutex_);
  return failures_;
}

}  // namespace prescient::vol
