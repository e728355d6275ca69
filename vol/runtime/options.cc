#include "vol/runtime/options.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <utility>

namespace prescient::vol {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::optional<bool> ParseBool(std::string_view v) {
  const std::string s = Lower(v);
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  return std::nullopt;
}

std::optional<LogLevel> ParseLogLevel(std::string_view v) {
  const std::string s = Lower(v);
  if (s == "error") return LogLevel::kError;
  if (s == "warn" || s == "warning") return LogLevel::kWarn;
  if (s == "info") return LogLevel::kInfo;
  if (s == "debug") return LogLevel::kDebug;
  return std::nullopt;
}

std::optional<std::string> ParsePath(std::string_view v) {
  if (v.empty()) return std::nullopt;
  return std::string(v);
}

std::optional<std::uint64_t> ParseUnsigned(std::string_view v, std::uint64_t max) {
  if (v.empty() || v.size() > 19) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (value > max) return std::nullopt;
  return value;
}

std::optional<std::uint64_t> ParseBytes(std::string_view v) {
  cache::Result<std::uint64_t> bytes = cache::ParseByteSize(v);
  if (!bytes.ok()) return std::nullopt;
  return bytes.value();
}

bool ValidNodeId(std::string_view v) {
  if (v.empty() || v.size() > 64) return false;
  return std::all_of(v.begin(), v.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

// Rows for yes/no settings: one lambda per Options member.
template <bool Options::* kMember>
bool ApplyBool(std::string_view v, Options& o) {
  auto b = ParseBool(v);
  if (b) o.*kMember = *b;
  return b.has_value();
}

// Rows for sizes in bytes (a unit allowed; 0 where the row says what it means).
template <std::uint64_t Options::* kMember>
bool ApplyBytes(std::string_view v, Options& o) {
  auto b = ParseBytes(v);
  if (b) o.*kMember = *b;
  return b.has_value();
}

// Rows for sizes that may be "auto" (the member left unset: a default decided
// where it is used).
template <std::optional<std::uint64_t> Options::* kMember>
bool ApplyAutoBytes(std::string_view v, Options& o) {
  if (Lower(v) == "auto") {
    (o.*kMember).reset();
    return true;
  }
  auto b = ParseBytes(v);
  if (b) o.*kMember = *b;
  return b.has_value();
}

constexpr const char* kBoolAccepted = "1 or 0 (also true/false, yes/no, on/off)";

// Launcher variables that carry the rank when PRESCIENT_RANK is not set, in
// the order they are consulted.
constexpr const char* kLauncherRankVariables[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                                  "SLURM_PROCID"};

// The nodes a job spans, from its launcher's variables: the first pair of
// (ranks in the job, ranks on this node) that is set (a job of one or two
// ranks spans at most as many nodes), else Slurm's node count. 1 when none is
// set (one process); nullopt when they do not say.
std::optional<std::uint32_t> JobNodes(const EnvLookup& env) {
  constexpr std::pair<const char*, const char*> kWorldAndLocal[] = {
      {"WORLD_SIZE", "LOCAL_WORLD_SIZE"},  // torchrun
      {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"PMI_SIZE", "MPI_LOCALNRANKS"},  // MPICH's Hydra
  };
  bool any = false;
  for (const auto& [world_variable, local_variable] : kWorldAndLocal) {
    const std::optional<std::string> world_text = env(world_variable);
    if (!world_text) continue;
    any = true;
    const std::optional<std::string> local_text = env(local_variable);
    const auto world = ParseUnsigned(*world_text, 1u << 24);
    const auto local = local_text ? ParseUnsigned(*local_text, 1u << 24) : std::nullopt;
    if (world && local && *world > 0 && *local > 0) {
      return static_cast<std::uint32_t>((*world + *local - 1) / *local);
    }
    if (world && *world > 0 && *world <= 2) return static_cast<std::uint32_t>(*world);
  }
  for (const char* variable : {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}) {
    if (const std::optional<std::string> text = env(variable)) {
      const auto nodes = ParseUnsigned(*text, 1u << 24);
      if (nodes && *nodes > 0) return static_cast<std::uint32_t>(*nodes);
      any = true;
    }
  }
  if (any) return std::nullopt;
  return 1;
}

// The table. Each row: how to read one setting into Options.
struct OptionRow {
  OptionDoc doc;
  // Returns false when the value is not accepted.
  bool (*apply)(std::string_view value, Options& options);
};

const std::vector<OptionRow>& Rows() {
  static const std::vector<OptionRow> rows = {
      {{"PRESCIENT_ENABLE", "enable", kBoolAccepted, "1",
        "0 makes Prescient a pure pass-through: every call forwarded, nothing decoded or cached"},
       &ApplyBool<&Options::enable>},
      {{"PRESCIENT_LOG", "log", "error, warn, info, debug", "warn",
        "what Prescient prints on stderr (prefixed 'prescient:')"},
       [](std::string_view v, Options& o) {
         auto l = ParseLogLevel(v);
         if (l) o.log_level = *l;
         return l.has_value();
       }},
      {{"PRESCIENT_STATS", "stats", "a file path; %p is replaced by the pid", "(none)",
        "per-process counters as JSON, kept current in the file while the process runs (also "
        "after os._exit or SIGKILL); forked workers write <path>.<pid>.json"},
       [](std::string_view v, Options& o) {
         auto p = ParsePath(v);
         if (p) o.stats_path = *p;
         return p.has_value();
       }},
      {{"PRESCIENT_CACHE", "cache", kBoolAccepted, "1",
        "serve simple reads (whole rows or the same half or more of each row, stored type) from "
        "the "
        "node-shared cache in shared memory"},
       &ApplyBool<&Options::cache_enabled>},
      {{"PRESCIENT_CACHE_VIRTUAL", "cache_virtual", "raw, or 1 (all) or 0 (none) as for yes/no",
        "raw",
        "which virtual datasets are cached, under keys that include the identity of every file "
        "HDF5 may take their sources from (a source replaced or rewritten is noticed at the next "
        "dataset open, within a second under a dataset kept open). raw: those whose mappings "
        "take whole rows of the same type from contiguous datasets, or whole chunks from "
        "datasets chunked alike (deflate, shuffle, bitshuffle), in at most 256 files, and give no "
        "row twice, a miss being a pread of the source (first epoch 1.20-1.29x, later "
        "1.42-1.63x opened per sample: examples/bench/RESULTS.md, \"Virtual datasets\"); the "
        "others are forwarded. 1: the others too, their misses loaded through HDF5, which costs "
        "more than the native read "
        "when the dataset is opened per sample (first epoch 0.8x). 0: none"},
       [](std::string_view v, Options& o) {
         if (Lower(v) == "raw") {
           o.cache_virtual = VirtualCaching::kRaw;
           return true;
         }
         auto b = ParseBool(v);
         if (b) o.cache_virtual = *b ? VirtualCaching::kAll : VirtualCaching::kOff;
         return b.has_value();
       }},
      {{"PRESCIENT_CACHE_SIZE", "cache_size", "bytes with a unit: 8GiB, 512MiB, 1.5G, 100MB, 4096",
        "min(50% of free /dev/shm, 25% of RAM)",
        "size of the node's shared segment; the first process on the node decides"},
       [](std::string_view v, Options& o) {
         auto b = ParseBytes(v);
         if (b) o.cache.capacity_bytes = *b;
         return b.has_value() && *b > 0;
       }},
      {{"PRESCIENT_NODE_ID", "node_id", "1-64 characters of [A-Za-z0-9._-]", "the host name",
        "the node's identity: processes with the same id share one cache (set it to emulate "
        "several nodes on one machine)"},
       [](std::string_view v, Options& o) {
         if (!ValidNodeId(v)) return false;
         o.cache.node_id = std::string(v);
         return true;
       }},
      {{"PRESCIENT_KEEP_CACHE", "keep_cache", kBoolAccepted, "0",
        "keep the shared segment when the last process exits, so the next job starts warm"},
       [](std::string_view v, Options& o) {
         auto b = ParseBool(v);
         if (b) o.cache.keep_after_exit = *b;
         return b.has_value();
       }},
      {{"PRESCIENT_SHM_DIR", "shm_dir", "an existing directory on a tmpfs", "/dev/shm",
        "where the shared segment lives"},
       [](std::string_view v, Options& o) {
         auto p = ParsePath(v);
         if (p) o.cache.shm_dir = *p;
         return p.has_value();
       }},
      {{"PRESCIENT_SCHEDULE", "schedule", "a schedule file (prescient-schedule generate)", "(none)",
        "the access schedule: clairvoyant prefetch and next-use eviction (LRU without one)"},
       [](std::string_view v, Options& o) {
         auto p = ParsePath(v);
         if (p) o.schedule_path = *p;
         return p.has_value();
       }},
      {{"PRESCIENT_FOLLOW", "follow", kBoolAccepted, "0",
        "follow the samplers' orders at run time: the Python follower (python/prescient) writes "
        "the schedule as each epoch starts, and PRESCIENT_SCHEDULE names where"},
       &ApplyBool<&Options::follow>},
      {{"PRESCIENT_FOLLOW_RECORD", "follow_record", "a process id", "(none)",
        "set by the follower, not by users: a DataLoader worker whose first fetch imports h5py "
        "(and so loads the connector) has that fetch's reads recorded from its first read"},
       [](std::string_view v, Options& o) {
         auto pid = ParseUnsigned(v, 1u << 30);
         if (pid && *pid > 0) o.follow_record_pid = static_cast<long>(*pid);
         return pid.has_value() && *pid > 0;
       }},
      {{"PRESCIENT_RANK", "rank", "an integer >= 0",
        "RANK, OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID, else 0",
        "this process's rank in the schedule (DataLoader workers inherit it)"},
       [](std::string_view v, Options& o) {
         auto r = ParseUnsigned(v, 1u << 24);
         if (r) o.rank = static_cast<std::uint32_t>(*r);
         return r.has_value();
       }},
      {{"PRESCIENT_PREFETCH", "prefetch", kBoolAccepted, "1",
        "read ahead of the loader on I/O threads (with a schedule)"},
       &ApplyBool<&Options::prefetch>},
      {{"PRESCIENT_IO_THREADS", "io_threads", "1-64", "2",
        "I/O threads of the node's prefetch leader"},
       [](std::string_view v, Options& o) {
         auto n = ParseUnsigned(v, 64);
         if (n && *n >= 1) o.io_threads = static_cast<unsigned>(*n);
         return n.has_value() && *n >= 1;
       }},
      {{"PRESCIENT_ADMIT_BEHIND", "admit_behind", "bytes with a unit (0 = off)", "16MiB",
        "rows (larger than 4 KiB) a read loaded on a miss go to the caller at once and are "
        "copied into the cache by a thread of the process; at most this many bytes wait (or one "
        "read, when none does), and the process keeps at most this much memory for it; beyond "
        "it, and with 0, the reader copies them itself"},
       &ApplyBytes<&Options::admit_behind_bytes>},
      {{"PRESCIENT_ADMIT_READ_AGAIN", "admit_read_again", kBoolAccepted, "1",
        "for rows stored as they are in the file (contiguous, or chunked without filters) that a "
        "read hands over 256 KiB or more at a time, the admission thread reads them again itself, "
        "from the page cache the reader's read just filled, instead of taking a copy from the "
        "reader; 0 = the reader copies them"},
       &ApplyBool<&Options::admit_read_again>},
      {{"PRESCIENT_ADMIT_BEHIND_WHEN", "admit_behind_when", "spare-cpu or always", "spare-cpu",
        "spare-cpu: a read hands its rows to the admission thread only while the machine has a "
        "CPU to spare for it (runnable threads besides the thread averaging below the CPUs the "
        "process may use minus one half; /proc/loadavg, sampled every 10 ms); with every CPU "
        "busy the reader places them itself, which costs less in all (no second copy, no "
        "wake-up). always: whenever the budget allows"},
       [](std::string_view v, Options& o) {
         const std::string when = Lower(v);
         if (when != "spare-cpu" && when != "always") return false;
         o.admit_behind_always = when == "always";
         return true;
       }},
      {{"PRESCIENT_BUSY_UNKEPT_RUN", "busy_unkept_run", "bytes with a unit (0 = off)", "0",
        "with PRESCIENT_ADMIT_BEHIND_WHEN=spare-cpu, while no CPU is spare, a read whose missed "
        "rows, stored as they are in the file, lie in runs of consecutive rows of this many bytes "
        "or more on average (a sample or a slice read whole) delivers them without keeping them: "
        "the first epoch no longer copies them into fresh shared memory on cores the loop fills, "
        "and later epochs get no hits from them. For a loop whose own work dominates (fastMRI's "
        "slices: first epoch 0.82-0.94x kept, 1.06-1.14x unkept, later epochs alike within the "
        "machine's noise); not for one whose "
        "hits pay (PDEBench: 0.82x, then 1.12-1.18x kept; 0.89-1.15x, about native's, in every "
        "epoch unkept). "
        "256KiB suits such a loop; 0 = keep every missed row"},
       &ApplyBytes<&Options::busy_unkept_run_bytes>},
      {{"PRESCIENT_WAIT_PATIENCE", "wait_patience", "0-1000", "2",
        "a read that needs a row another process is loading (the prefetch thread, another "
        "worker) waits this many times as long as the process's own reads of rows take on "
        "average (at least 0.1 ms, at most 50 ms), then reads the row itself; the loader still "
        "caches it. 0 = wait until the row is cached (each row read once per node). The node "
        "agent's rows are always waited for"},
       [](std::string_view v, Options& o) {
         auto n = ParseUnsigned(v, 1000);
         if (n) o.cache.wait_patience_loads = static_cast<std::uint32_t>(*n);
         return n.has_value();
       }},
      {{"PRESCIENT_READ_WINDOW", "read_window", "auto, or bytes with a unit (0 = the rows only)",
        "auto",
        "a miss of contiguous rows shorter than this brings in the window of whole rows it lies "
        "in (counted from row 0; the neighbours go to the page cache, not the cache); auto is "
        "128 KiB when the launcher's variables say the job spans one or two nodes (or there are "
        "none), else 64 KiB, HDF5's sieve size"},
       &ApplyAutoBytes<&Options::read_window_bytes>},
      {{"PRESCIENT_COALESCE_GAP", "coalesce_gap", "auto, or bytes with a unit (0 = never merge)",
        "auto",
        "merge missing rows into one read when the gap between them is below this; auto is "
        "256 KiB, right for local disks and SSDs (on a parallel file system, with millisecond "
        "requests, a few MiB merge better); nothing is probed on the read path"},
       &ApplyAutoBytes<&Options::coalesce_gap>},
      {{"PRESCIENT_MIN_DATASET_BYTES", "min_dataset_bytes", "bytes with a unit (0 = cache all)",
        "128KiB",
        "without a schedule file (PRESCIENT_SCHEDULE), a contiguous dataset smaller than this is "
        "not cached (followed: once its file had more than 32 of them): its reads go to HDF5 "
        "without a look. HDF5 reads a dataset's object header from storage to open it, and that "
        "read (with the kernel's read-ahead, 128 KiB by default) usually brings a dataset this "
        "small along, so a hit would save no read, while preparing each dataset for the cache "
        "and admitting its rows cost more than HDF5's read of it (one dataset per sample: tens "
        "of thousands per process and epoch). Chunked datasets are cached whatever their size"},
       &ApplyBytes<&Options::min_dataset_bytes>},
  };
  return rows;
}

// Splits "a=1;b=2" into ordered pairs; an item without '=' maps to "".
std::vector<std::pair<std::string, std::string>> SplitSettings(std::string_view settings) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!settings.empty()) {
    const std::size_t semi = settings.find(';');
    std::string_view item = settings.substr(0, semi);
    settings = semi == std::string_view::npos ? std::string_view{} : settings.substr(semi + 1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) {
      item.remove_prefix(1);
    }
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) {
      item.remove_suffix(1);
    }
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    out.emplace_back(Lower(item.substr(0, eq)),
                     eq == std::string_view::npos ? "" : std::string(item.substr(eq + 1)));
  }
  return out;
}

std::string Rejection(std::string_view where, std::string_view value, const OptionDoc& doc) {
  return std::string(where) + "='" + std::string(value) +
         "' is not valid (accepted: " + std::string(doc.accepted) + ")";
}

}  // namespace

ParsedOptions ParseOptions(const EnvLookup& env, std::string_view settings) {
  ParsedOptions parsed;
  std::map<std::string, std::string> from_info;
  for (auto& [key, value] : SplitSettings(settings)) {
    const bool known = std::any_of(Rows().begin(), Rows().end(),
                                   [&](const OptionRow& r) { return r.doc.info_key == key; });
    if (!known) {
      std::string keys;
      for (const OptionRow& r : Rows())
        keys += (keys.empty() ? "" : ", ") + std::string(r.doc.info_key);
      parsed.warnings.push_back("connector info setting '" + key + "' is unknown (known: " + keys +
                                ", under_vol, under_info)");
      continue;
    }
    from_info[key] = value;
  }
  for (const OptionRow& row : Rows()) {
    const auto info_it = from_info.find(std::string(row.doc.info_key));
    if (info_it != from_info.end()) {
      if (!row.apply(info_it->second, parsed.options)) {
        parsed.warnings.push_back(Rejection(
            "connector info setting " + std::string(row.doc.info_key), info_it->second, row.doc));
      }
      continue;
    }
    const std::optional<std::string> value = env(row.doc.variable);
    if (!value) continue;
    if (!row.apply(*value, parsed.options)) {
      parsed.warnings.push_back(Rejection(row.doc.variable, *value, row.doc));
    }
  }
  if (!parsed.options.rank) {
    for (const char* variable : kLauncherRankVariables) {
      const std::optional<std::string> value = env(variable);
      if (!value) continue;
      if (auto r = ParseUnsigned(*value, 1u << 24)) {
        parsed.options.rank = static_cast<std::uint32_t>(*r);
        break;
      }
    }
  }
  parsed.options.job_nodes = JobNodes(env);
  if (!parsed.warnings.empty()) parsed.options.enable = false;
  return parsed;
}

std::uint64_t MissReadWindowBytes(const Options& options) {
  constexpr std::uint64_t kHdf5SieveBytes = 64 * 1024;
  if (options.read_window_bytes) return *options.read_window_bytes;
  return options.job_nodes && *options.job_nodes <= 2 ? 2 * kHdf5SieveBytes : kHdf5SieveBytes;
}

std::optional<std::string> ProcessEnv(std::string_view name) {
  // The only place that reads the environment; called once per process.
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

const std::vector<OptionDoc>& OptionDocs() {
  static const std::vector<OptionDoc> docs = [] {
    std::vector<OptionDoc> d;
    for (const OptionRow& r : Rows()) d.push_back(r.doc);
    return d;
  }();
  return docs;
}

}  // namespace prescient::vol
