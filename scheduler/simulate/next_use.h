// Per-read next use on the reading node, for the clairvoyant policies, and
// the compulsory-miss lower bounds, in one backward pass per node.
#ifndef PRESCIENT_SCHEDULER_SIMULATE_NEXT_USE_H_
#define PRESCIENT_SCHEDULER_SIMULATE_NEXT_USE_H_

#include <cstdint>
#include <vector>

#include "scheduler/plan/schedule_view.h"

namespace prescient::scheduler::simulate {

inline constexpr std::uint32_t kNoNextUse = 0xffffffffu;

struct NextUseTable {
  // next[e * ranks + r][i]: global step at which the node of rank r reads
  // sample i of (r, e) again, kNoNextUse if never. Reads of one step count as
  // simultaneous, so a repeat inside the step gives that same step.
  std::vector<std::vector<std::uint32_t>> next;
  std::uint64_t compulsory_node = 0;    // sum over nodes of distinct samples read
  std::uint64_t compulsory_global = 0;  // distinct samples read by anyone
};

// `first_steps` from view.EpochFirstSteps(). Nodes are split over `threads`
// threads (view.part must be thread-safe; both views in this project are).
NextUseTable ComputeNextUse(const plan::ScheduleView& view,
                            const std::vector<std::uint64_t>& first_steps, unsigned threads = 1);

}  // namespace prescient::scheduler::simulate

#endif  // PRESCIENT_SCHEDULER_SIMULATE_NEXT_USE_H_
