// Reading ahead of the loaders, on the node's prefetch leader.
//
// Every process bound to a schedule runs one small thread that tries, every
// quarter second, to become the node's leader (NodeCache::TryBecomeLeader;
// forked children never inherit leadership, and when the leader exits or dies
// another process takes over within a second). The leader walks every local
// rank's schedule from the node step (the furthest step any local rank has
// reached) to a look-ahead sized by the cache (at least two steps: double
// buffering), claims the rows not cached, plans them into coalesced,
// chunk-aligned reads and runs those on its I/O threads: pread and decode
// only, never an HDF5 call. Loaders that need a row in flight wait for it.
//
// Only datasets with a raw layout are prefetched; the others are loaded on
// the caller's thread on a miss.
#ifndef PRESCIENT_VOL_SCHEDULE_PREFETCHER_H_
#define PRESCIENT_VOL_SCHEDULE_PREFETCHER_H_

#include <atomic>
#include <memory>
#include <thread>

#include "cache/core/node_cache.h"
#include "cache/io/coalescing_options.h"
#include "cache/io/executor.h"
#include "cache/io/task_order.h"
#include "vol/schedule/prefetch_round.h"
#include "vol/schedule/schedule_binding.h"
#include "vol/serve/cached_dataset.h"

namespace prescient::vol {

class Prefetcher {
 public:
  Prefetcher(cache::NodeCache& cache, std::shared_ptr<const ScheduleBinding> binding,
             std::shared_ptr<const CachedDataset> dataset,
             std::shared_ptr<const cache::NextUseOracle> oracle, unsigned io_threads,
             cache::io::CoalescingOptions coalescing);
  // Stops and joins the thread when called in the process that started it.
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Starts this process's leadership thread if it has none (a forked child
  // calls this again: threads do not survive fork).
  void EnsureRunning();
  void Stop();

 private:
  void Run() noexcept;
  void PrefetchSteps(std::uint64_t from, std::uint64_t to, cache::io::Executor& executor);
  // The rows of global steps [from, to) of every local rank, each with its step.
  std::vector<WantedRow> RowsOfSteps(std::uint64_t from, std::uint64_t to) const;

  cache::NodeCache& cache_;
  std::shared_ptr<const ScheduleBinding> binding_;
  std::shared_ptr<const CachedDataset> dataset_;
  std::shared_ptr<const cache::NextUseOracle> oracle_;
  unsigned io_threads_;
  cache::io::CoalescingOptions coalescing_;
  std::uint64_t lookahead_ = 2;  // steps: what half the cache holds, in [2, 512]
  std::atomic<bool> stop_{false};
  std::atomic<long> running_pid_{0};
  std::unique_ptr<std::thread> thread_;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_PREFETCHER_H_
