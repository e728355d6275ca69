#include "vol/serve/cache_client.h"

#include <pthread.h>

#include <algorithm>
#include <exception>
#include <variant>
#include <vector>

#include "vol/objects/dataset_state.h"
#include "vol/objects/file_state.h"
#include "vol/runtime/runtime.h"

namespace prescient::vol {
namespace {

// A read larger than this share of the cache is forwarded: caching it would
// only push out rows that are needed again.
constexpr std::uint64_t kMaxShareOfCache = 4;

std::vector<std::uint64_t> RowsInTransferOrder(const RowSelection& selection) {
  std::vector<std::uint64_t> rows;
  rows.reserve(selection.rows());
  selection.ForEachRun([&](const RowRun& run) {
    for (std::uint64_t r = 0; r < run.count; ++r) rows.push_back(run.first + r);
  });
  return rows;
}

// Read-around for chunked data: a miss decodes whole chunks anyway, so the
// other rows of every slab (chunks sharing a dim-0 index) it touches are
// worth keeping. Returns those rows not in `missing` (ascending), capped.
std::vector<std::uint64_t> SlabMates(const CachedDataset& cached,
                                     std::span<const std::uint64_t> missing) {
  constexpr std::uint64_t kMaxReadAroundBytes = 64ull << 20;
  std::vector<std::uint64_t> extra;
  const std::uint64_t rows_per_slab = cached.chunk_rows();
  if (rows_per_slab <= 1) return extra;
  const std::uint64_t budget = std::max<std::uint64_t>(
      1, kMaxReadAroundBytes / std::max<std::uint64_t>(1, cached.row_bytes()));
  std::uint64_t last_slab = UINT64_MAX;
  std::size_t next_missing = 0;
  for (std::uint64_t row : missing) {
    const std::uint64_t slab = row / rows_per_slab;
    if (slab == last_slab) continue;
    last_slab = slab;
    const std::uint64_t end = std::min(cached.num_rows(), (slab + 1) * rows_per_slab);
    for (std::uint64_t r = slab * rows_per_slab; r < end && extra.size() < budget; ++r) {
      while (next_missing < missing.size() && missing[next_missing] < r) ++next_missing;
      if (next_missing < missing.size() && missing[next_missing] == r) continue;
      extra.push_back(r);
    }
  }
  return extra;
}

// How a dataset's misses load, for the info log.
std::string LoadingNote(const CachedDataset& cached) {
  if (!cached.raw_layout()) return "reads through HDF5: " + cached.raw_reason();
  std::string note =
      "raw reads, coalescing gap " + std::to_string(cached.coalescing().max_gap_bytes) + " bytes";
  if (!cached.storage_profile().empty()) note += "; storage " + cached.storage_profile();
  return note;
}

}  // namespace

CacheClient& CacheClient::Get() {
  static CacheClient* client = new CacheClient();  // never destroyed: used from HDF5's atexit
  return *client;
}

CacheClient::CacheClient() {
  ::pthread_atfork(&CacheClient::AtForkPrepare, &CacheClient::AtForkParent,
                   &CacheClient::AtForkChild);
}

void CacheClient::AtForkPrepare() {
  // A process that opened datasets and now forks (a DataLoader's main process
  // starting its workers) attaches to the node cache first: its workers
  // inherit the attachment, and the segment outlives each generation of
  // workers. Nothing here calls HDF5.
  try {
    CacheClient& client = Get();
    std::lock_guard lock(client.mutex_);
    if (client.datasets_.empty()) return;
    if (client.OpenCacheLocked() == nullptr) return;
    for (auto& [key, cached] : client.datasets_) {
      if (cached && !cached->registered()) client.RegisterLocked(cached);
    }
  } catch (...) {
  }
  // Last: no prefetch thread may be inside the schedule reader at fork().
  CacheClient& client = Get();
  std::shared_ptr<ScheduleBinding> schedule;
  {
    std::lock_guard lock(client.mutex_);
    schedule = client.schedule_;
  }
  if (schedule) schedule->LockForFork();
  client.forking_schedule_ = std::move(schedule);
}

void CacheClient::AtForkParent() {
  CacheClient& client = Get();
  if (client.forking_schedule_) client.forking_schedule_->UnlockAfterFork();
  client.forking_schedule_.reset();
}

void CacheClient::AtForkChild() {
  // The client's own mutex may have been held by a thread that does not exist
  // in the child (the prefetcher), so it is re-created. The schedule lock is
  // held by this very thread (AtForkPrepare took it) and is released normally,
  // which also keeps thread sanitizers' view of it consistent.
  CacheClient& client = Get();
  new (&client.mutex_) std::mutex();
  if (client.forking_schedule_) client.forking_schedule_->UnlockAfterFork();
  if (client.schedule_ && client.schedule_ != client.forking_schedule_) {
    client.schedule_->ResetLockAfterFork();  // replaced after the prepare handler ran
  }
  client.forking_schedule_.reset();
}

void CacheClient::Shutdown() noexcept {
  std::lock_guard lock(mutex_);
  if (prefetcher_) prefetcher_->Stop();
  prefetcher_.reset();
  tracker_.reset();
  oracle_.reset();
  datasets_.clear();
  cache_.reset();
  open_attempted_ = true;  // no reopening during shutdown
}

cache::NodeCache* CacheClient::Cache(bool open) {
  std::lock_guard lock(mutex_);
  return open ? OpenCacheLocked() : cache_.get();
}

cache::NodeCache* CacheClient::OpenCacheLocked() {
  if (cache_ || open_attempted_) return cache_.get();
  open_attempted_ = true;
  Runtime& runtime = Runtime::Get();
  const Options& options = runtime.options();
  if (!options.enable || !options.cache_enabled) return nullptr;
  cache::Result<std::unique_ptr<cache::NodeCache>> opened = cache::NodeCache::Open(options.cache);
  if (!opened.ok()) {
    runtime.Log(LogLevel::kWarn, "the node cache is unavailable (" + opened.status().message() +
                                     "); reads are forwarded to HDF5 uncached");
    return nullptr;
  }
  cache_ = std::move(opened.value());
  capacity_bytes_ = cache_->Stats().capacity_bytes;
  runtime.Log(LogLevel::kInfo, "node cache " + cache_->path() + " open");
  return cache_.get();
}

std::shared_ptr<CachedDataset> CacheClient::PreparedLocked(const VolObject& dataset) {
  const DatasetState* state = dataset.dataset.get();
  const auto key = std::make_pair(state->identity().hash[0], state->identity().hash[1]);
  auto it = datasets_.find(key);
  if (it != datasets_.end()) return it->second;
  std::shared_ptr<CachedDataset> cached;
  try {
    cached = CachedDataset::Prepare(dataset, *state);
  } catch (const std::exception& e) {
    Runtime::Get().Log(LogLevel::kWarn,
                       "not caching " + state->identity().description + ": " + e.what());
  }
  datasets_.emplace(key, cached);  // a failure is remembered too: warn once
  return cached;
}

bool CacheClient::RegisterLocked(const std::shared_ptr<CachedDataset>& cached) {
  if (cached->registered()) return true;
  Runtime& runtime = Runtime::Get();
  const cache::Status status = cached->Register(*cache_, runtime.options().coalesce_gap);
  if (!status.ok()) {
    runtime.Log(LogLevel::kWarn, "not caching " + cached->description() + ": " + status.message());
    return false;
  }
  runtime.Log(LogLevel::kInfo,
              "caching " + cached->description() + " (" + LoadingNote(*cached) + ")");
  BindScheduleLocked(cached);
  return true;
}

void CacheClient::DatasetOpened(const VolObject& dataset) noexcept {
  try {
    const DatasetState* state = dataset.dataset.get();
    if (state == nullptr || !state->fixed_size() || state->changed() || dataset.file == nullptr ||
        dataset.file->writable || state->dims().empty() ||
        !Runtime::Get().options().cache_enabled) {
      return;
    }
    // Prepared now (the HDF5 work belongs in this callback); the segment is
    // opened by the first read it can serve, or when this process forks.
    std::lock_guard lock(mutex_);
    std::shared_ptr<CachedDataset> cached = PreparedLocked(dataset);
    if (cached && cache_) RegisterLocked(cached);
  } catch (...) {
  }
}

std::shared_ptr<CachedDataset> CacheClient::Dataset(const VolObject& dataset) {
  if (dataset.dataset == nullptr) return nullptr;
  std::lock_guard lock(mutex_);
  std::shared_ptr<CachedDataset> cached = PreparedLocked(dataset);
  if (cached == nullptr || OpenCacheLocked() == nullptr || !RegisterLocked(cached)) return nullptr;
  return cached;
}

void CacheClient::BindScheduleLocked(const std::shared_ptr<CachedDataset>& cached) {
  Runtime& runtime = Runtime::Get();
  const Options& options = runtime.options();
  if (options.schedule_path.empty() || bound_slot_ != cache::kInvalidDatasetSlot) return;
  if (!schedule_opened_) {
    schedule_opened_ = true;
    schedule_ =
        ScheduleBinding::Open(options.schedule_path, options.rank.value_or(0),
                              [&](const std::string& m) { runtime.Log(LogLevel::kWarn, m); });
  }
  if (!schedule_) return;
  const std::string mismatch = schedule_->Mismatch(cached->num_rows(), cached->row_bytes(),
                                                   cached->file_size(), cached->file_mtime_ns());
  if (!mismatch.empty()) {
    // Other datasets of the file (labels beside images) differ in shape: only
    // a dataset of the right shape in a changed file deserves a warning.
    const scheduler::SampleMap& map = schedule_->header().map;
    const std::uint64_t want_rows =
        map.has_files() ? map.files()[0].rows : schedule_->header().num_samples;
    const std::uint64_t want_row_bytes = map.fields().empty() ? 0 : map.fields()[0].row_bytes;
    const bool same_shape = want_rows == cached->num_rows() &&
                            (want_row_bytes == 0 || want_row_bytes == cached->row_bytes());
    runtime.Log(same_shape && !mismatch_warned_ ? LogLevel::kWarn : LogLevel::kInfo,
                "PRESCIENT_SCHEDULE does not describe " + cached->description() + ": " + mismatch +
                    "; it is cached without prefetching");
    mismatch_warned_ = mismatch_warned_ || same_shape;
    return;
  }
  bound_slot_ = cached->slot();
  runtime.stats().SetEpochs(schedule_->epochs());
  oracle_ = std::make_shared<ScheduleOracle>(schedule_, bound_slot_);
  tracker_ = std::make_unique<PositionTracker>(schedule_);
  runtime.Log(LogLevel::kInfo, "schedule bound to " + cached->description() + " (rank " +
                                   std::to_string(schedule_->rank()) + ", node " +
                                   std::to_string(schedule_->node()) + ", next-use index " +
                                   (schedule_->index_loaded() ? "loaded" : "built") + ")");
  if (options.prefetch && cached->raw_layout()) {
    prefetcher_ = std::make_unique<Prefetcher>(*cache_, schedule_, cached, oracle_,
                                               options.io_threads, cached->coalescing());
    prefetcher_->EnsureRunning();
  }
}

std::optional<std::uint64_t> CacheClient::FollowSchedule(std::span<const std::uint64_t> rows) {
  Stats& stats = Runtime::Get().stats();
  std::uint64_t furthest = 0;
  bool matched = false;
  std::uint32_t epoch = 0;
  const bool was_abandoned = tracker_->abandoned();
  for (std::uint64_t row : rows) {
    const PositionTracker::Observation o = tracker_->Observe(row, cache_->NodeStep());
    stats.Add(o.matched ? Counter::kScheduleMatches : Counter::kScheduleMismatches);
    if (o.matched) {
      matched = true;
      furthest = std::max(furthest, o.global_step);
      epoch = o.epoch;
    }
  }
  if (matched) {
    // The node step must not pass the slowest local reader: what it still
    // reads would look past to the eviction oracle. This process's workers
    // may run up to 2 x W batches apart, ranks of a node about a step.
    const scheduler::WorldLayout& layout = schedule_->header().layout;
    const std::uint64_t lag = 2ull * (layout.workers + 1) + 1;
    if (furthest > lag) cache_->AdvanceNodeStep(furthest - lag);
    stats.SetCurrentEpoch(epoch);
  }
  if (tracker_->abandoned() && !was_abandoned) {
    Runtime::Get().Log(LogLevel::kWarn,
                       "reads keep leaving the order in PRESCIENT_SCHEDULE (" +
                           std::to_string(PositionTracker::kMaxMismatches) +
                           " in a row); this process stops following it. Reads stay correct.");
    if (prefetcher_) prefetcher_->Stop();
  }
  if (prefetcher_ && !tracker_->abandoned()) prefetcher_->EnsureRunning();
  if (!matched) return std::nullopt;
  return furthest;
}

cache::Status CacheClient::LoadWithReadAround(
    cache::NodeCache& cache, const CachedDataset& cached, const VolObject& dataset,
    std::span<const std::uint64_t> missing, std::span<std::byte* const> dest,
    const cache::io::CoalescingOptions& coalescing, LoadCounters* load,
    const cache::NextUseOracle* oracle, std::uint64_t* read_around) {
  std::vector<std::uint64_t> claimed;
  // Without a schedule nothing says the chunk's other rows are needed before
  // LRU drops them: read around only when the whole dataset fits the cache.
  const bool read_around_pays =
      oracle != nullptr || cached.num_rows() * cached.row_bytes() <= cache.Stats().capacity_bytes;
  std::vector<std::uint64_t> extra;
  if (read_around_pays) extra = SlabMates(cached, missing);
  if (!extra.empty()) {
    cache::Result<std::vector<std::uint64_t>> c = cache.Claim(cached.slot(), extra, oracle);
    if (c.ok()) claimed = std::move(c.value());
  }
  if (claimed.empty()) return cached.Load(&dataset, missing, dest, coalescing, load);

  // Load requested and claimed rows in one plan, so each chunk is decoded once.
  std::vector<std::byte> staging(claimed.size() * cached.row_bytes());
  std::vector<std::uint64_t> rows;
  std::vector<std::byte*> targets;
  rows.reserve(missing.size() + claimed.size());
  targets.reserve(missing.size() + claimed.size());
  for (std::size_t i = 0, j = 0; i < missing.size() || j < claimed.size();) {
    if (j == claimed.size() || (i < missing.size() && missing[i] < claimed[j])) {
      rows.push_back(missing[i]);
      targets.push_back(dest[i++]);
    } else {
      rows.push_back(claimed[j]);
      targets.push_back(staging.data() + j++ * cached.row_bytes());
    }
  }
  const cache::Status status = cached.Load(&dataset, rows, targets, coalescing, load);
  for (std::size_t j = 0; j < claimed.size(); ++j) {
    if (!status.ok()) {
      cache.Abandon(cached.slot(), claimed[j]);
    } else {
      cache.Publish(cached.slot(), claimed[j], staging.data() + j * cached.row_bytes(), oracle);
    }
  }
  if (status.ok()) *read_around += claimed.size();
  return status;
}

bool CacheClient::TryServe(const VolObject& dataset, const ReadRequest& request,
                           void* buf) noexcept {
  try {
    if (!request.simple || request.selection.rows.rows() == 0) return false;
    std::shared_ptr<CachedDataset> cached = Dataset(dataset);
    if (cached == nullptr) return false;
    cache::NodeCache* cache = Cache(false);
    const std::uint64_t capacity = capacity_bytes_;
    if (request.selection.rows.rows() * cached->row_bytes() > capacity / kMaxShareOfCache)
      return false;

    const std::vector<std::uint64_t> rows = RowsInTransferOrder(request.selection.rows);
    LoadCounters load;
    const cache::io::CoalescingOptions coalescing = cached->coalescing();
    std::uint64_t read_around = 0;
    // With a schedule: place the read first, so its rows are keyed by their
    // use after this read (ReadOracle).
    std::shared_ptr<const ScheduleBinding> schedule;
    std::optional<std::uint64_t> read_step;
    {
      std::lock_guard lock(mutex_);
      if (cached->slot() == bound_slot_ && tracker_) schedule = schedule_;
    }
    if (schedule) read_step = FollowSchedule(rows);
    const cache::NextUseOracle* oracle = nullptr;
    std::optional<ReadOracle> read_oracle;
    if (schedule) {
      read_oracle.emplace(*schedule, cached->slot(), read_step.value_or(cache->NodeStep()));
      oracle = &*read_oracle;
    }
    auto loader = [&](std::span<const std::uint64_t> missing, std::span<std::byte* const> dest) {
      return LoadWithReadAround(*cache, *cached, dataset, missing, dest, coalescing, &load, oracle,
                                &read_around);
    };
    cache::ReadRowsStats read;
    const cache::Status status =
        cache->ReadRows(cached->slot(), rows, static_cast<std::byte*>(buf), loader, oracle, &read);
    Stats& stats = Runtime::Get().stats();
    stats.Add(Counter::kStorageReads, load.reads);
    stats.Add(Counter::kStorageBytes, load.bytes);
    stats.Add(Counter::kStallNs, static_cast<std::uint64_t>(read.wait_time.count()));
    if (!status.ok()) {
      Runtime::Get().Log(LogLevel::kInfo,
                         "cache read failed (" + status.message() + "); forwarding");
      return false;
    }
    stats.Add(Counter::kReadsServed);
    stats.Add(Counter::kRowsHit, read.hits);
    stats.Add(Counter::kRowsLoaded, read.loaded + read.uncached);
    stats.Add(Counter::kRowsWaited, read.waited);
    stats.Add(Counter::kRowsPrefetched, read_around);
    return true;
  } catch (const std::exception& e) {
    Runtime::Get().Log(LogLevel::kDebug, std::string("cache serve failed: ") + e.what());
  } catch (...) {
  }
  return false;
}

}  // namespace prescient::vol
