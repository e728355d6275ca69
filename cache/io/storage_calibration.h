// Storage calibration: a short measurement of the file's storage at start
// that yields the coalescing gap threshold.
//
// Merging two reads separated by a gap costs gap / bandwidth; issuing them
// separately costs one more request latency ("seek"). So the break-even gap
// is bandwidth x seek time. CalibrateStorage measures both on the file itself:
// a few small random preads (with readahead disabled on a private
// descriptor) and one sequential read, within a time and byte budget.
//
// Cold-cache caveat: if parts of the file are in the page cache (it was just
// written, or read by another job), the probes measure memory, not storage:
// the seek time looks tiny and the threshold collapses to its lower bound.
// `probably_cached` reports this; callers may then prefer a fixed setting.
// The probes themselves leave up to `sequential_bytes` + a few pages cached.
#ifndef PRESCIENT_CACHE_IO_STORAGE_CALIBRATION_H_
#define PRESCIENT_CACHE_IO_STORAGE_CALIBRATION_H_

#include <cstdint>
#include <string>

#include "cache/io/coalescing_options.h"
#include "cache/io/status.h"

namespace prescient::cache::io {

struct CalibrationOptions {
  std::uint32_t random_reads = 16;            // random probes (at least 3 are made)
  std::uint64_t random_read_bytes = 4096;     // size of each random probe
  std::uint64_t sequential_bytes = 4u << 20;  // one sequential read, in 1 MiB preads
  double time_budget_seconds = 0.25;          // random probes stop once this is spent
  std::uint64_t min_gap_bytes = 64u << 10;    // clamp of the derived threshold
  std::uint64_t max_gap_bytes = 16u << 20;
  std::uint64_t seed = 0x5eed;  // probe offsets are reproducible
};

struct StorageProfile {
  double seek_seconds = 0;                // per-request latency beyond transfer time
  double bandwidth_bytes_per_second = 0;  // sequential
  std::uint64_t gap_threshold_bytes = 0;  // bandwidth x seek, clamped
  bool probably_cached = false;           // random probes answered at memory speed
  std::uint32_t random_reads = 0;         // probes actually made
  std::uint64_t bytes_read = 0;
  double elapsed_seconds = 0;

  std::string ToString() const;
};

// Measures the storage under `path`. Small files (< 2 x sequential_bytes)
// are measured with what they have. IoError if the file cannot be read.
Result<StorageProfile> CalibrateStorage(const std::string& path,
                                        const CalibrationOptions& options = {});

// bandwidth x seek, clamped to [min_gap, max_gap].
std::uint64_t GapThreshold(double seek_seconds, double bandwidth_bytes_per_second,
                           std::uint64_t min_gap, std::uint64_t max_gap);

// `base` with max_gap_bytes taken from the profile.
CoalescingOptions CoalescingFromProfile(const StorageProfile& profile,
                                        CoalescingOptions base = kDefaultLocalDiskCoalescing);

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_STORAGE_CALIBRATION_H_
