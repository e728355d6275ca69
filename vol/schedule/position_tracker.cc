#include "vol/schedule/position_tracker.h"

#include <algorithm>

namespace prescient::vol {

PositionTracker::PositionTracker(std::shared_ptr<const ScheduleBinding> binding)
    : binding_(std::move(binding)) {
  // Workers run up to prefetch_factor (2) x W batches ahead of each other.
  const scheduler::WorldLayout& layout = binding_->header().layout;
  window_ = std::max<std::uint64_t>(64, 4ull * layout.batch_size * (layout.workers + 1));
}

std::optional<std::uint64_t> PositionTracker::Find(std::uint32_t epoch, std::uint64_t sample,
                                                   std::uint64_t from, std::uint64_t to) const {
  if (epoch >= binding_->epochs() || sample >= binding_->header().num_samples) return std::nullopt;
  const auto positions = binding_->PositionsOf(epoch);
  const std::uint32_t p = (*positions)[sample];
  if (p == ScheduleBinding::kAbsent || p < from || p >= to) return std::nullopt;
  return p;
}

PositionTracker::Observation PositionTracker::Matched(std::uint32_t epoch, std::uint64_t position) {
  known_ = true;
  epoch_ = epoch;
  position_ = std::max(position_, position + 1);
  mismatches_ = 0;
  const scheduler::RankEpochView part = binding_->Part(binding_->rank(), epoch);
  const auto begins = part.step_begin();
  const auto it = std::upper_bound(begins.begin(), begins.end(), position);
  const std::uint64_t step =
      it == begins.begin() ? 0 : static_cast<std::uint64_t>(it - begins.begin()) - 1;
  return {true, binding_->GlobalStep(epoch, step), epoch};
}

PositionTracker::Observation PositionTracker::Observe(std::uint64_t sample,
                                                      std::uint64_t node_step) {
  if (abandoned_) return {};
  if (!known_) {
    const std::uint32_t epoch = binding_->EpochAndStep(node_step).first;
    for (std::uint32_t e = epoch; e < std::min(epoch + 2, binding_->epochs()); ++e) {
      if (auto p = Find(e, sample, 0, UINT64_MAX)) {
        position_ = 0;
        return Matched(e, *p);
      }
    }
  } else {
    // One process reads its batches in order, so within an epoch positions
    // only grow. Near an epoch's end a sample may also be one of the next
    // epoch's first: the nearer of the two in reading order wins.
    const std::uint64_t size = binding_->Part(binding_->rank(), epoch_).size();
    const std::optional<std::uint64_t> here = Find(epoch_, sample, position_, position_ + window_);
    const std::optional<std::uint64_t> next = Find(epoch_ + 1, sample, 0, window_);
    if (here && (!next || *here - position_ <= size - std::min(size, position_) + *next)) {
      return Matched(epoch_, *here);
    }
    if (next) {
      position_ = 0;
      return Matched(epoch_ + 1, *next);
    }
  }
  if (++mismatches_ >= kMaxMismatches) abandoned_ = true;
  return {};
}

}  // namespace prescient::vol
