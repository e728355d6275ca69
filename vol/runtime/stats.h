// Per-process counters of what the connector saw, kept live in a JSON file.
//
// A dataset read is counted once, when it is done: its callback fills a
// ReadRecord (how it was decoded, whether the cache served it, what that cost)
// and commits it in one step. Other events (files opened, rows prefetched by
// the I/O threads, fallbacks) are single Add calls. Counters are updated under
// one mutex and mirrored into this process's statistics file as they change
// (live_stats_file.h): the file is current whether the process exits normally,
// with os._exit (DataLoader workers) or is killed. A forked child starts from
// zero with its own file (Runtime's at-fork handler calls ForkedChild()).
#ifndef PRESCIENT_VOL_RUNTIME_STATS_H_
#define PRESCIENT_VOL_RUNTIME_STATS_H_

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cache/base/mutex.h"
#include "vol/read/forward_reason.h"
#include "vol/read/selection.h"
#include "vol/runtime/live_stats_file.h"

namespace prescient::vol {

enum class Counter : std::size_t {
  kFilesOpened,
  kDatasetsOpened,
  kDatasetsTooSmall,           // opened, not cached for their size (CacheClient::TooSmallToCache)
  kVirtualDatasetsRaw,         // virtual datasets prepared, rows read raw from their sources
  kVirtualDatasetsViaHdf5,     // ... prepared, rows loaded through HDF5 (cache_virtual=1)
  kDatasetsViaHdf5,            // datasets prepared whose rows load through HDF5 (no raw layout)
  kReads,                      // dataset reads (each dataset of an H5Dread_multi counts once)
  kReadsSimple,                // could be served row by row from a cache (read_hook.h)
  kReadsWholeRows,             // selection covers whole rows
  kReadsRowParts,              // selection takes the same part of every row it touches
  kReadsRowPartsNarrow,        // of those: under half a row (read_hook.cc)
  kReadsRowPartsNarrowServed,  // of those: served from the cache
  kReadsRowPartsNarrowSplit,   // of those: in part, the other rows' parts read through HDF5
  kRowsNarrowThroughHdf5,      // rows of those whose parts were read through HDF5
  kReadsCompoundFields,        // served as some members of the stored compound (compound_fields.h)
  kReadsScalar,                //
  kReadsUndecoded,             // selection Prescient could not interpret (still forwarded)
  kReadsForwarded,             // passed to the connector underneath
  kReadsTransferForwarded,     // forwarded for their transfer property list (transfer_properties.h)
  kRows,                       // row visits along dimension 0
  kBytes,                      // bytes delivered to the caller
  kReadsServed,                // served from the node cache (not forwarded)
  kRowsHit,                    // distinct rows found in the cache
  kRowsLoaded,                 // distinct rows this process loaded from storage on a miss
  kRowsWaited,                 // distinct rows another process or thread was loading
  kRowsNotAwaited,      // of rows_loaded: still loading elsewhere after the reader's patience
  kRowsPrefetched,      // rows the prefetch threads read ahead of need
  kRowsReadAround,      // rows read beside a miss on the reader's thread (rest of a chunk)
  kRowsAdmittedBehind,  // of rows_loaded: copied into the cache by the admission thread
  kRowsAdmittedBehindDeclined,  // of those: not kept (full cache, claim taken over meanwhile)
  kRowsAdmittedReadAgain,       // of rows_admitted_behind: read again by the thread, not copied
  kReadsAdmitNoSpareCpu,        // reads that placed their own rows: no CPU was spare for the thread
  kReadsAdmitSmall,             // reads that placed their own rows: too few bytes to hand over
  kRowsNotAdmitted,             // of rows_loaded: delivered but not kept (full cache, claim lost)
  kRowsNotKeptBusy,             // of rows_loaded: delivered unkept, no CPU spare (long runs)
  kAdmitNs,                     // time reads spent keeping the rows they loaded (after loading)
  kFilesWarmed,                 // small files the prefetch thread read into the page cache
  kDatasetsResolved,            // datasets the prefetch thread prepared through HDF5
  kDatasetsFromMemo,            // ... prepared from the node's memo instead (resolution_memo.h)
  kRowsNotPrefetchedParts,      // rows it left to readers of narrow parts (Prefetcher)
  kRowsNotPrefetchedLarge,      // samples' rows it left to readers: small rows, too many to keep
  kRowsPrefetchGivenUp,         // rows it had claimed and released unread: demoted mid-round
  kRawFileOpens,                // descriptors Prescient opened itself for raw reads (FileHandles)
  kRowsRemote,                  // node agent: rows fetched from other nodes' agents
  kRowsServed,                  // node agent: rows sent to other nodes' agents
  kStorageReads,                // read requests to storage (coalesced)
  kStorageBytes,                // bytes read from storage, gaps included
  kStallNs,                     // time read callbacks waited for rows: the two below
  kStallStorageNs,              //   ... for their own storage reads (misses)
  kStallWaitNs,                 //   ... for rows others were loading (prefetch, other processes)
  kScheduleMatches,             // read samples found where the schedule said
  kScheduleMismatches,          // read samples the schedule did not predict
  // Fallbacks: each is also warned about once (Runtime::Fallback).
  kFallbackServeFailed,     // a cached read failed and was forwarded
  kFallbackFileChanged,     // reads of a file changed since it was opened, forwarded
  kFallbackPrefetchFailed,  // prefetch reads that failed (their rows load on demand)
  kFallbackOracleFailed,    // next-use queries that failed (the row got "never")
  kFallbackIndexRebuilt,    // next-use index files found unusable and rebuilt in memory
  kFallbackWritten,         // reads of a dataset written through this process, forwarded
  kFallbackPeerFailed,      // node agent: rows a peer did not deliver in time, read from storage
  kSelectionNone,           // one counter per SelectionKind, in its order
  kSelectionAll,
  kSelectionRegular,
  kSelectionIrregular,
  kSelectionPoints,
  // One counter per ForwardReason after kNone, in its order: why each read of
  // reads_forwarded was.
  kForwardedFirst,
  kCount = kForwardedFirst + static_cast<std::size_t>(ForwardReason::kCount) - 1,
};

// The counter of reads forwarded for `reason` (not kNone).
constexpr Counter ForwardedCounter(ForwardReason reason) {
  return static_cast<Counter>(static_cast<std::size_t>(Counter::kForwardedFirst) +
                              static_cast<std::size_t>(reason) - 1);
}

// Row counters kept per field of the schedule's sample map (images, labels,
// ...), so a benchmark can hold each field's storage rows against the
// simulator's.
enum class FieldCounter : std::size_t {
  kRowsHit,
  kRowsLoaded,
  kRowsWaited,
  kRowsPrefetched,
  kRowsReadAround,
  kRowsRemote,  // node agent only, as the top-level counters of that name
  kRowsServed,
  kCount,
};

// Node-wide counters of the node's cache segment, summed over every process
// and agent of the node (cache::CacheStats). A process's file holds a snapshot
// of them, refreshed at most every 100 ms while it serves reads: merging files
// takes the latest snapshot per segment, never a sum.
enum class NodeCounter : std::size_t {
  kHits,
  kMisses,
  kWaits,
  kEvictions,
  kRejections,
  kPrefetchDeclined,
  kRecoveries,          // lock-owner deaths repaired
  kTakeovers,           // claims of dead loaders released for reloading
  kStallTakeovers,      // rows taken from live loaders that made no progress
  kLeaderTakeovers,     // prefetch leaderships taken from stuck live leaders
  kClaimsReleasedLate,  // claims let go after a stopped lock holder resumed
  kCorruptions,         // out-of-range values found in the segment, repaired
  kBackingFailures,     // extents the filesystem could not back (full)
  kDroppedRows,         // rows of dropped datasets
  kRowsResident,
  kBytesResident,
  kBackedBytes,    // memory the segment holds in its filesystem
  kCapacityBytes,  // its data area
  kCount,
};
using NodeValues = std::array<std::uint64_t, static_cast<std::size_t>(NodeCounter::kCount)>;

// One dataset read: what the decoder found and what serving it cost.
struct ReadRecord {
  // False with the cache off (PRESCIENT_CACHE=0): the read was forwarded
  // without being looked at, and counts as a read and a forwarded one only.
  bool inspected = true;
  // Decoding (read_hook.h); `decoded` false: the selection was not understood.
  bool decoded = false;
  DecodedSelection selection;
  bool simple = false;
  bool narrow_row_part = false;
  bool transfer_forwarded = false;
  std::uint64_t bytes = 0;
  // Why the read was forwarded, when it was (served false).
  ForwardReason forward_reason = ForwardReason::kNone;
  // Outcome.
  bool served = false;  // false: forwarded to the connector underneath
  // Served in part: the cached rows from the cache, the parts of these many
  // others through HDF5 (a narrow read, CacheClient::TryServe).
  bool narrow_in_part = false;
  std::uint64_t rows_narrow_through_hdf5 = 0;
  // Served as some members of the stored compound type, gathered from its
  // stored elements (CacheClient::TryServe).
  bool fields_gathered = false;
  std::uint64_t rows_hit = 0, rows_loaded = 0, rows_waited = 0, rows_read_around = 0;
  std::uint64_t rows_admitted_behind = 0;      // of rows_loaded
  std::uint64_t rows_admitted_read_again = 0;  // of rows_admitted_behind
  std::uint64_t rows_not_awaited = 0;          // of rows_loaded
  std::uint64_t rows_not_admitted = 0;         // of rows_loaded
  std::uint64_t rows_not_kept_busy = 0;        // of rows_loaded
  std::uint64_t admit_ns = 0;                  // keeping the loaded rows, after loading them
  std::uint64_t storage_reads = 0, storage_bytes = 0;
  std::uint64_t stall_storage_ns = 0, stall_wait_ns = 0;
  std::uint64_t schedule_matches = 0, schedule_mismatches = 0;
  // The schedule field the dataset is bound to, if any (its row counters).
  std::optional<std::uint32_t> field;
  // The schedule's epoch the read was placed in, if any: it and the counts
  // made after it (until the next placed read) go to that epoch's block.
  std::optional<std::uint32_t> epoch;
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
  // One read, all its counters under one lock.
  void Commit(const ReadRecord& read);

  // Per-epoch blocks, once a schedule says how many epochs there are. A
  // running statistics file is rewritten with the larger layout.
  void SetEpochs(std::uint32_t epochs);
  // Per-field blocks, once a schedule names its fields (a running file is
  // rewritten with the larger layout, as for epochs).
  void SetFields(const std::vector<std::string>& names);
  void AddField(std::uint32_t field, FieldCounter counter, std::uint64_t delta);
  std::uint64_t GetField(std::uint32_t field, FieldCounter counter) const;
  std::uint64_t GetInEpoch(std::uint32_t epoch, Counter counter) const;
  std::uint64_t Get(Counter counter) const;

  // A snapshot of the node's counters (see NodeCounter). The first call adds
  // the "node" block, naming the segment, to the file.
  void SetNode(const std::string& segment, const NodeValues& values);

  // Starts mirroring into `path` (created now, seeded with the current values).
  // Returns an error message or "".
  std::string StartFile(const std::string& path, const ProcessInfo& process);
  bool has_file() const;

  // fork(): the prepare handler takes the lock, so the child inherits it
  // consistent; the child releases it, zeroes the counters and forgets the
  // parent's file.
  void LockForFork() ACQUIRE(mutex_);
  void UnlockInParent() RELEASE(mutex_);
  void ResetInChild() RELEASE(mutex_);

  // The same document as the live file, as a string (for tests and tools).
  std::string ToJson(const ProcessInfo& process) const;

 private:
  using Values = std::array<std::uint64_t, static_cast<std::size_t>(Counter::kCount)>;
  using FieldValues = std::array<std::uint64_t, static_cast<std::size_t>(FieldCounter::kCount)>;
  // With values == nullptr, counter fields are LiveStatsFile markers.
  std::string Render(const ProcessInfo& process, bool markers) const REQUIRES(mutex_);
  void AddLocked(std::optional<std::uint32_t> epoch, Counter counter, std::uint64_t delta)
      REQUIRES(mutex_);
  void AddFieldLocked(std::uint32_t field, FieldCounter counter, std::uint64_t delta)
      REQUIRES(mutex_);
  // Live-file slot of a field counter: after the totals and every epoch block.
  std::size_t FieldSlot(std::uint32_t field, FieldCounter counter) const REQUIRES(mutex_);
  std::string OpenFileLocked() REQUIRES(mutex_);
  // Live-file slot of a node counter: after the field blocks.
  std::size_t NodeSlot(NodeCounter counter) const REQUIRES(mutex_);

  mutable cache::Mutex mutex_;
  Values values_ GUARDED_BY(mutex_){};
  std::vector<Values> epochs_ GUARDED_BY(mutex_);  // per-epoch blocks (empty without a schedule)
  std::vector<std::string> field_names_ GUARDED_BY(mutex_);
  std::vector<FieldValues> fields_ GUARDED_BY(mutex_);  // per-field blocks (empty without a map)
  std::uint32_t current_epoch_ GUARDED_BY(mutex_) = 0;
  std::string node_segment_ GUARDED_BY(mutex_);  // empty: no node block yet
  NodeValues node_ GUARDED_BY(mutex_){};
  LiveStatsFile file_ GUARDED_BY(mutex_);
  std::string file_path_ GUARDED_BY(mutex_);
  ProcessInfo file_process_ GUARDED_BY(mutex_);
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_RUNTIME_STATS_H_
