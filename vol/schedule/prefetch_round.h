// One prefetch round: the rows the loaders will read over the next steps, in
// any number of datasets (fields of a sample map, across many files), read
// ahead on the I/O threads.
//
// For each dataset the round claims the rows nobody has or loads (the cache
// admits a prefetched row only if it is needed before the row it would
// displace, and reserves its space), plans them into coalesced, chunk-aligned
// reads, and runs every dataset's tasks on the executor, most urgent first
// (by the earliest step any of a task's rows is needed), then publishes each
// task's rows. pread and decode only: no HDF5 call (datasets without a raw
// layout are left to the read path). Claimed rows are always published or
// abandoned, also when a task fails or throws. On the node agent, rows other
// nodes own are fetched from them instead (RemoteRows), while the storage
// reads run, and those that do not arrive are read from storage after all.
#ifndef PRESCIENT_VOL_SCHEDULE_PREFETCH_ROUND_H_
#define PRESCIENT_VOL_SCHEDULE_PREFETCH_ROUND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "cache/core/node_cache.h"
#include "cache/io/executor.h"
#include "cache/io/task_order.h"
#include "vol/schedule/remote_rows.h"
#include "vol/serve/cached_dataset.h"

namespace prescient::vol {

// A row wanted by a round: its dataset, row, and the first global step at
// which a loader needs it (io::RowNeed::kNotNeeded for rows read only because
// they share a chunk with needed ones).
struct WantedRow {
  const CachedDataset* dataset = nullptr;
  std::uint64_t row = 0;
  std::uint64_t step = 0;
};

// What a round did, for the statistics (per dataset field, when bound).
struct RoundTally {
  std::uint64_t rows_prefetched = 0;  // rows stored (entries x rows per entry)
  std::uint64_t storage_reads = 0;
  std::uint64_t storage_bytes = 0;
  std::uint64_t failed_tasks = 0;
  // Claimed rows released unread: the process stopped leading the node's
  // prefetching during the round (the node agent took it over).
  std::uint64_t rows_given_up = 0;
};

class PrefetchRound {
 public:
  // `field_of(dataset)` names the statistics field of a dataset (or nullopt).
  using FieldOf = std::function<std::optional<std::uint32_t>(const CachedDataset&)>;
  // The eviction key of a row needed at global step `step` (the step itself
  // unless a node agent's ownership says otherwise: ScheduleFollower::KeyOf).
  using KeyOf =
      std::function<std::uint64_t(const CachedDataset&, std::uint64_t row, std::uint64_t step)>;

  // `remote` (the node agent's peers) may be null: everything from storage.
  PrefetchRound(cache::NodeCache& cache, const cache::NextUseOracle* oracle,
                cache::io::Executor& executor, FieldOf field_of, KeyOf key_of,
                RemoteRows* remote = nullptr);

  // Where the loaders are: `front` is the first global step they have not
  // begun, and `slice_steps` about how many steps they read in the time one
  // long coalesced read takes. Rows of contiguous datasets are then planned
  // in deadline slices, [front, front + s), [front + s, front + 3s), ... each
  // twice as long as the one before, and coalesced only within a slice: the
  // rows needed next are read by short reads first instead of sharing a
  // megabytes-long read with rows needed seconds later (a loader waited for
  // those: 59 ms per wait, measured). A round far ahead of the loaders has all
  // its rows in the last slices and coalesces as before. Without a call,
  // everything is one slice.
  void SetLoaderFront(std::uint64_t front, std::uint64_t slice_steps);

  // Claims, reads and publishes `wanted` (any order, repeats allowed). Returns
  // when every task has ended. The other rows of every slab a round touches
  // (CachedDataset::slab_rows) are added when the cache admits them, so that
  // each chunk is read and decoded once and contiguous rows are read a slab
  // to a request. A process that stops leading the node's prefetching during
  // the round (the node agent took it over) ends it early: every task not
  // begun releases its claims unread (RoundTally::rows_given_up), and the new
  // leader or the readers load those rows; before, it read the rest of its
  // round beside the new leader.
  RoundTally Run(std::vector<WantedRow> wanted);

 private:
  struct DatasetWork;
  struct Pending;
  // Drops the needs of rows the cache holds now, under one lock, before
  // anything sorts or keys them: a claim passes a resident row over anyway
  // (NodeCache::ClaimForPrefetch), and in the rounds of an epoch whose rows
  // are all cached that sorting and keying was most of the leader's work
  // (RESULTS.md, "what a followed read costs"). A snapshot: a row evicted
  // after it is read on demand, as one evicted after its claim would be.
  void DropResident(DatasetWork& work);
  // Claims the dataset's wanted rows, sends for those other nodes own, and
  // plans the rest.
  void PlanDataset(DatasetWork& work);
  // Claims `needs` (normalized) in order of next use; the rows claimed, or none.
  std::vector<std::uint64_t> Claim(const CachedDataset& dataset,
                                   std::span<const cache::io::RowNeed> needs);
  // Plans the claimed rows of `work` into coalesced reads (abandoning them if
  // that fails) and adds its tasks to `pending`.
  void PlanClaimed(DatasetWork& work, std::vector<Pending>& pending);
  void RunSmallDataset(DatasetWork& work, RoundTally& tally);
  // Releases `claimed` (rows, or entries of `rows_per_claim` rows) unread;
  // the rows released. For a round whose process no longer leads the node's
  // prefetching (cache::NodeCache::IsLeader).
  std::uint64_t GiveUp(const CachedDataset& dataset, std::span<const std::uint64_t> claimed,
                       std::uint64_t rows_per_claim);
  // Runs `pending` on the executor, most urgent first; `meanwhile` runs on
  // this thread while they do.
  void RunTasks(std::vector<Pending>& pending, RoundTally& tally,
                const std::function<void()>& meanwhile);

  cache::NodeCache& cache_;
  const cache::NextUseOracle* oracle_;
  cache::io::Executor& executor_;
  FieldOf field_of_;
  KeyOf key_of_;
  RemoteRows* remote_;
  std::uint64_t front_ = 0;
  std::uint64_t slice_steps_ = 0;  // 0: no deadline slices
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_PREFETCH_ROUND_H_
