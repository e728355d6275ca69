// How aggressively misses are merged into larger reads.
//
// Reading a gap costs gap / bandwidth; skipping it costs one more request
// (a seek on a disk, a round trip on a parallel file system). Merging pays
// whenever gap < bandwidth x seek time, which is what storage calibration
// measures (storage_calibration.h). The run cap bounds the memory one read
// needs and keeps several I/O threads busy instead of one.
#ifndef PRESCIENT_CACHE_IO_COALESCING_OPTIONS_H_
#define PRESCIENT_CACHE_IO_COALESCING_OPTIONS_H_

#include <cstdint>

namespace prescient::cache::io {

struct CoalescingOptions {
  // Two byte ranges are read as one when the unwanted bytes between them are
  // at most this many. 0 merges only ranges that touch.
  std::uint64_t max_gap_bytes = 256 * 1024;
  // A merged read never grows beyond this many bytes, gaps included. A single
  // row (contiguous) or a single slab of chunks (chunked) larger than this is
  // still read whole: rows are never split across reads.
  std::uint64_t max_run_bytes = 8 * 1024 * 1024;
  // A read of contiguous rows shorter than this covers the windows its rows
  // are in: windows of the most whole rows that fit in this many bytes (at
  // least one row), counted from row 0 (the extra rows are brought into the
  // page cache, not copied: random_access_file.h). HDF5's sieve buffer reads
  // as much after a small read of a contiguous dataset (64 KiB by default),
  // so a native read of a 16 KiB row leaves its neighbours in the page cache
  // and a shuffled epoch finds most of them there: reading exactly the row
  // took four cold reads where native took one. The windows are fixed rather
  // than starting at each read: a shuffled epoch then requests each window
  // once, whole, while windows from each read's row overlapped what earlier
  // reads had brought and left gaps of a few pages, each a device request of
  // its own (1.8x native's requests). A miss brings no more than native's
  // sieve would, which counts where a node reads only a share of the rows.
  // 0 = read exactly the rows. Chunks are always read whole anyway.
  std::uint64_t read_window_bytes = 0;
};

// One request per row or chunk: the baseline that coalescing is measured against.
inline constexpr CoalescingOptions kNoCoalescing{.max_gap_bytes = 0, .max_run_bytes = 0};

// Local disks and SSDs (this machine: ~150 us per random 64 KiB read at
// ~1.5 GB/s sequential, so ~225 KB of gap costs one seek).
inline constexpr CoalescingOptions kDefaultLocalDiskCoalescing{.max_gap_bytes = 256 * 1024,
                                                               .max_run_bytes = 8 * 1024 * 1024};

// Parallel file systems: millisecond request latency at GB/s, so megabytes of
// gap are cheaper than another request.
inline constexpr CoalescingOptions kDefaultParallelFsCoalescing{.max_gap_bytes = 4 * 1024 * 1024,
                                                                .max_run_bytes = 32 * 1024 * 1024};

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_COALESCING_OPTIONS_H_
