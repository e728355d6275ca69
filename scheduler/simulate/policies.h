// The cache policies of the simulator (simulator.h), one class each, all
// behind one per-read decision.
#ifndef PRESCIENT_SCHEDULER_SIMULATE_POLICIES_H_
#define PRESCIENT_SCHEDULER_SIMULATE_POLICIES_H_

#include <cstdint>
#include <memory>

#include "scheduler/plan/ownership.h"
#include "scheduler/plan/placement.h"
#include "scheduler/plan/schedule_view.h"
#include "scheduler/simulate/simulator.h"

namespace prescient::scheduler::simulate {

enum class Outcome { kStorage, kHit, kRemote };

class PolicyModel {
 public:
  virtual ~PolicyModel() = default;
  // `node` reads `sample` at global step `now`; its next read on this node is
  // at step `next_use` (kNoNextUse: never).
  virtual Outcome Read(std::uint32_t node, SampleId sample, std::uint32_t next_use,
                       std::uint32_t now) = 0;
  // Called after every global step.
  virtual void EndStep(std::uint32_t /*now*/) {}
};

// `placement` is used by kNopfs only and `owners` by kPrescient only; each
// must outlive the model.
std::unique_ptr<PolicyModel> MakePolicyModel(Policy policy, const plan::ScheduleView& view,
                                             std::uint64_t cache_samples,
                                             const plan::StaticPlacement* placement,
                                             const plan::SampleOwners* owners);

}  // namespace prescient::scheduler::simulate

#endif  // PRESCIENT_SCHEDULER_SIMULATE_POLICIES_H_
