// NoPFS's static cache placement (Dryden et al., SC'21, sections 3 and 5):
// every node counts how often it reads each sample over all epochs of the
// schedule and fills its cache with the most frequently read ones (ties: the
// earlier first read), in order of first read (the prefetch order). Caches are
// static: filled once, never evicted. The same sample may be cached on several
// nodes (a replica on each heavy reader).
//
// The owner map answers "which node should a remote fetch of s go to": among
// the nodes caching s, the one reading it most often (ties: lowest node id).
// The distributed cache uses it for remote fetches; the simulator's nopfs
// policy uses it for remote hits.
#ifndef PRESCIENT_SCHEDULER_PLAN_PLACEMENT_H_
#define PRESCIENT_SCHEDULER_PLAN_PLACEMENT_H_

#include <cstdint>
#include <vector>

#include "scheduler/core/access_schedule.h"
#include "scheduler/plan/schedule_view.h"

namespace prescient::scheduler::plan {

class StaticPlacement {
 public:
  static constexpr std::uint32_t kNoOwner = 0xffffffffu;
  static constexpr std::uint64_t kNever = ~std::uint64_t{0};

  StaticPlacement() = default;
  StaticPlacement(std::uint64_t num_samples, std::uint32_t nodes);

  std::uint32_t nodes() const { return nodes_; }
  std::uint64_t num_samples() const { return num_samples_; }

  // Node to fetch `sample` from, or kNoOwner when no node caches it.
  std::uint32_t Owner(SampleId sample) const { return owner_[sample]; }
  bool CachedOn(std::uint32_t node, SampleId sample) const {
    const std::uint64_t bit = static_cast<std::uint64_t>(node) * num_samples_ + sample;
    return (bits_[bit / 64] >> (bit % 64)) & 1;
  }
  // Samples cached on `node`, in prefetch order (first read first).
  const std::vector<SampleId>& CachedSamples(std::uint32_t node) const { return cached_[node]; }
  // Global step at which the owner first reads `sample` (it has it from then
  // on); kNever when there is no owner.
  std::uint64_t OwnerFirstStep(SampleId sample) const { return owner_first_step_[sample]; }

  // Used while building.
  void Add(std::uint32_t node, SampleId sample, std::uint32_t frequency, std::uint64_t first_step);

 private:
  std::uint64_t num_samples_ = 0;
  std::uint32_t nodes_ = 0;
  std::vector<std::uint64_t> bits_;  // node-major bitset
  std::vector<std::vector<SampleId>> cached_;
  std::vector<std::uint32_t> owner_;
  std::vector<std::uint32_t> owner_frequency_;
  std::vector<std::uint64_t> owner_first_step_;
};

// Places `capacity_per_node` samples on every node of `view.layout`.
StaticPlacement PlaceByFrequency(const ScheduleView& view, std::uint64_t capacity_per_node);

}  // namespace prescient::scheduler::plan

#endif  // PRESCIENT_SCHEDULER_PLAN_PLACEMENT_H_
