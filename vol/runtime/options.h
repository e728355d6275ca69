// The connector's settings: one typed struct, parsed once per process from
// PRESCIENT_* environment variables and the `key=value;` settings appended to
// the connector info string (HDF5_VOL_CONNECTOR="prescient under_vol=0;
// under_info={};stats=/tmp/s.json"). The info string wins over the environment.
//
// Every setting is one row of the table in options.cc (name, variable, info
// key, type, default, meaning); README.md's configuration table lists the same
// rows. An invalid value yields one warning naming the variable and the
// accepted values, and the whole connector falls back to pure pass-through:
// a half-applied configuration would be a surprise under someone's training run.
#ifndef PRESCIENT_VOL_RUNTIME_OPTIONS_H_
#define PRESCIENT_VOL_RUNTIME_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/core/cache_options.h"

namespace prescient::vol {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// Which virtual datasets are cached (PRESCIENT_CACHE_VIRTUAL).
enum class VirtualCaching {
  kOff,  // none: their reads are forwarded
  kRaw,  // those whose rows read raw from their sources (serve/virtual_rows.h)
  kAll,  // every one that can be watched, the others' misses loaded through HDF5
};

struct Options {
  // PRESCIENT_ENABLE: false = pure pass-through (no decoding, no cache).
  bool enable = true;
  // PRESCIENT_LOG: what Prescient prints on stderr.
  LogLevel log_level = LogLevel::kWarn;
  // PRESCIENT_STATS: where each process writes its counters as JSON (empty:
  // nowhere). "%p" is replaced by the pid; processes other than the first
  // (forked DataLoader workers) insert ".<pid>" before ".json".
  std::string stats_path;

  // PRESCIENT_CACHE: serve simple reads from the node-shared cache.
  bool cache_enabled = true;
  // PRESCIENT_CACHE_VIRTUAL: which virtual datasets are cached, keyed by
  // their source files (serve/virtual_sources.h). By default those whose rows
  // read raw from their sources: a miss is then a pread, where loading it
  // through HDF5 costs more than the native read it replaces when a loader
  // opens the dataset per sample (examples/bench/virtual.py).
  VirtualCaching cache_virtual = VirtualCaching::kRaw;
  // PRESCIENT_CACHE_SIZE, PRESCIENT_NODE_ID, PRESCIENT_KEEP_CACHE,
  // PRESCIENT_SHM_DIR: the segment (cache/core/cache_options.h).
  cache::CacheOptions cache;
  // PRESCIENT_SCHEDULE: schedule file for clairvoyant prefetch and eviction.
  std::string schedule_path;
  // PRESCIENT_FOLLOW: the schedule is written while the job runs (the Python
  // follower, python/prescient, publishes each epoch's order as the sampler
  // makes it): a missing file is not an error, and a file replaced at the path
  // is followed from the next read on.
  bool follow = false;
  // PRESCIENT_FOLLOW_RECORD (set by the follower, not by users): the pid of a
  // DataLoader worker whose first fetch loads the connector; its first read
  // begins the recording the follower could not begin (ReadRecorder).
  std::optional<long> follow_record_pid;
  // PRESCIENT_RANK, else the launcher's RANK, OMPI_COMM_WORLD_RANK, PMI_RANK,
  // SLURM_PROCID; nullopt when none is set (rank 0 is then assumed).
  std::optional<std::uint32_t> rank;
  // PRESCIENT_PREFETCH: read ahead of the loader (needs a schedule).
  bool prefetch = true;
  // PRESCIENT_IO_THREADS: I/O threads of the node's prefetch leader.
  unsigned io_threads = 2;
  // PRESCIENT_ADMIT_BEHIND: bytes of loaded rows that may wait for the
  // process's admission thread (vol/serve/admission_worker.h); 0 = the
  // reader copies them into the cache itself.
  std::uint64_t admit_behind_bytes = 16ull << 20;
  // PRESCIENT_ADMIT_BEHIND_WHEN=always: hand rows over even when no CPU is
  // spare for the thread (by default, spare-cpu, the reader then places them
  // itself: cache/io/cpu_headroom.h).
  bool admit_behind_always = false;
  // PRESCIENT_BUSY_UNKEPT_RUN: with spare-cpu and no CPU spare, a read whose
  // loaded rows lie in runs of this many bytes or more on average delivers
  // them without keeping them (AdmissionWorker::LeavesUnkept); 0 (the
  // default) = kept.
  std::uint64_t busy_unkept_run_bytes = 0;
  // PRESCIENT_ADMIT_READ_AGAIN: the admission thread reads rows stored as
  // they are in the file again itself instead of taking the reader's copy.
  bool admit_read_again = true;
  // PRESCIENT_COALESCE_GAP: merge missing rows whose gap in the file is
  // below this many bytes; nullopt = the local-disk default (256 KiB,
  // cache::io::kDefaultLocalDiskCoalescing): nothing is probed at start.
  std::optional<std::uint64_t> coalesce_gap;
  // PRESCIENT_READ_WINDOW: a miss of contiguous rows shorter than this brings
  // in the window of whole rows, counted from row 0, that it lies in
  // (cache::io::CoalescingOptions::read_window_bytes); nullopt = auto
  // (MissReadWindowBytes).
  std::optional<std::uint64_t> read_window_bytes;
  // How many nodes the launcher says the job spans (torchrun's WORLD_SIZE /
  // LOCAL_WORLD_SIZE, Open MPI's and MPICH's world and local sizes, Slurm's
  // SLURM_JOB_NUM_NODES); 1 when no launcher variable is set (one process),
  // nullopt when they do not say (a world size without a local one).
  std::optional<std::uint32_t> job_nodes = 1;
  // PRESCIENT_MIN_DATASET_BYTES: without a schedule file, a contiguous
  // dataset smaller than this is not cached (CacheClient::TooSmallToCache); 0
  // = cache every one. 128 KiB is Linux's default read-ahead: the storage
  // read of an object header at its open brings that much after it along.
  std::uint64_t min_dataset_bytes = 128ull << 10;
};

struct ParsedOptions {
  Options options;
  // One entry per rejected setting; non-empty means `options.enable` is false.
  std::vector<std::string> warnings;
};

using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// Pure: reads variables through `env` and the info-string `settings`
// ("key=value;key=value"), never the process environment directly.
ParsedOptions ParseOptions(const EnvLookup& env, std::string_view settings);

// What a miss of small contiguous rows reads around itself: the
// PRESCIENT_READ_WINDOW setting, else 128 KiB where the job spans one or two
// nodes and 64 KiB (HDF5's sieve size) otherwise. In a shuffled epoch a node
// reading all of the rows, or half, reads most of a window's rows while it is
// still in the page cache, so a window of twice the sieve halves the device
// requests a cold epoch waits for (imglab-rows at a quarter cache: 1.07-1.28x
// native against 0.75-0.90x with 64 KiB; examples/bench/RESULTS.md); a node
// of a larger job reads too few of the extra rows to pay for their bytes.
std::uint64_t MissReadWindowBytes(const Options& options);

// The process environment, for ParseOptions.
std::optional<std::string> ProcessEnv(std::string_view name);

// One row per setting, for documentation and `--help`-like listings.
struct OptionDoc {
  std::string_view variable, info_key, accepted, default_value, meaning;
};
const std::vector<OptionDoc>& OptionDocs();

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_RUNTIME_OPTIONS_H_
