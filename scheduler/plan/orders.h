// The planned orders themselves (planner.h): each fills one epoch of every
// rank. Streams come from PlanRng keyed by (seed, epoch, purpose).
#ifndef PRESCIENT_SCHEDULER_PLAN_ORDERS_H_
#define PRESCIENT_SCHEDULER_PLAN_ORDERS_H_

#include <cstdint>
#include <vector>

#include "scheduler/core/access_schedule.h"
#include "scheduler/plan/epoch_shape.h"

namespace prescient::scheduler::plan {

// The global sequence of random epoch `random_epoch` for order=global: a
// uniform permutation of [0, n), then padded by repeating its first samples
// (or cut, with drop_last) to shape.length. Global batch s is positions
// [shape.StepBegin(s), shape.StepBegin(s + 1)); rank r reads the r-th slice of
// RankBatch(s) samples of it.
void GlobalEpochSequence(std::uint64_t num_samples, const EpochShape& shape, std::uint64_t seed,
                         std::uint32_t random_epoch, std::vector<SampleId>& out);

// Rank r's contiguous partition of [0, n): [r * n / R, (r + 1) * n / R).
std::uint64_t PartitionBegin(std::uint64_t num_samples, std::uint32_t ranks, std::uint32_t rank);

// Orders that give each rank its own list (local, partial:Q, groups:B). The
// partial order carries state (each rank's current samples) from epoch to
// epoch, so epochs must be generated in order 0, 1, 2, ...
class RankOrderGenerator {
 public:
  enum class Kind { kLocal, kPartial, kGroups };

  // `param` is Q for kPartial, B for kGroups, unused for kLocal.
  RankOrderGenerator(Kind kind, double param, std::uint64_t num_samples, const EpochShape& shape,
                     std::uint64_t seed);

  // Fills out[r] (resized to shape.per_rank) with rank r's order of `epoch`.
  void NextEpoch(std::uint32_t epoch, std::vector<std::vector<SampleId>*> out);

 private:
  void Exchange(std::uint32_t epoch);
  void FillGroups(std::uint32_t epoch, std::vector<std::vector<SampleId>*>& out);

  Kind kind_;
  double q_ = 0;
  std::uint64_t group_size_ = 0;
  std::uint64_t num_samples_;
  EpochShape shape_;
  std::uint64_t seed_;
  std::vector<std::vector<SampleId>> partition_;  // local and partial: each rank's samples
  std::vector<SampleId> scratch_;
};

}  // namespace prescient::scheduler::plan

#endif  // PRESCIENT_SCHEDULER_PLAN_ORDERS_H_
