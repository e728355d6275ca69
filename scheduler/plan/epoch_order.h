// SOLAR's epoch-order optimisation (Sun et al., section 4.2): choose the order
// in which the random epochs are run so that each epoch starts with samples the
// previous one left in the cache.
//
// Cost model: after epoch u the (aggregate) buffer of `buffer` samples holds
// the last `buffer` samples u read; epoch v then misses
// N(u, v) = |first `buffer` samples of v  minus  last `buffer` samples of u|.
// The order is an open path through all epochs minimising the sum of N along
// it (an asymmetric path TSP). SOLAR uses particle-swarm optimisation; here an
// exact Held-Karp DP for up to kExactEpochLimit epochs and, beyond, nearest
// neighbour from every start followed by 2-opt and Or-opt local search.
#ifndef PRESCIENT_SCHEDULER_PLAN_EPOCH_ORDER_H_
#define PRESCIENT_SCHEDULER_PLAN_EPOCH_ORDER_H_

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "scheduler/core/access_schedule.h"

namespace prescient::scheduler::plan {

inline constexpr std::uint32_t kExactEpochLimit = 16;

// Dense E x E matrix, cost(u, v) = N(u, v); the diagonal is unused (0).
class EpochCostMatrix {
 public:
  EpochCostMatrix() = default;
  explicit EpochCostMatrix(std::uint32_t epochs)
      : epochs_(epochs), cost_(static_cast<std::size_t>(epochs) * epochs, 0) {}

  std::uint32_t epochs() const { return epochs_; }
  std::uint64_t operator()(std::uint32_t u, std::uint32_t v) const {
    return cost_[static_cast<std::size_t>(u) * epochs_ + v];
  }
  std::uint64_t& at(std::uint32_t u, std::uint32_t v) {
    return cost_[static_cast<std::size_t>(u) * epochs_ + v];
  }

 private:
  std::uint32_t epochs_ = 0;
  std::vector<std::uint64_t> cost_;
};

// Builds the matrix from each epoch's global read sequence; `sequence(e, out)`
// fills `out` with epoch e's sequence (called twice per epoch, the second time
// from two threads at once: it must be deterministic and thread-safe).
// Memory: one bitset of `epochs` bits per sample.
EpochCostMatrix BuildEpochCostMatrix(
    std::uint64_t num_samples, std::uint32_t epochs, std::uint64_t buffer,
    const std::function<void(std::uint32_t, std::vector<SampleId>&)>& sequence);

std::uint64_t PathCost(const EpochCostMatrix& cost, std::span<const std::uint32_t> order);

// Exact optimum of the open path. REQUIRES: cost.epochs() <= kExactEpochLimit.
std::vector<std::uint32_t> SolveEpochOrderExact(const EpochCostMatrix& cost);

// Nearest neighbour from every start, each improved by 2-opt and Or-opt until
// no move helps; the best path found. Deterministic.
std::vector<std::uint32_t> SolveEpochOrderHeuristic(const EpochCostMatrix& cost);

}  // namespace prescient::scheduler::plan

#endif  // PRESCIENT_SCHEDULER_PLAN_EPOCH_ORDER_H_
