#include "vol/schedule/rank_progress.h"

#include <algorithm>

namespace prescient::vol {

RankProgress::RankProgress(cache::NodeCache& cache, const ScheduleBinding& binding)
    : cache_(cache), local_ranks_(binding.LocalRanks()) {
  const scheduler::WorldLayout& layout = binding.header().layout;
  spread_ = 2ull * (layout.workers + 1) + 1;
  if (local_ranks_.size() > kMaxLocalRanks) local_ranks_.resize(kMaxLocalRanks);
}

void RankProgress::Report(std::uint32_t /*rank*/, std::uint64_t step, long /*owner_pid*/) {
  if (step > spread_) cache_.AdvanceNodeStep(step - spread_);
}

void RankProgress::Finish(std::uint32_t /*rank*/) {}

std::uint64_t RankProgress::Of(std::uint32_t /*rank*/) const { return cache_.NodeStep(); }

std::size_t RankProgress::Snapshot(std::span<std::uint64_t, kMaxLocalRanks> out) const {
  const std::uint64_t step = cache_.NodeStep();
  std::fill_n(out.begin(), local_ranks_.size(), step);
  return local_ranks_.size();
}

}  // namespace prescient::vol
