// Everything one process does with the schedule (PRESCIENT_SCHEDULE):
// binding the datasets it opens to the fields of the sample map, following
// its reads through its rank's order, reporting where the rank is, keying
// cached rows by their next use, and running the node's prefetch leader.
//
//   CacheClient            ScheduleFollower
//   dataset registered ->  OnRegistered: bound to (file, field) of the map, or
//                          why not (one warning when the schedule describes
//                          nothing this process reads, or a file changed)
//   read served        ->  OnRead: the read's samples located in the rank's
//                          order (PositionTracker), the rank's step reported
//                          (RankProgress), the read's rows keyed by their use
//                          after this read (ReadOracle)
//   background         ->  Prefetcher: the leader reads every local rank's
//                          next steps, every field, opening files the
//                          application has not opened yet (DatasetResolver)
//
// Thread-safety: OnRegistered and OnRead run on application threads inside
// HDF5 callbacks (serialised by HDF5's lock); the oracle runs on any thread.
#ifndef PRESCIENT_VOL_SCHEDULE_SCHEDULE_FOLLOWER_H_
#define PRESCIENT_VOL_SCHEDULE_SCHEDULE_FOLLOWER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/base/mutex.h"
#include "cache/core/node_cache.h"
#include "vol/runtime/options.h"
#include "vol/runtime/stats.h"
#include "vol/schedule/bound_fields.h"
#include "vol/schedule/node_ownership.h"
#include "vol/schedule/position_tracker.h"
#include "vol/schedule/rank_progress.h"
#include "vol/schedule/remote_rows.h"
#include "vol/schedule/schedule_binding.h"
#include "vol/schedule/schedule_oracle.h"
#include "vol/schedule/stop_caller.h"
#include "vol/serve/cached_dataset.h"
#include "vol/serve/resolution_memo.h"

namespace prescient::vol {

class Prefetcher;

class ScheduleFollower {
 public:
  // Registers a dataset prepared off the application's threads (the prefetch
  // leader resolving a file of the map) with the cache client, and returns the
  // instance to use (the client's own when it knows the identity), or null.
  using AdoptFn = std::function<std::shared_ptr<CachedDataset>(std::shared_ptr<CachedDataset>)>;

  // PRESCIENT_SCHEDULE for this process: null (after one warning) when it is
  // unset or unusable. Opened before the node's segment, which needs a
  // dataset record for every field of every file the schedule names.
  static std::shared_ptr<ScheduleBinding> OpenBinding(const Options& options);
  // Follows `binding` with the node's cache.
  // `memo` (may be null): the node's memo of prepared datasets, which the
  // prefetch leader's resolutions use and add to; it outlives the follower.
  static std::unique_ptr<ScheduleFollower> Create(std::shared_ptr<ScheduleBinding> binding,
                                                  const Options& options, cache::NodeCache& cache,
                                                  AdoptFn adopt, ResolutionMemo* memo = nullptr);
  ~ScheduleFollower();
  ScheduleFollower(const ScheduleFollower&) = delete;
  ScheduleFollower& operator=(const ScheduleFollower&) = delete;

  // A dataset just registered in the node cache.
  void OnRegistered(const std::shared_ptr<CachedDataset>& dataset);

  // What a read's rows are keyed by, and which field counts them.
  struct ReadKeys {
    std::optional<ReadOracle> oracle;  // empty: the dataset is not bound
    std::optional<std::uint32_t> field;
    const cache::NextUseOracle* get() const { return oracle ? &*oracle : nullptr; }
  };
  // A read of `dataset` (rows in transfer order) about to be served.
  void OnRead(const CachedDataset& dataset, std::span<const std::uint64_t> rows, ReadRecord* record,
              ReadKeys* keys);

  // The oracle for rows not tied to a read (read-around, prefetch).
  const cache::NextUseOracle* oracle() const { return &oracle_; }
  // The eviction key of `row` of `dataset` needed at global step `step`: the
  // step, or under a live node agent its HeldKey (node_ownership.h).
  std::uint64_t KeyOf(const CachedDataset& dataset, std::uint64_t row, std::uint64_t step) const;
  const ScheduleBinding& binding() const { return *binding_; }

  // The field a dataset counts its rows in (statistics), if bound.
  std::optional<std::uint32_t> FieldOf(const CachedDataset& dataset) const;
  // The (file, field) of the map a dataset is bound to, if it is.
  std::optional<FieldRef> FieldRefOf(const CachedDataset& dataset) const;
  // The dataset of field `field` in file `file`: one this process registered,
  // or (with `resolve`, where HDF5 is thread-safe) one prepared now. Null if
  // neither. Called by the prefetch leader.
  std::shared_ptr<CachedDataset> DatasetFor(FieldRef ref, bool resolve);
  // Writes the datasets resolved since the last call into the node's memo of
  // resolutions (resolution_memo.h), for the next leader. The prefetcher
  // calls it after each round.
  void FlushResolutions();
  // Bytes of one sample over every field: the map's, or (a map without row
  // sizes: a followed sampler's) those of the datasets bound so far; 0 while
  // a field has none bound.
  std::uint64_t BytesPerSample() const;

  // fork(): no thread of the parent may be inside the schedule reader.
  // fork(): this follower's lock (the prefetch thread takes it to find the
  // datasets it prefetches for), then the binding's.
  void LockForFork() const NO_THREAD_SAFETY_ANALYSIS {
    mutex_.Lock();
    binding_->LockForFork();
  }
  void UnlockAfterFork() const NO_THREAD_SAFETY_ANALYSIS {
    binding_->UnlockAfterFork();
    mutex_.Unlock();
  }

  // The node agent (vol/agent): prefetches for every local rank from now on,
  // taking the leadership from whoever holds it, fetching rows other nodes
  // own through `remote`, and sizing its window from the cache less the
  // `held_samples` this node owns.
  void RunAsNodeAgent(RemoteRows* remote, std::uint64_t held_samples);

  // Stops the prefetch leader (connector shutdown); false when its thread
  // could not be joined and this follower must never be destroyed
  // (Prefetcher::Stop).
  bool Stop(StopCaller caller = StopCaller::kAnyThread);
  // Follow mode, a newer schedule replaces this one: the prefetch leader is
  // asked to stop (not joined: the caller is inside an HDF5 callback), and
  // Idle() says when it has.
  void RequestStop();
  bool Idle() const;

 private:
  ScheduleFollower(std::shared_ptr<ScheduleBinding> binding, cache::NodeCache& cache,
                   const Options& options, AdoptFn adopt, ResolutionMemo* memo);
  void Bind(const std::shared_ptr<CachedDataset>& dataset, FieldRef ref);
  void NoteUnbound(const CachedDataset& dataset);

  std::shared_ptr<ScheduleBinding> binding_;
  cache::NodeCache& cache_;
  AdoptFn adopt_;
  BoundFields bound_;
  RankProgress progress_;
  std::atomic<std::uint64_t> oracle_failures_{0};
  NodeOwnership ownership_;  // the node agent's, when one runs
  ScheduleOracle oracle_;
  std::uint32_t local_rank_;
  long owner_pid_;  // the rank's long-lived process (a DataLoader worker reports for its parent)
  PositionTracker tracker_;
  ResolutionMemo* const resolutions_;  // the node's (may be null), not owned
  std::unique_ptr<Prefetcher> prefetcher_;
  bool prefetch_ = true;
  // PRESCIENT_FOLLOW: the schedule grows as epochs start (its last step is
  // not the rank's last), and its current epoch may still be being learned.
  bool open_ended_ = false;
  std::uint64_t oracle_failures_reported_ = 0;

  mutable cache::Mutex mutex_;
  // (file * fields + field) -> dataset, for the prefetch leader.
  std::map<std::uint64_t, std::shared_ptr<CachedDataset>> datasets_ GUARDED_BY(mutex_);
  // Row bytes of each field, from the first dataset bound to it (0: none yet).
  std::vector<std::uint64_t> field_row_bytes_ GUARDED_BY(mutex_);
  // Why a field could not be resolved.
  std::map<std::uint64_t, std::string> unresolvable_ GUARDED_BY(mutex_);
  // Datasets this process registered that the schedule does not describe.
  std::map<cache::DatasetSlot, std::string> unbound_ GUARDED_BY(mutex_);
  std::uint64_t unbound_reads_ GUARDED_BY(mutex_) = 0;
  bool unbound_warned_ GUARDED_BY(mutex_) = false;
  bool abandoned_warned_ = false;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_SCHEDULE_FOLLOWER_H_
