// Sample ownership across nodes: the placement Prescient's node agents run
// (vol/agent) and the simulator's `prescient` policy replays, one function for
// both so the prediction is of the code that runs.
//
// Every sample read by the schedule gets at most one owner node. The owner
// reads it from storage once (at its first use anywhere in the job), keeps it
// for the rest of the job and serves it to the other nodes, so with owners for
// every sample the job reads each sample from storage once (NoPFS, section 3,
// caches each node's most frequently read samples and may replicate them; here
// the aggregate cache holds one copy of as much of the dataset as fits, and the
// rest of each cache follows Belady over the node's own reads).
//
// The owner is the node that reads the sample most often over the schedule
// (ties: a hash of sample and node, so tied samples spread evenly over the
// tied nodes) while it has room, else the node with the fewest owned samples
// that has room. Each node owns at most HeldBudget samples: an even share of
// the samples read, and never more than its cache less a transit share (1/8
// of it, which keeps room for rows a node reads but does not own on their way
// from a peer or storage to the loaders). When the nodes' budgets add up to
// less than the samples read, the rest have no owner: every node reads them
// from storage and caches them by Belady like any non-owned sample.
#ifndef PRESCIENT_SCHEDULER_PLAN_OWNERSHIP_H_
#define PRESCIENT_SCHEDULER_PLAN_OWNERSHIP_H_

#include <cstdint>
#include <vector>

#include "scheduler/core/access_schedule.h"
#include "scheduler/plan/schedule_view.h"

namespace prescient::scheduler::plan {

class SampleOwners {
 public:
  static constexpr std::uint32_t kNoOwner = 0xffffffffu;

  SampleOwners() = default;
  SampleOwners(std::uint64_t num_samples, std::uint32_t nodes, std::uint64_t budget);

  std::uint32_t Owner(SampleId sample) const { return owner_[sample]; }
  std::uint32_t nodes() const { return static_cast<std::uint32_t>(owned_.size()); }
  std::uint64_t num_samples() const { return owner_.size(); }
  // Samples `node` owns, and the most any node may own.
  std::uint64_t OwnedBy(std::uint32_t node) const { return owned_[node]; }
  std::uint64_t budget() const { return budget_; }
  // Samples read by the schedule that have no owner.
  std::uint64_t unowned() const { return unowned_; }

  // Used while building.
  void Assign(SampleId sample, std::uint32_t node);
  void CountUnowned() { ++unowned_; }

 private:
  std::vector<std::uint32_t> owner_;
  std::vector<std::uint64_t> owned_;
  std::uint64_t budget_ = 0;
  std::uint64_t unowned_ = 0;
};

// The cache share a node keeps for rows it does not own: 1 / kTransitShareDivisor.
inline constexpr std::uint64_t kTransitShareDivisor = 8;

// Samples one node may own: min(cache - cache / 8, ceil(read_samples / nodes)).
std::uint64_t HeldBudget(std::uint64_t cache_samples, std::uint64_t read_samples,
                         std::uint32_t nodes);

// Owners for every sample `view` reads, with `cache_samples` per node.
SampleOwners AssignOwners(const ScheduleView& view, std::uint64_t cache_samples);

}  // namespace prescient::scheduler::plan

#endif  // PRESCIENT_SCHEDULER_PLAN_OWNERSHIP_H_
