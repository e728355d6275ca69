#include "vol/schedule/rank_progress.h"

#include <algorithm>

namespace prescient::vol {
namespace {

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

RankProgress::RankProgress(cache::NodeCache& cache, const ScheduleBinding& binding)
    : cache_(cache), local_ranks_(binding.LocalRanks()) {
  const scheduler::WorldLayout& layout = binding.header().layout;
  spread_ = 2ull * (layout.workers + 1) + 1;
  if (local_ranks_.size() > kMaxLocalRanks) local_ranks_.resize(kMaxLocalRanks);
}

void RankProgress::Report(std::uint32_t rank, std::uint64_t step, long owner_pid) {
  // The rank's slowest process reads no earlier than `step - spread_`; the
  // segment keeps "reached" as the step before that (NextUseOracle's "now").
  if (step <= spread_) return;
  (void)cache_.ReportProgress(rank, step - spread_ - 1, static_cast<std::int32_t>(owner_pid));
}

void RankProgress::Finish(std::uint32_t rank) { (void)cache_.FinishParticipant(rank); }

std::uint64_t RankProgress::Of(std::uint32_t rank) const {
  // A rank that has not reported yet is where the node is.
  const std::optional<std::uint64_t> reached = cache_.ParticipantStep(rank);
  return reached.value_or(cache_.NodeStep()) + 1;
}

std::uint64_t RankProgress::PlacementOf(std::uint32_t rank) const {
  const std::optional<std::uint64_t> reached = cache_.ParticipantStep(rank);
  return reached ? *reached + 1 : 0;
}

std::optional<std::uint64_t> RankProgress::Front(std::uint32_t rank) const {
  const std::optional<std::uint64_t> reached = cache_.ParticipantStep(rank);
  if (!reached) return std::nullopt;
  return *reached + 1 + spread_;  // Report's inverse: the furthest step a process matched
}

void RankProgress::Refresh() const {
  for (std::size_t k = 0; k < local_ranks_.size(); ++k)
    cached_[k].store(Of(local_ranks_[k]), std::memory_order_relaxed);
}

std::size_t RankProgress::Snapshot(std::span<std::uint64_t, kMaxLocalRanks> out) const {
  const std::int64_t now = NowNs();
  std::int64_t last = refreshed_ns_.load(std::memory_order_acquire);
  if (last < 0 || now - last >= std::chrono::nanoseconds(kRefresh).count()) {
    // One thread refreshes; the others use the previous values meanwhile
    // (or refresh themselves the very first time, when there are none).
    if (refreshed_ns_.compare_exchange_strong(last, now) || last < 0) Refresh();
  }
  for (std::size_t k = 0; k < local_ranks_.size(); ++k)
    out[k] = cached_[k].load(std::memory_order_relaxed);
  return local_ranks_.size();
}

}  // namespace prescient::vol
