// PRESCIENT_FOLLOW: noticing that the schedule file was replaced.
//
// In follow mode the schedule is written while the job runs: the Python
// follower publishes every rank's order as each epoch starts (and again when
// it has learned which rows the samples are), each time as a new file renamed
// over PRESCIENT_SCHEDULE. ScheduleWatch says when the path names a file this
// process has not followed yet. It looks at most every kInterval (one stat),
// and at once on the first call in a new process: a DataLoader worker forked
// before the epoch's schedule was published finds it at its first read.
//
// Thread-safe; HDF5-free.
#ifndef PRESCIENT_VOL_SCHEDULE_SCHEDULE_WATCH_H_
#define PRESCIENT_VOL_SCHEDULE_SCHEDULE_WATCH_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "cache/base/mutex.h"
#include "cache/core/process_identity.h"

namespace prescient::vol {

class ScheduleWatch {
 public:
  static constexpr std::chrono::milliseconds kInterval{100};

  explicit ScheduleWatch(std::string path) : path_(std::move(path)) {}

  // True once for every new file at the path (a regular file other than the
  // one last reported: device, inode, size or modification time differ).
  // False when it is unchanged, absent, or was looked at less than kInterval
  // ago in this process.
  bool Changed() EXCLUDES(mutex_);

  const std::string& path() const { return path_; }

 private:
  struct Seen {
    dev_t device = 0;
    ino_t inode = 0;
    off_t size = 0;
    std::int64_t mtime_ns = 0;
    friend bool operator==(const Seen&, const Seen&) = default;
  };

  const std::string path_;
  // Steady-clock nanoseconds of the next look, and the process that set it (a
  // forked child looks at once).
  std::atomic<std::int64_t> next_look_ns_{0};
  std::atomic<long> look_pid_{0};
  cache::Mutex mutex_;
  Seen seen_ GUARDED_BY(mutex_);
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_SCHEDULE_WATCH_H_
