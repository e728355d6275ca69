// Per-process counters of what the connector saw, kept live in a JSON file.
//
// Counters are updated under a mutex (reads are serialised by HDF5's lock
// anyway, so it is uncontended) and mirrored into this process's statistics
// file as they change (live_stats_file.h): the file is current whether the
// process exits normally, with os._exit (DataLoader workers) or is killed.
// A forked child starts from zero with its own file (Runtime's at-fork
// handler calls ForkedChild()).
#ifndef PRESCIENT_VOL_RUNTIME_STATS_H_
#define PRESCIENT_VOL_RUNTIME_STATS_H_

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "vol/read/selection.h"
#include "vol/runtime/live_stats_file.h"

namespace prescient::vol {

enum class Counter : std::size_t {
  kFilesOpened,
  kDatasetsOpened,
  kReads,           // dataset reads (each dataset of an H5Dread_multi counts once)
  kReadsSimple,     // could be served row by row from a cache (read_hook.h)
  kReadsWholeRows,  // selection covers whole rows
  kReadsScalar,
  kReadsUndecoded,          // selection Prescient could not interpret (still forwarded)
  kReadsForwarded,          // passed to the connector underneath
  kReadsTransferForwarded,  // forwarded for their transfer property list (transfer_properties.h)
  kRows,                    // row visits along dimension 0
  kBytes,                   // bytes delivered to the caller
  kReadsServed,             // served from the node cache (not forwarded)
  kRowsHit,                 // distinct rows found in the cache
  kRowsLoaded,              // distinct rows this process loaded on a miss
  kRowsWaited,              // distinct rows another process was loading
  kRowsPrefetched,          // rows this process's I/O threads loaded ahead of use
  kStorageReads,            // read requests to storage (coalesced)
  kStorageBytes,            // bytes read from storage, gaps included
  kStallNs,                 // time read callbacks spent waiting for other loaders
  kScheduleMatches,         // read samples found where the schedule said
  kScheduleMismatches,      // read samples the schedule did not predict
  kSelectionNone,           // one counter per SelectionKind, in its order
  kSelectionAll,
  kSelectionRegular,
  kSelectionIrregular,
  kSelectionPoints,
  kCount,
};

class Stats {
 public:
  struct ProcessInfo {
    long pid = 0;
    long parent_pid = 0;
    bool forked_child = false;
    bool enabled = true;
  };

  void Add(Counter counter, std::uint64_t delta = 1);
  // The same, counted in epoch `epoch`'s block too (prefetch threads know the
  // epoch of the rows they load; reads use the current epoch).
  void AddInEpoch(std::uint32_t epoch, Counter counter, std::uint64_t delta = 1);

  // Per-epoch blocks, once a schedule says how many epochs there are. A
  // running statistics file is rewritten with the larger layout.
  void SetEpochs(std::uint32_t epochs);
  // The epoch reads are counted in (the position tracker's).
  void SetCurrentEpoch(std::uint32_t epoch);
  std::uint64_t GetInEpoch(std::uint32_t epoch, Counter counter) const;
  // One dataset read.
  void CountRead(const DecodedSelection& selection, bool simple, std::uint64_t bytes);
  std::uint64_t Get(Counter counter) const;

  // Starts mirroring into `path` (created now, seeded with the current values).
  // Returns an error message or "".
  std::string StartFile(const std::string& path, const ProcessInfo& process);
  bool has_file() const;

  // In a forked child: zero the counters, forget the parent's file.
  void ForkedChild();

  // The same document as the live file, as a string (for tests and tools).
  std::string ToJson(const ProcessInfo& process) const;

 private:
  using Values = std::array<std::uint64_t, static_cast<std::size_t>(Counter::kCount)>;
  // With values == nullptr, counter fields are LiveStatsFile markers.
  std::string Render(const ProcessInfo& process, bool markers) const;
  void AddLocked(std::optional<std::uint32_t> epoch, Counter counter, std::uint64_t delta);
  std::string OpenFileLocked();

  mutable std::mutex mutex_;
  Values values_{};
  std::vector<Values> epochs_;  // per-epoch blocks (empty without a schedule)
  std::uint32_t current_epoch_ = 0;
  LiveStatsFile file_;
  std::string file_path_;
  ProcessInfo file_process_;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_RUNTIME_STATS_H_
