#include "cache/io/cpu_headroom.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <charconv>
#include <string_view>

namespace prescient::cache::io {
namespace {

// The runnable count of /proc/loadavg ("0.52 0.58 0.59 3/467 12345": the
// numerator of the fourth field).
std::optional<std::uint32_t> ReadRunnable() noexcept {
  const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[128];
  const ssize_t n = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  if (n <= 0) return std::nullopt;
  std::string_view text(buf, static_cast<std::size_t>(n));
  for (int field = 0; field < 3; ++field) {
    const std::size_t space = text.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    text.remove_prefix(space + 1);
  }
  std::uint32_t runnable = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), runnable);
  if (ec != std::errc() || end == text.data() + text.size() || *end != '/') return std::nullopt;
  return runnable;
}

std::uint32_t AllowedCpus() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0) return static_cast<std::uint32_t>(count);
  }
  // More CPUs than a cpu_set_t holds (1024), or no affinity: the online ones.
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<std::uint32_t>(online) : 1;
}

}  // namespace

std::optional<CpuLoad> ReadCpuLoad() noexcept {
  const std::optional<std::uint32_t> runnable = ReadRunnable();
  if (!runnable) return std::nullopt;
  return CpuLoad{.runnable = *runnable, .cpus = AllowedCpus()};
}

bool CpuHeadroom::SpareCpu(std::uint32_t own_helpers) noexcept {
  const Clock::rep now = Clock::now().time_since_epoch().count();
  const Clock::rep taken = taken_at_.load(std::memory_order_relaxed);
  if (taken == 0 || now - taken >= refresh_.count()) {
    // One caller refreshes; the others use the state they find.
    Clock::rep expected = taken;
    if (taken_at_.compare_exchange_strong(expected, now, std::memory_order_relaxed)) {
      std::optional<CpuLoad> load;
      try {
        load = sampler_();
      } catch (...) {
      }
      std::uint64_t state = 0;  // unreadable: no spare CPU until a sample says so
      if (load && load->cpus > 0) {
        const std::uint32_t others =
            load->runnable > own_helpers ? load->runnable - own_helpers : 0;
        const std::int64_t sample = std::int64_t{others} * kScale;
        const std::uint64_t before = state_.load(std::memory_order_relaxed);
        const auto average = static_cast<std::int64_t>(before >> 32);
        // The first sample stands alone; later ones move the average a
        // quarter of the way, so a thread that is runnable for one sample
        // (a kernel worker, a short-lived process) does not flip the answer.
        const std::int64_t next =
            static_cast<std::uint32_t>(before) == 0 ? sample : average + (sample - average) / 4;
        state = (static_cast<std::uint64_t>(next) << 32) | load->cpus;
      }
      state_.store(state, std::memory_order_relaxed);
    }
  }
  const std::uint64_t state = state_.load(std::memory_order_relaxed);
  const auto cpus = static_cast<std::uint32_t>(state);
  if (cpus == 0) return false;
  // Spare while the others average less than cpus - 1/2: on two CPUs, a
  // lone reader (1) leaves one; two readers (2) do not.
  return static_cast<std::int64_t>(state >> 32) < std::int64_t{cpus} * kScale - kScale / 2;
}

}  // namespace prescient::cache::io
