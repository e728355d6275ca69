// Process-wide state of the connector: options (parsed once), statistics,
// logging, and what changes across fork().
//
// DataLoader workers are forked after `import h5py` has loaded the connector:
// they inherit this object but none of its threads. An at-fork handler marks
// the child and zeroes its counters, so each process reports its own reads and
// writes its own statistics file. Nothing here calls HDF5.
#ifndef PRESCIENT_VOL_RUNTIME_RUNTIME_H_
#define PRESCIENT_VOL_RUNTIME_RUNTIME_H_

#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <string_view>

#include "cache/base/mutex.h"
#include "vol/runtime/options.h"
#include "vol/runtime/stats.h"

namespace prescient::vol {

class Runtime {
 public:
  static Runtime& Get();

  // Settings appended to the connector info string of HDF5_VOL_CONNECTOR; the
  // first non-empty one recorded before options() is first called is used.
  void RecordInfoSettings(std::string_view settings);

  // Parsed on first use; warnings are printed once, here. Asked a dozen
  // times per file a loader opens: once parsed, one load.
  const Options& options() {
    if (options_parsed_.load(std::memory_order_acquire)) return options_;
    return ParseOptionsOnce();
  }
  bool enabled() { return options().enable; }

  // The counters; the first call in a process starts its statistics file
  // when PRESCIENT_STATS is set.
  Stats& stats() {
    if (!stats_file_checked_.load(std::memory_order_acquire)) StartStatsFile();
    return stats_;
  }
  // Makes sure this process's statistics file exists even if it counted
  // nothing (called at file close and at connector shutdown). The file itself
  // is always current (stats.h).
  void FlushStats() { stats(); }

  void Log(LogLevel level, std::string_view message);

  // The process a rank's progress belongs to, one that outlives the rank's
  // DataLoader workers: the process the node's segment is kept for
  // (SegmentAnchor: the one the connector was initialised in, or for a
  // worker started by spawn or a forkserver, the training process that
  // started it) when this one works for it, else the process that forked
  // this one, else this one. Workers that reported for themselves left
  // their rank's progress unheld at every epoch's end (their own exit), and
  // the rows of the slower ranks were swept as stale. The same in every
  // process of a rank (a rank started by torch.multiprocessing.spawn reports
  // for its launcher, as its workers do). Reads /proc: call once.
  long rank_owner_pid() const;

  // A fallback happened (a kFallback* counter or kDatasetsWritten): counted
  // every time, and `message` is warned about once per kind and process.
  void Fallback(Counter counter, std::string_view message, std::uint64_t count = 1);

 private:
  Runtime();
  // They take and release mutex_ across fork(), beyond what the analysis follows.
  static void AtForkPrepare() NO_THREAD_SAFETY_ANALYSIS;
  static void AtForkParent() NO_THREAD_SAFETY_ANALYSIS;
  static void AtForkChild() NO_THREAD_SAFETY_ANALYSIS;
  const Options& ParseOptionsOnce();
  std::string StatsPathForThisProcess();
  void StartStatsFile();

  std::once_flag parse_once_;
  std::atomic<bool> options_parsed_{false};
  cache::Mutex mutex_;
  std::string info_settings_ GUARDED_BY(mutex_);
  Options options_;
  Stats stats_;
  long pid_;
  long parent_pid_;
  bool forked_child_ = false;
  std::once_flag stats_file_once_;
  std::atomic<bool> stats_file_checked_{false};
  std::array<std::atomic<bool>, static_cast<std::size_t>(Counter::kCount)> fallback_warned_{};
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_RUNTIME_RUNTIME_H_
