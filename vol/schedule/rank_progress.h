// Where each rank of this node is in the schedule.
//
// Ranks of a node do not move in lockstep, and each rank's reads come from
// several processes (its DataLoader workers, forked anew every epoch). The
// step a rank has reached is kept in the node's shared segment, so every
// process of the node sees every rank's: the eviction oracle asks "needed
// next by any rank, after where that rank is", a freshly forked worker is
// placed where its rank is, and the prefetch leader reads ahead of each rank
// on its own. A rank whose processes are gone, or that read its last step,
// stops holding the node back.
//
// A process reports the furthest step it matched minus the spread of its
// rank's workers (up to 2 x W batches apart): a conservative "reached" that
// never runs ahead of the rank's slowest reader.
#ifndef PRESCIENT_VOL_SCHEDULE_RANK_PROGRESS_H_
#define PRESCIENT_VOL_SCHEDULE_RANK_PROGRESS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "cache/core/node_cache.h"
#include "vol/schedule/schedule_binding.h"

namespace prescient::vol {

class RankProgress {
 public:
  // Local ranks of a node at most (the oracle keeps a snapshot on its stack).
  static constexpr std::size_t kMaxLocalRanks = 256;

  RankProgress(cache::NodeCache& cache, const ScheduleBinding& binding);

  // This process (of rank `rank`, whose long-lived process is `owner_pid`)
  // matched a read at global step `step`.
  void Report(std::uint32_t rank, std::uint64_t step, long owner_pid);
  // The rank read its last step.
  void Finish(std::uint32_t rank);
  // The first step `rank` has not finished reading: where its slowest
  // process is (conservatively: every read before it is done).
  std::uint64_t Of(std::uint32_t rank) const;
  // Where a process of `rank` that has not read yet starts looking for its
  // place: the rank's own progress, or its first step while it has reported
  // none (a rank reports from its first few steps on; the node's step, which
  // Of falls back to, may be another rank's, an epoch ahead of this one).
  std::uint64_t PlacementOf(std::uint32_t rank) const;
  // The furthest step any process of `rank` has begun to read: the prefetch
  // leader reads ahead of this, not of Of(), which trails it by the spread
  // of the rank's workers.
  // Nullopt before the rank has reported (it has read nothing far enough).
  std::optional<std::uint64_t> Front(std::uint32_t rank) const;
  // Of() for every local rank, in LocalRanks() order; returns how many. The
  // eviction oracle asks this for every row it keys, so the values are read
  // from the segment at most every kRefresh and kept here in between (steps
  // move a few times a second; a millisecond-old view changes nothing).
  std::size_t Snapshot(std::span<std::uint64_t, kMaxLocalRanks> out) const;
  std::size_t local_ranks() const { return local_ranks_.size(); }

 private:
  static constexpr std::chrono::microseconds kRefresh{500};
  void Refresh() const;

  cache::NodeCache& cache_;
  std::vector<std::uint32_t> local_ranks_;
  std::uint64_t spread_;  // steps a rank's processes may lie apart
  mutable std::array<std::atomic<std::uint64_t>, kMaxLocalRanks> cached_{};
  mutable std::atomic<std::int64_t> refreshed_ns_{-1};
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_RANK_PROGRESS_H_
