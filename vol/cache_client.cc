#include "vol/cache_client.h"

#include <pthread.h>

#include <algorithm>
#include <exception>
#include <variant>
#include <vector>

#include "vol/dataset_state.h"
#include "vol/file_state.h"
#include "vol/runtime.h"

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
  const auto* chunked = cached.raw_layout()
                            ? std::get_if<cache::io::ChunkedLayout>(cached.raw_layout().get())
                            : nullptr;
  if (chunked == nullptr) return extra;
  const std::uint64_t rows_per_slab = chunked->chunk_shape()[0];
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

}  // namespace

CacheClient& CacheClient::Get() {
  static CacheClient* client = new CacheClient();  // never destroyed: used from HDF5's atexit
  return *client;
}

CacheClient::CacheClient() {
  ::pthread_atfork(nullptr, nullptr, &CacheClient::AtForkChild);
  const Options& options = Runtime::Get().options();
  if (options.coalesce_gap) coalescing_.max_gap_bytes = *options.coalesce_gap;
}

void CacheClient::AtForkChild() {
  // Another thread may have held the mutex at fork time.
  new (&Get().mutex_) std::mutex();
}

cache::io::CoalescingOptions CacheClient::coalescing() const { return coalescing_; }

void CacheClient::Shutdown() noexcept {
  std::lock_guard lock(mutex_);
  datasets_.clear();
  cache_.reset();
  open_attempted_ = true;  // no reopening during shutdown
}

cache::NodeCache* CacheClient::Cache(bool open) {
  std::lock_guard lock(mutex_);
  if (cache_ || open_attempted_ || !open) return cache_.get();
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
  runtime.Log(LogLevel::kInfo, "node cache " + cache_->path() + " open");
  return cache_.get();
}

void CacheClient::DatasetOpened(const VolObject& dataset) noexcept {
  try {
    const DatasetState* state = dataset.dataset.get();
    if (state == nullptr || !state->fixed_size() || state->changed() || dataset.file == nullptr ||
        dataset.file->writable || state->dims().empty()) {
      return;
    }
    Dataset(dataset);
  } catch (...) {
  }
}

std::shared_ptr<CachedDataset> CacheClient::Dataset(const VolObject& dataset) {
  const DatasetState* state = dataset.dataset.get();
  if (state == nullptr) return nullptr;
  cache::NodeCache* cache = Cache();
  if (cache == nullptr) return nullptr;
  const auto key = std::make_pair(state->identity().hash[0], state->identity().hash[1]);
  std::lock_guard lock(mutex_);
  auto it = datasets_.find(key);
  if (it != datasets_.end()) return it->second;
  std::shared_ptr<CachedDataset> cached;
  try {
    cached = CachedDataset::Register(*cache, dataset, *state);
    Runtime::Get().Log(
        LogLevel::kInfo,
        "caching " + state->identity().description +
            (cached->raw_layout() ? " (raw reads)"
                                  : " (reads through HDF5: " + cached->raw_reason() + ")"));
  } catch (const std::exception& e) {
    Runtime::Get().Log(LogLevel::kWarn,
                       "not caching " + state->identity().description + ": " + e.what());
  }
  datasets_.emplace(key, cached);  // a failure is remembered too: warn once
  return cached;
}

cache::Status CacheClient::LoadWithReadAround(cache::NodeCache& cache, const CachedDataset& cached,
                                              const VolObject& dataset,
                                              std::span<const std::uint64_t> missing,
                                              std::span<std::byte* const> dest,
                                              const cache::io::CoalescingOptions& coalescing,
                                              LoadCounters* load, std::uint64_t* read_around) {
  std::vector<std::uint64_t> claimed;
  if (std::vector<std::uint64_t> extra = SlabMates(cached, missing); !extra.empty()) {
    cache::Result<std::vector<std::uint64_t>> c = cache.Claim(cached.slot(), extra, nullptr);
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
      cache.Publish(cached.slot(), claimed[j], staging.data() + j * cached.row_bytes(), nullptr);
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
    const std::uint64_t capacity = cache->Stats().capacity_bytes;
    if (request.selection.rows.rows() * cached->row_bytes() > capacity / kMaxShareOfCache)
      return false;

    const std::vector<std::uint64_t> rows = RowsInTransferOrder(request.selection.rows);
    LoadCounters load;
    const cache::io::CoalescingOptions coalescing = coalescing_;
    std::uint64_t read_around = 0;
    auto loader = [&](std::span<const std::uint64_t> missing, std::span<std::byte* const> dest) {
      return LoadWithReadAround(*cache, *cached, dataset, missing, dest, coalescing, &load,
                                &read_around);
    };
    cache::ReadRowsStats read;
    const cache::Status status =
        cache->ReadRows(cached->slot(), rows, static_cast<std::byte*>(buf), loader, nullptr, &read);
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
