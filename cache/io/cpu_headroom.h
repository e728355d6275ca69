// Whether the machine has a CPU to spare for a helper thread right now.
//
// A helper thread (the admission thread of vol/serve/admission_worker.h)
// shortens its caller's path only when it runs on a core that would
// otherwise idle: it does the same work plus a hand-over (a copy, a wake-up).
// With every core already taken by readers (DataLoader workers on a small
// node, a CPU-bound first epoch), the thread's work competes with theirs and
// the epoch gets longer (examples/bench/RESULTS.md, "The admission thread
// runs only on a spare CPU").
//
// The signal is the kernel's count of runnable threads (the fourth field of
// /proc/loadavg, the caller included), against the CPUs this process may run
// on (sched_getaffinity). Threads waiting for the device are not runnable, so
// a core whose reader waits for storage counts as spare: exactly when a
// helper can use it. The count is of the whole machine, so other jobs'
// threads count too; that errs towards not using the helper, the path that
// costs no more than before.
//
// Sampled at most once per `refresh` per object, into a moving average of the
// runnable threads besides the caller's own helpers (each sample moves it a
// quarter of the way: about four samples to follow a change). The answer in
// between is the last average's. Thread-safe: callers race only to refresh.
#ifndef PRESCIENT_CACHE_IO_CPU_HEADROOM_H_
#define PRESCIENT_CACHE_IO_CPU_HEADROOM_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

namespace prescient::cache::io {

struct CpuLoad {
  std::uint32_t runnable = 0;  // runnable threads of the machine, the caller's included
  std::uint32_t cpus = 0;      // CPUs this process may run on
};

// Reads the machine's load now; nullopt when /proc is not readable (then
// callers assume no spare CPU).
std::optional<CpuLoad> ReadCpuLoad() noexcept;

class CpuHeadroom {
 public:
  using Clock = std::chrono::steady_clock;
  using Sampler = std::function<std::optional<CpuLoad>()>;
  static constexpr Clock::duration kDefaultRefresh = std::chrono::milliseconds(10);

  explicit CpuHeadroom(Clock::duration refresh = kDefaultRefresh, Sampler sampler = ReadCpuLoad)
      : refresh_(refresh), sampler_(std::move(sampler)) {}

  // True when the runnable threads besides `own_helpers` (the caller's own
  // helper threads that are busy already; the caller itself is counted)
  // average less than the CPUs minus one half: one more thread would find
  // a core of its own most of the time.
  bool SpareCpu(std::uint32_t own_helpers) noexcept;

 private:
  const Clock::duration refresh_;
  const Sampler sampler_;
  static constexpr std::int64_t kScale = 256;  // the average's fixed point
  // The average of the runnable others times kScale << 32 | the CPUs (cpus
  // 0: unreadable, or no sample yet), and when the last sample was taken
  // (steady-clock ticks; 0 = never).
  std::atomic<std::uint64_t> state_{0};
  std::atomic<Clock::rep> taken_at_{0};
};

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_CPU_HEADROOM_H_
