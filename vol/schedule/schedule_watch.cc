#include "vol/schedule/schedule_watch.h"

#include <sys/stat.h>

namespace prescient::vol {

bool ScheduleWatch::Changed() {
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  const long pid = cache::CurrentPid();
  // The common case, on every read: not yet time to look again.
  if (look_pid_.load(std::memory_order_relaxed) == pid &&
      now < next_look_ns_.load(std::memory_order_relaxed)) {
    return false;
  }
  cache::MutexLock lock(&mutex_);
  look_pid_.store(pid, std::memory_order_relaxed);
  next_look_ns_.store(now + std::chrono::nanoseconds(kInterval).count(), std::memory_order_relaxed);
  struct stat st{};
  if (::stat(path_.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const Seen now_seen{
      .device = st.st_dev,
      .inode = st.st_ino,
      .size = st.st_size,
      .mtime_ns = std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec};
  if (now_seen == seen_) return false;
  seen_ = now_seen;
  return true;
}

}  // namespace prescient::vol
