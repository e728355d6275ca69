// StallWatch: tells a stopped or hung peer from a busy one.
//
// A peer makes progress when its heartbeat moves (every call a process makes
// into the cache bumps its attach record's heartbeat) or its CPU time grows
// (a loader decoding a chunk calls nothing but burns CPU). A peer that has
// done neither for a while (SIGSTOP, a debugger, a frozen cgroup, a process
// blocked in the kernel) is stuck, even though it is alive, and its claims may
// be taken over. Process-local state of one observer; not thread-safe.
#ifndef PRESCIENT_CACHE_CORE_STALL_WATCH_H_
#define PRESCIENT_CACHE_CORE_STALL_WATCH_H_

#include <chrono>
#include <cstdint>

#include "cache/core/process_identity.h"

namespace prescient::cache::detail {

class StallWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // Records what `who` looks like `now`; returns how long it has made no
  // progress (zero when it just did, or when it is another peer than last time).
  std::chrono::milliseconds Observe(const ProcessIdentity& who, std::uint64_t heartbeat,
                                    const ProcessStatus& status, Clock::time_point now) {
    if (!(who == who_) || heartbeat != heartbeat_ || status.cpu_ticks != cpu_ticks_) {
      who_ = who;
      heartbeat_ = heartbeat;
      cpu_ticks_ = status.cpu_ticks;
      since_ = now;
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(now - since_);
  }

 private:
  ProcessIdentity who_;
  std::uint64_t heartbeat_ = 0;
  std::uint64_t cpu_ticks_ = 0;
  Clock::time_point since_{};
};

}  // namespace prescient::cache::detail

#endif  // PRESCIENT_CACHE_CORE_STALL_WATCH_H_
