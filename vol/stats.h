// Per-process counters of what the connector saw, written as JSON.
//
// Counters are atomics so the read hook can bump them without a lock; a
// snapshot is only as consistent as a statistics file needs to be. A forked
// child starts from zero (Runtime resets them in its at-fork handler): its
// reads are its own.
#ifndef PRESCIENT_VOL_STATS_H_
#define PRESCIENT_VOL_STATS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "vol/selection.h"

namespace prescient::vol {

class Stats {
 public:
  void CountFileOpen() { files_opened_.fetch_add(1, std::memory_order_relaxed); }
  void CountDatasetOpen() { datasets_opened_.fetch_add(1, std::memory_order_relaxed); }
  void CountUndecoded() { reads_undecoded_.fetch_add(1, std::memory_order_relaxed); }
  // One dataset read (one element of an H5Dread_multi counts as one read).
  void CountRead(const DecodedSelection& selection, bool simple, std::uint64_t bytes);
  void CountForwarded() { reads_forwarded_.fetch_add(1, std::memory_order_relaxed); }

  std::uint64_t reads() const { return reads_.load(std::memory_order_relaxed); }
  void Reset();

  struct ProcessInfo {
    long pid = 0;
    long parent_pid = 0;
    bool forked_child = false;
    bool enabled = true;
  };
  std::string ToJson(const ProcessInfo& process) const;

 private:
  static constexpr std::size_t kKinds = 5;  // SelectionKind values
  std::atomic<std::uint64_t> files_opened_{0}, datasets_opened_{0};
  std::atomic<std::uint64_t> reads_{0}, reads_simple_{0}, reads_whole_rows_{0},
      reads_undecoded_{0}, reads_forwarded_{0}, reads_scalar_{0};
  std::atomic<std::uint64_t> rows_{0}, bytes_{0};
  std::array<std::atomic<std::uint64_t>, kKinds> selections_{};
};

// Writes `contents` to `path` atomically (temporary file + rename), so a reader
// never sees half a file. Returns an error message, or empty on success.
std::string WriteFileAtomically(const std::string& path, const std::string& contents);

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_STATS_H_
