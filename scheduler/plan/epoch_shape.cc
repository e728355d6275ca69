#include "scheduler/plan/epoch_shape.h"

#include <stdexcept>
#include <string>

namespace prescient::scheduler::plan {

EpochShape ShapeFor(std::uint64_t num_samples, const WorldLayout& layout, bool drop_last) {
  if (layout.ranks == 0 || layout.batch_size == 0 || layout.ranks_per_node == 0) {
    throw std::invalid_argument("plan: ranks, ranks_per_node and batch_size must be >= 1");
  }
  if (num_samples == 0) throw std::invalid_argument("plan: the dataset has no samples");
  if (num_samples > 0xffffffffULL) {
    throw std::invalid_argument("plan: more than 2^32 - 1 samples (SampleId is 32-bit)");
  }
  EpochShape shape;
  shape.ranks = layout.ranks;
  shape.global_batch = static_cast<std::uint64_t>(layout.ranks) * layout.batch_size;
  if (drop_last) {
    shape.length = num_samples / shape.global_batch * shape.global_batch;
    if (shape.length == 0) {
      throw std::invalid_argument("plan: drop-last with " + std::to_string(num_samples) +
                                  " samples and a global batch of " +
                                  std::to_string(shape.global_batch) + " leaves no step");
    }
  } else {
    shape.length = (num_samples + layout.ranks - 1) / layout.ranks * layout.ranks;
  }
  shape.per_rank = shape.length / layout.ranks;
  shape.steps = (shape.length + shape.global_batch - 1) / shape.global_batch;
  return shape;
}

void FillUniformSteps(const EpochShape& shape, RankEpoch& part) {
  part.step_begin.assign(1, 0);
  part.step_begin.reserve(shape.steps + 1);
  std::uint64_t at = 0;
  for (std::uint64_t s = 0; s < shape.steps; ++s) {
    at += shape.RankBatch(s);
    part.step_begin.push_back(at);
  }
}

}  // namespace prescient::scheduler::plan
