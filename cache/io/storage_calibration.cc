#include "cache/io/storage_calibration.h"

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "cache/io/random_access_file.h"

namespace prescient::cache::io {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Below this a 4 KiB "random" read came from memory, not a device.
constexpr double kCachedLatencySeconds = 20e-6;

}  // namespace

std::uint64_t GapThreshold(double seek_seconds, double bandwidth_bytes_per_second,
                           std::uint64_t min_gap, std::uint64_t max_gap) {
  const double gap = seek_seconds * bandwidth_bytes_per_second;
  if (!(gap > static_cast<double>(min_gap))) return min_gap;  // also NaN
  if (gap >= static_cast<double>(max_gap)) return max_gap;
  return static_cast<std::uint64_t>(std::llround(gap));
}

Result<StorageProfile> CalibrateStorage(const std::string& path,
                                        const CalibrationOptions& options) {
  // Two private descriptors: readahead would turn a 4 KiB probe into a
  // 128 KiB read and inflate the seek estimate.
  auto random_file = PosixFile::Open(path, AccessPattern::kRandom);
  if (!random_file.ok()) return random_file.status();
  auto sequential_file = PosixFile::Open(path);
  if (!sequential_file.ok()) return sequential_file.status();
  (void)::posix_fadvise((*sequential_file)->fd(), 0, 0, POSIX_FADV_SEQUENTIAL);
  auto size_or = (*random_file)->Size();
  if (!size_or.ok()) return size_or.status();
  const std::uint64_t size = *size_or;
  const std::uint64_t probe = std::max<std::uint64_t>(options.random_read_bytes, 512);
  if (size < 2 * probe) {
    return Status::InvalidArgument("'" + path + "' is too small (" + std::to_string(size) +
                                   " bytes) to calibrate storage on");
  }

  StorageProfile profile;
  const Clock::time_point start = Clock::now();
  std::mt19937_64 rng(options.seed);

  // Sequential: a region in the second half, so random probes (anywhere) rarely land in it.
  const std::uint64_t sequential = std::min(options.sequential_bytes, size / 2);
  const std::uint64_t seq_begin =
      (size / 2 + rng() % (size / 2 - sequential + 1)) & ~std::uint64_t{4095};
  std::vector<std::byte> buffer(std::min<std::uint64_t>(sequential, 1u << 20));
  const Clock::time_point seq_start = Clock::now();
  for (std::uint64_t done = 0; done < sequential;) {
    const std::uint64_t n = std::min<std::uint64_t>(buffer.size(), sequential - done);
    PRESCIENT_RETURN_IF_ERROR((*sequential_file)->ReadExact(seq_begin + done, {buffer.data(), n}));
    done += n;
  }
  const double seq_seconds = std::max(SecondsSince(seq_start), 1e-9);
  profile.bandwidth_bytes_per_second = static_cast<double>(sequential) / seq_seconds;
  profile.bytes_read += sequential;

  // Random probes: page-aligned offsets over the whole file.
  std::vector<double> latencies;
  const std::uint32_t wanted = std::max<std::uint32_t>(options.random_reads, 3);
  for (std::uint32_t i = 0; i < wanted; ++i) {
    if (i >= 3 && SecondsSince(start) > options.time_budget_seconds) break;
    const std::uint64_t offset = (rng() % (size - probe)) & ~std::uint64_t{4095};
    const Clock::time_point t = Clock::now();
    PRESCIENT_RETURN_IF_ERROR((*random_file)->ReadExact(offset, {buffer.data(), probe}));
    latencies.push_back(SecondsSince(t));
    profile.bytes_read += probe;
  }
  std::sort(latencies.begin(), latencies.end());
  const double median = latencies[latencies.size() / 2];
  profile.random_reads = static_cast<std::uint32_t>(latencies.size());
  profile.seek_seconds =
      std::max(0.0, median - static_cast<double>(probe) / profile.bandwidth_bytes_per_second);
  profile.probably_cached = median < kCachedLatencySeconds;
  profile.gap_threshold_bytes =
      GapThreshold(profile.seek_seconds, profile.bandwidth_bytes_per_second, options.min_gap_bytes,
                   options.max_gap_bytes);
  profile.elapsed_seconds = SecondsSince(start);
  return profile;
}

CoalescingOptions CoalescingFromProfile(const StorageProfile& profile, CoalescingOptions base) {
  base.max_gap_bytes = profile.gap_threshold_bytes;
  return base;
}

std::string StorageProfile::ToString() const {
  char text[256];
  std::snprintf(text, sizeof(text),
                "seek %.1f us, bandwidth %.1f MB/s, gap threshold %llu bytes%s (%u probes, "
                "%.1f MiB, %.1f ms)",
                seek_seconds * 1e6, bandwidth_bytes_per_second / 1e6,
                static_cast<unsigned long long>(gap_threshold_bytes),
                probably_cached ? ", probably cached" : "", random_reads,
                static_cast<double>(bytes_read) / (1 << 20), elapsed_seconds * 1e3);
  return text;
}

}  // namespace prescient::cache::io
