// How a planned epoch is cut into ranks and steps (the padding rules of
// planner.h), shared by every planned order.
#ifndef PRESCIENT_SCHEDULER_PLAN_EPOCH_SHAPE_H_
#define PRESCIENT_SCHEDULER_PLAN_EPOCH_SHAPE_H_

#include <cstdint>

#include "scheduler/core/access_schedule.h"

namespace prescient::scheduler::plan {

struct EpochShape {
  std::uint64_t length = 0;        // samples read per epoch over all ranks (M)
  std::uint64_t per_rank = 0;      // M / ranks
  std::uint64_t global_batch = 0;  // G = ranks * batch_size
  std::uint64_t steps = 0;         // ceil(M / G)
  std::uint32_t ranks = 0;

  // Global positions [StepBegin(s), StepBegin(s + 1)) form global batch s.
  std::uint64_t StepBegin(std::uint64_t s) const {
    return s * global_batch < length ? s * global_batch : length;
  }
  // Samples each rank reads in step s before any rebalancing.
  std::uint64_t RankBatch(std::uint64_t s) const {
    return (StepBegin(s + 1) - StepBegin(s)) / ranks;
  }
};

// Padding (drop_last false): M = ceil(n / R) * R. drop_last: M = floor(n / G) * G.
// Throws std::invalid_argument for zero ranks/batch or, with drop_last, a
// dataset smaller than one global batch.
EpochShape ShapeFor(std::uint64_t num_samples, const WorldLayout& layout, bool drop_last);

// Fills rank r's step_begin for the unbalanced shape: steps of RankBatch(s).
void FillUniformSteps(const EpochShape& shape, RankEpoch& part);

}  // namespace prescient::scheduler::plan

#endif  // PRESCIENT_SCHEDULER_PLAN_EPOCH_SHAPE_H_
