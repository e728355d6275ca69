// Access schedules of unmodified loaders (LoaderSpec), exact for every rank
// and epoch. Pure functions of (spec, num_samples, layout, epoch): a process
// can regenerate only its own (rank, epoch) with GenerateLoaderRankEpoch.
//
// Every source first makes the epoch's global order (a permutation of
// 0..n-1), then splits it like DistributedSampler: pad by cyclic repetition
// to a multiple of the ranks (or truncate with drop_last) and give rank r
// positions r, r + R, r + 2R, ... Each rank's list is cut into steps of
// layout.batch_size (the last one shorter, or dropped with drop_last_batch);
// step k is read by DataLoader worker k % workers.
#ifndef PRESCIENT_SCHEDULER_CORE_LOADER_ORDERS_H_
#define PRESCIENT_SCHEDULER_CORE_LOADER_ORDERS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>

#include "scheduler/core/access_schedule.h"
#include "scheduler/core/loader_spec.h"
#include "scheduler/core/numpy_rng.h"
#include "scheduler/core/torch_rng.h"

namespace prescient::scheduler {

// The global order of consecutive epochs 0, 1, 2, ... Stateful sources
// (torch-loader, numpy) carry their generator from one epoch to the next;
// Skip() advances it without building the permutation.
class EpochOrderStream {
 public:
  // REQUIRES: ValidateLoaderSpec(spec, num_samples, ...) passed.
  EpochOrderStream(const LoaderSpec& spec, std::uint64_t num_samples);

  std::uint32_t next_epoch() const { return next_epoch_; }
  // Writes the order of next_epoch() (out.size() == num_samples), advances.
  void Next(std::span<SampleId> out);
  void Skip();

 private:
  void StartEpoch();

  LoaderSpec spec_;
  std::uint64_t num_samples_;
  std::uint32_t next_epoch_ = 0;
  std::optional<TorchGenerator> torch_;
  std::optional<Pcg64> pcg_;
  std::optional<LegacyMt19937> legacy_;
};

// Samples per rank and epoch before batching (DistributedSampler.num_samples).
std::uint64_t SamplesPerRank(const LoaderSpec& spec, std::uint64_t num_samples,
                             const WorldLayout& layout);

// Steps (local batches) per rank and epoch; the same for every epoch.
std::uint64_t StepsPerEpoch(const LoaderSpec& spec, std::uint64_t num_samples,
                            const WorldLayout& layout);

// Rank `rank`'s part of an epoch with global order `order`.
RankEpoch SplitForRank(const LoaderSpec& spec, const WorldLayout& layout,
                       std::span<const SampleId> order, std::uint32_t rank);

// The whole schedule. `progress` (may be empty) gets the fraction done.
AccessSchedule GenerateLoaderSchedule(const LoaderSpec& spec, std::uint64_t num_samples,
                                      const WorldLayout& layout, std::uint32_t epochs,
                                      const std::function<void(double)>& progress = {});

// One rank's epoch: O(num_samples) time and memory for the epoch's order
// (plus replaying the generator over earlier epochs for stateful sources).
RankEpoch GenerateLoaderRankEpoch(const LoaderSpec& spec, std::uint64_t num_samples,
                                  const WorldLayout& layout, std::uint32_t rank,
                                  std::uint32_t epoch);

}  // namespace prescient::scheduler

#endif  // PRESCIENT_SCHEDULER_CORE_LOADER_ORDERS_H_
