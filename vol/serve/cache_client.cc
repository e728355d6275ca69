#include "vol/serve/cache_client.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstring>
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
  if (cached.grouped()) {
    note += "; small rows cached " + std::to_string(cached.rows_per_entry()) + " to an entry";
  }
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

// fork() (a DataLoader starting its workers) runs no work of Prescient's:
// the segment was opened, the datasets registered and the schedule bound when
// the datasets were opened. The handlers only make the locks consistent: they
// are taken before fork() (no thread of the parent is then inside the state
// they guard, or inside the schedule reader) and released on both sides.
void CacheClient::AtForkPrepare() {
  CacheClient& client = Get();
  client.mutex_.lock();
  client.forking_schedule_ = client.schedule_;
  if (client.forking_schedule_) client.forking_schedule_->LockForFork();
}

void CacheClient::AtForkParent() {
  CacheClient& client = Get();
  if (client.forking_schedule_) client.forking_schedule_->UnlockAfterFork();
  client.forking_schedule_.reset();
  client.mutex_.unlock();
}

void CacheClient::AtForkChild() {
  CacheClient& client = Get();
  if (client.forking_schedule_) client.forking_schedule_->UnlockAfterFork();
  client.forking_schedule_.reset();
  client.mutex_.unlock();
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
  const cache::Status status = cached->Register(*cache_, runtime.options().cache.block_bytes,
                                                runtime.options().coalesce_gap);
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
    // Everything happens now, in the callback: the HDF5 work of preparing the
    // dataset, opening the node's segment, registering the dataset and
    // binding the schedule. A DataLoader's main process, which opens the
    // dataset only to ask its length, is then attached before it forks its
    // workers (so the segment outlives each generation of them), and fork()
    // itself has nothing left to do.
    std::lock_guard lock(mutex_);
    std::shared_ptr<CachedDataset> cached = PreparedLocked(dataset);
    if (cached && OpenCacheLocked() != nullptr) RegisterLocked(cached);
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
  const std::string mismatch =
      schedule_->Mismatch(cached->num_rows(), cached->row_bytes(), cached->file_identity().size,
                          cached->file_identity().mtime_ns);
  if (!mismatch.empty()) {
    // Other datasets of the file (labels beside images) differ in shape: only
    // a dataset of the right shape in a changed file deserves a warning.
    const std::uint64_t want_row_bytes = schedule_->header().dataset.row_bytes;
    const bool same_shape = schedule_->header().dataset.rows == cached->num_rows() &&
                            (want_row_bytes == 0 || want_row_bytes == cached->row_bytes());
    runtime.Log(same_shape && !mismatch_warned_ ? LogLevel::kWarn : LogLevel::kInfo,
                "PRESCIENT_SCHEDULE does not describe " + cached->description() + ": " + mismatch +
                    "; it is cached without prefetching");
    mismatch_warned_ = mismatch_warned_ || same_shape;
    return;
  }
  bound_slot_ = cached->slot();
  runtime.stats().SetEpochs(schedule_->epochs());
  oracle_ = std::make_shared<ScheduleOracle>(schedule_, bound_slot_, cached->rows_per_entry());
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

std::optional<std::uint64_t> CacheClient::FollowSchedule(std::span<const std::uint64_t> rows,
                                                         ReadRecord* record) {
  const bool was_abandoned = tracker_->abandoned();
  const PositionTracker::Observation o = tracker_->ObserveRead(rows, cache_->NodeStep());
  record->schedule_matches += o.matched;
  record->schedule_mismatches += o.mismatched;
  const bool matched = o.matched > 0;
  const std::uint64_t furthest = o.global_step;
  if (matched) {
    // The node step must not pass the slowest local reader: what it still
    // reads would look past to the eviction oracle. This process's workers
    // may run up to 2 x W batches apart, ranks of a node about a step.
    const scheduler::WorldLayout& layout = schedule_->header().layout;
    const std::uint64_t lag = 2ull * (layout.workers + 1) + 1;
    if (furthest > lag) cache_->AdvanceNodeStep(furthest - lag);
    Runtime::Get().stats().SetCurrentEpoch(o.epoch);
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

cache::Status CacheClient::LoadWithReadAround(cache::NodeCache& cache, const CachedDataset& cached,
                                              const VolObject& dataset,
                                              std::span<const std::uint64_t> missing,
                                              std::span<std::byte* const> dest, LoadCounters* load,
                                              const cache::NextUseOracle* oracle,
                                              std::uint64_t* read_around) {
  std::vector<std::uint64_t> claimed;
  // Without a schedule nothing says the chunk's other rows are needed before
  // LRU drops them: read around only when the whole dataset fits the cache.
  // Grouped datasets are small: their entries are their read-around.
  const bool read_around_pays =
      !cached.grouped() &&
      (oracle != nullptr || cached.num_rows() * cached.row_bytes() <= cache.Stats().capacity_bytes);
  std::vector<std::uint64_t> extra;
  if (read_around_pays) extra = SlabMates(cached, missing);
  if (!extra.empty()) {
    cache::Result<std::vector<std::uint64_t>> c = cache.Claim(cached.slot(), extra, oracle);
    if (c.ok()) claimed = std::move(c.value());
  }
  if (claimed.empty()) return cached.LoadEntries(&dataset, missing, dest, load);

  // Load requested and claimed rows in one plan, so each chunk is decoded once.
  std::vector<std::byte> staging(claimed.size() * cached.entry_bytes());
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
      targets.push_back(staging.data() + j++ * cached.entry_bytes());
    }
  }
  const cache::Status status = cached.LoadEntries(&dataset, rows, targets, load);
  for (std::size_t j = 0; j < claimed.size(); ++j) {
    if (!status.ok()) {
      cache.Abandon(cached.slot(), claimed[j]);
    } else {
      cache.Publish(cached.slot(), claimed[j], staging.data() + j * cached.entry_bytes(), oracle);
    }
  }
  if (status.ok()) *read_around += claimed.size();
  return status;
}

bool CacheClient::TryServe(const VolObject& dataset, const ReadRequest& request, void* buf,
                           ReadRecord* record) noexcept {
  try {
    if (!request.simple || request.selection.rows.rows() == 0) return false;
    std::shared_ptr<CachedDataset> cached = Dataset(dataset);
    if (cached == nullptr) return false;
    cache::NodeCache* cache = Cache(false);
    if (request.selection.rows.rows() * cached->row_bytes() > capacity_bytes_ / kMaxShareOfCache)
      return false;
    if (cached->FileChanged()) {
      Runtime::Get().Fallback(Counter::kFallbackFileChanged,
                              cached->path() +
                                  " changed on disk while open (size, modification or status "
                                  "time): its reads are forwarded to HDF5, never served from the "
                                  "cache");
      return false;
    }

    // Rows in transfer order, and the cache entries holding them.
    const std::vector<std::uint64_t> rows = RowsInTransferOrder(request.selection.rows);
    std::vector<std::uint64_t> entries;
    if (cached->grouped()) {
      entries.reserve(rows.size());
      for (std::uint64_t row : rows) entries.push_back(row / cached->rows_per_entry());
      std::sort(entries.begin(), entries.end());
      entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
    }
    const std::vector<std::uint64_t>& wanted = cached->grouped() ? entries : rows;

    // With a schedule: place the read first, so its rows are keyed by their
    // use after this read (ReadOracle).
    std::shared_ptr<const ScheduleBinding> schedule;
    std::optional<std::uint64_t> read_step;
    {
      std::lock_guard lock(mutex_);
      if (cached->slot() == bound_slot_ && tracker_) schedule = schedule_;
    }
    if (schedule) read_step = FollowSchedule(rows, record);
    const cache::NextUseOracle* oracle = nullptr;
    std::optional<ReadOracle> read_oracle;
    if (schedule) {
      read_oracle.emplace(*schedule, cached->slot(), cached->rows_per_entry(),
                          read_step.value_or(cache->NodeStep()));
      oracle = &*read_oracle;
    }

    LoadCounters load;
    std::uint64_t read_around = 0;
    std::chrono::nanoseconds load_time{0};
    auto loader = [&](std::span<const std::uint64_t> missing, std::span<std::byte* const> dest) {
      const auto start = std::chrono::steady_clock::now();
      cache::Status status =
          LoadWithReadAround(*cache, *cached, dataset, missing, dest, &load, oracle, &read_around);
      load_time += std::chrono::steady_clock::now() - start;
      return status;
    };
    std::vector<std::byte> scratch;
    std::byte* target = static_cast<std::byte*>(buf);
    if (cached->grouped()) {
      scratch.resize(entries.size() * cached->entry_bytes());
      target = scratch.data();
    }
    cache::ReadRowsStats read;
    const cache::Status status =
        cache->ReadRows(cached->slot(), wanted, target, loader, oracle, &read);
    record->storage_reads += load.reads;
    record->storage_bytes += load.bytes;
    record->stall_storage_ns += static_cast<std::uint64_t>(load_time.count());
    record->stall_wait_ns += static_cast<std::uint64_t>(read.wait_time.count());
    if (!status.ok()) {
      Runtime::Get().Fallback(Counter::kFallbackServeFailed,
                              "a read served from the node cache failed (" + status.message() +
                                  "); it was forwarded to HDF5, as are other reads that fail");
      return false;
    }
    if (cached->grouped()) {
      // Copy each requested row out of its entry, in transfer order.
      const std::uint64_t g = cached->rows_per_entry();
      const std::uint64_t row_bytes = cached->row_bytes();
      auto* out = static_cast<std::byte*>(buf);
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const std::uint64_t e = rows[i] / g;
        const std::size_t at = static_cast<std::size_t>(
            std::lower_bound(entries.begin(), entries.end(), e) - entries.begin());
        std::memcpy(out + i * row_bytes,
                    scratch.data() + at * cached->entry_bytes() + (rows[i] % g) * row_bytes,
                    row_bytes);
      }
    }
    record->served = true;
    if (!cached->grouped()) {
      record->rows_hit += read.hits;
      record->rows_loaded += read.loaded + read.uncached;
      record->rows_waited += read.waited;
      record->rows_read_around += read_around;
    } else {
      // Entries of several rows: rows brought from storage are whole entries;
      // the requested rows count as hits when their entries all were.
      const std::uint64_t g = cached->rows_per_entry();
      const std::uint64_t missed = read.loaded + read.uncached + read.waited;
      record->rows_hit += missed == 0 ? rows.size() : rows.size() * read.hits / entries.size();
      record->rows_loaded += (read.loaded + read.uncached) * g;
      record->rows_waited += read.waited * g;
    }
    return true;
  } catch (const std::exception& e) {
    Runtime::Get().Log(LogLevel::kDebug, std::string("cache serve failed: ") + e.what());
  } catch (...) {
  }
  return false;
}

}  // namespace prescient::vol
