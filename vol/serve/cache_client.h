// The connector's side of the node-shared cache.
//
// Opens the node's segment on the first read that could be served from it
// (one warning and plain forwarding if that fails: full /dev/shm, bad size),
// registers datasets by identity, and serves simple reads: cached rows are
// copied into the caller's buffer, missing rows are loaded (exactly one
// process loads a row; the others wait for it), inserted and copied. A read
// it cannot serve exactly is left to the caller to forward.
//
// Thread-safe. Survives fork(): a forked DataLoader worker uses the same
// segment (NodeCache attaches it on first use) and its own copy of this
// object's registry.
#ifndef PRESCIENT_VOL_SERVE_CACHE_CLIENT_H_
#define PRESCIENT_VOL_SERVE_CACHE_CLIENT_H_

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "cache/core/node_cache.h"
#include "cache/io/coalescing_options.h"
#include "vol/objects/object.h"
#include "vol/read/read_hook.h"
#include "vol/runtime/stats.h"
#include "vol/schedule/position_tracker.h"
#include "vol/schedule/prefetcher.h"
#include "vol/schedule/schedule_binding.h"
#include "vol/serve/cached_dataset.h"

namespace prescient::vol {

class CacheClient {
 public:
  static CacheClient& Get();

  // True when the read was served into `buf` (complete; do not forward).
  // False: nothing was written that matters; forward the read. Never throws.
  // What the read cost goes into `record` (committed by the caller).
  bool TryServe(const VolObject& dataset, const ReadRequest& request, void* buf,
                ReadRecord* record) noexcept;

  // The open cache, or null (disabled, failed, not opened yet and `open`
  // false). Opening happens at most once per process.
  cache::NodeCache* Cache(bool open = true);
  // Called when a dataset of a read-only file opens: prepares it for caching
  // (all HDF5 work, in this callback), opens the node segment if needed,
  // registers the dataset and binds the schedule to it. A DataLoader's main
  // process, which only opened the dataset to ask its length, is so attached
  // before it starts its workers and keeps the segment alive while
  // generations of workers come and go; fork() itself does no work.
  void DatasetOpened(const VolObject& dataset) noexcept;
  // The dataset's registration, made on first use. Null if not cacheable.
  std::shared_ptr<CachedDataset> Dataset(const VolObject& dataset);

  // Detaches from the segment (connector shutdown): the last process of the
  // node unlinks it unless PRESCIENT_KEEP_CACHE is set.
  void Shutdown() noexcept;

 private:
  CacheClient();
  static void AtForkPrepare();
  static void AtForkParent();
  static void AtForkChild();
  // REQUIRES: mutex_ held.
  cache::NodeCache* OpenCacheLocked();
  std::shared_ptr<CachedDataset> PreparedLocked(const VolObject& dataset);
  bool RegisterLocked(const std::shared_ptr<CachedDataset>& cached);
  void BindScheduleLocked(const std::shared_ptr<CachedDataset>& cached);
  // The loader of a read: `missing` rows, plus the rest of their chunks for
  // chunked data (claimed, loaded in the same plan, then published).
  static cache::Status LoadWithReadAround(cache::NodeCache& cache, const CachedDataset& cached,
                                          const VolObject& dataset,
                                          std::span<const std::uint64_t> missing,
                                          std::span<std::byte* const> dest, LoadCounters* load,
                                          const cache::NextUseOracle* oracle,
                                          std::uint64_t* read_around);

  std::mutex mutex_;  // guards everything below
  bool open_attempted_ = false;
  std::unique_ptr<cache::NodeCache> cache_;
  // The segment's data capacity, read once at open (constant for its life).
  std::uint64_t capacity_bytes_ = 0;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::shared_ptr<CachedDataset>> datasets_;

  // The schedule and the one dataset it describes (PRESCIENT_SCHEDULE).
  // A read of the bound dataset: follow the schedule. Returns the read's
  // global step when the schedule predicted it.
  std::optional<std::uint64_t> FollowSchedule(std::span<const std::uint64_t> rows,
                                              ReadRecord* record);
  bool schedule_opened_ = false;
  std::shared_ptr<ScheduleBinding> schedule_;
  cache::DatasetSlot bound_slot_ = cache::kInvalidDatasetSlot;
  std::shared_ptr<const cache::NextUseOracle> oracle_;
  std::unique_ptr<PositionTracker> tracker_;
  std::unique_ptr<Prefetcher> prefetcher_;
  bool mismatch_warned_ = false;
  // The schedule whose lock is held across an ongoing fork().
  std::shared_ptr<ScheduleBinding> forking_schedule_;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SERVE_CACHE_CLIENT_H_
