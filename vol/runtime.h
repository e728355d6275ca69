// Process-wide state of the connector: options (parsed once), statistics,
// logging, and what changes across fork().
//
// DataLoader workers are forked after `import h5py` has loaded the connector:
// they inherit this object but none of its threads. An at-fork handler marks
// the child and zeroes its counters, so each process reports its own reads and
// writes its own statistics file. Nothing here calls HDF5.
#ifndef PRESCIENT_VOL_RUNTIME_H_
#define PRESCIENT_VOL_RUNTIME_H_

#include <mutex>
#include <string>
#include <string_view>

#include "vol/options.h"
#include "vol/stats.h"

namespace prescient::vol {

class Runtime {
 public:
  static Runtime& Get();

  // Settings appended to the connector info string of HDF5_VOL_CONNECTOR; the
  // first non-empty one recorded before options() is first called is used.
  void RecordInfoSettings(std::string_view settings);

  // Parsed on first use; warnings are printed once, here.
  const Options& options();
  bool enabled() { return options().enable; }

  Stats& stats() { return stats_; }
  // Writes the statistics file if PRESCIENT_STATS is set. Cheap to call at
  // every file close.
  void FlushStats();

  void Log(LogLevel level, std::string_view message);

 private:
  Runtime();
  static void AtForkChild();
  std::string StatsPathForThisProcess();

  std::once_flag parse_once_;
  std::mutex mutex_;  // guards info_settings_ and stats file writes
  std::string info_settings_;
  Options options_;
  Stats stats_;
  long pid_;
  long parent_pid_;
  bool forked_child_ = false;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_RUNTIME_H_
