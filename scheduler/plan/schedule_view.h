// Read-only access to a schedule one (rank, epoch) at a time, so consumers
// (NoPFS placement, the simulator) work the same on an in-memory
// AccessSchedule and on a mapped schedule file without copying it.
#ifndef PRESCIENT_SCHEDULER_PLAN_SCHEDULE_VIEW_H_
#define PRESCIENT_SCHEDULER_PLAN_SCHEDULE_VIEW_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "scheduler/core/access_schedule.h"

namespace prescient::scheduler::plan {

struct PartView {
  std::span<const SampleId> samples;
  std::span<const std::uint64_t> step_begin;  // steps + 1 boundaries
  std::shared_ptr<const void> keep_alive;     // holds the storage behind the spans

  std::size_t steps() const { return step_begin.empty() ? 0 : step_begin.size() - 1; }
  std::span<const SampleId> Step(std::size_t s) const {
    return samples.subspan(step_begin[s], step_begin[s + 1] - step_begin[s]);
  }
};

struct ScheduleView {
  std::uint64_t num_samples = 0;
  WorldLayout layout;
  std::uint32_t epochs = 0;
  std::function<PartView(std::uint32_t rank, std::uint32_t epoch)> part;

  // Steps of each epoch (rank 0's count; every rank has the same) and the
  // global step number of each epoch's first step (size epochs + 1).
  std::vector<std::uint64_t> EpochFirstSteps() const {
    std::vector<std::uint64_t> first(epochs + 1, 0);
    for (std::uint32_t e = 0; e < epochs; ++e) first[e + 1] = first[e] + part(0, e).steps();
    return first;
  }
};

// Calls fn(epoch, step, part) for every (rank, epoch) part of the ranks of
// `node`, epoch by epoch: the per-node passes of NoPFS's placement and of
// sample ownership.
template <typename Fn>
void ForEachPartOfNode(const ScheduleView& view, std::uint32_t node, Fn&& fn) {
  const WorldLayout& layout = view.layout;
  const std::uint32_t rank_begin = node * layout.ranks_per_node;
  const std::uint32_t rank_end = std::min(rank_begin + layout.ranks_per_node, layout.ranks);
  for (std::uint32_t e = 0; e < view.epochs; ++e) {
    for (std::uint32_t r = rank_begin; r < rank_end; ++r) fn(e, view.part(r, e));
  }
}

// A view of `schedule`, which must outlive it.
inline ScheduleView ViewOf(const AccessSchedule& schedule) {
  ScheduleView view;
  view.num_samples = schedule.num_samples();
  view.layout = schedule.layout();
  view.epochs = schedule.epochs();
  view.part = [&schedule](std::uint32_t rank, std::uint32_t epoch) {
    const RankEpoch& p = schedule.Part(rank, epoch);
    return PartView{p.samples, p.step_begin, nullptr};
  };
  return view;
}

}  // namespace prescient::scheduler::plan

#endif  // PRESCIENT_SCHEDULER_PLAN_SCHEDULE_VIEW_H_
