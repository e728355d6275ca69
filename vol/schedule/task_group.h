// Runs a round of tasks on an executor and waits for all of them.
//
// The prefetcher submits one task per coalesced read and must not go on (or
// release its claimed rows) before every task has finished. A task counts as
// finished however it ends: the executor drops an exception escaping a task,
// so a countdown decremented at the end of the task body would never reach
// zero after a throw, and Wait() would block forever with rows claimed. Here
// the count is decremented by a guard, and the exception is counted.
#ifndef PRESCIENT_VOL_SCHEDULE_TASK_GROUP_H_
#define PRESCIENT_VOL_SCHEDULE_TASK_GROUP_H_

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>

#include "cache/io/executor.h"

namespace prescient::vol {

class TaskGroup {
 public:
  explicit TaskGroup(cache::io::Executor& executor) : executor_(executor) {}
  // Waits for the tasks still running: they refer to this group.
  ~TaskGroup() { Wait(); }
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  // Runs `task` on the executor, or on this thread if the executor refuses it
  // (a pool inherited across fork()).
  void Run(std::function<void()> task);
  // Returns once every task given to Run has ended, normally or by throwing.
  void Wait();
  // Tasks that ended by throwing.
  std::size_t failures() const;

 private:
  void Finished(bool failed);

  cache::io::Executor& executor_;
  mutable std::mutex mutex_;  // guards the two counts
  std::condition_variable all_done_;
  std::size_t running_ = 0;
  std::size_t failures_ = 0;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_TASK_GROUP_H_
