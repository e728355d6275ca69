#include "vol/schedule/position_tracker.h"

#include <algorithm>

namespace prescient::vol {

PositionTracker::PositionTracker(std::shared_ptr<const ScheduleBinding> binding)
    : binding_(std::move(binding)) {
  // Workers run up to prefetch_factor (2) x W batches ahead of each other.
  const scheduler::WorldLayout& layout = binding_->header().layout;
  ahead_ = std::max<std::uint64_t>(64, 4ull * layout.batch_size * (layout.workers + 1));
  behind_ = std::max<std::uint64_t>(16, 2ull * layout.batch_size);
}

const PositionTracker::EpochView& PositionTracker::ViewOf(std::uint32_t epoch) const {
  EpochView& view = views_[epoch % 2];
  if (view.epoch != epoch) {
    view.positions = binding_->PositionsOf(epoch);
    view.part = binding_->Part(binding_->rank(), epoch);
    view.epoch = epoch;
  }
  return view;
}

std::optional<std::uint64_t> PositionTracker::Find(std::uint32_t epoch, std::uint64_t sample,
                                                   std::uint64_t from, std::uint64_t to) const {
  if (epoch >= binding_->epochs() || sample >= binding_->header().num_samples) return std::nullopt;
  return ViewOf(epoch).positions->Within(sample, from, to);
}

std::optional<std::uint64_t> PositionTracker::FindRun(std::uint32_t epoch,
                                                      std::span<const std::uint64_t> samples,
                                                      std::uint64_t from, std::uint64_t to,
                                                      std::uint64_t near) const {
  if (epoch >= binding_->epochs()) return std::nullopt;
  const EpochView& view = ViewOf(epoch);
  return view.positions->RunWithin(samples, view.part, from, to, near);
}

std::uint64_t PositionTracker::StepOf(std::uint32_t epoch, std::uint64_t position) const {
  const auto begins = ViewOf(epoch).part.step_begin();
  const auto it = std::upper_bound(begins.begin(), begins.end(), position);
  const std::uint64_t step =
      it == begins.begin() ? 0 : static_cast<std::uint64_t>(it - begins.begin()) - 1;
  return binding_->GlobalStep(epoch, step);
}

PositionTracker::Observation PositionTracker::Place(std::span<const std::uint64_t> samples,
                                                    std::uint64_t placement) {
  // The epoch the rank is in, or the next one: the one holding more of the
  // read's samples wins, and between epochs holding as many (an order that
  // repeats every epoch, DistributedSampler(shuffle=False)), the one whose
  // step is nearer the rank's placement. A placement a few steps short of an
  // epoch's end (the last batches' progress not reported yet when a worker
  // of the next epoch reads) must not put the read a whole epoch back.
  const std::uint32_t first = binding_->EpochAndStep(placement).first;
  Observation best;
  std::uint64_t best_end = 0;
  std::uint64_t best_distance = UINT64_MAX;
  auto consider = [&](std::uint32_t e) {
    Observation o;
    std::uint64_t furthest = 0;
    for (std::uint64_t sample : samples) {
      if (auto p = Find(e, sample, 0, UINT64_MAX)) {
        ++o.matched;
        furthest = std::max(furthest, *p);
      } else {
        ++o.mismatched;
      }
    }
    if (o.matched == 0 || o.matched < best.matched) return;
    const std::uint64_t step = StepOf(e, furthest);
    const std::uint64_t distance = step > placement ? step - placement : placement - step;
    if (o.matched == best.matched && distance >= best_distance) return;
    o.epoch = e;
    best = o;
    best_end = furthest + 1;
    best_distance = distance;
  };
  for (std::uint32_t e = first; e < std::min(first + 2, binding_->epochs()); ++e) consider(e);
  // Then the last epoch: a followed schedule (PRESCIENT_FOLLOW) ends with the
  // epoch that just started, and a worker not forked from its rank's process
  // (forkserver, spawn) may find no placement of its rank.
  if (best.matched == 0 && first + 2 < binding_->epochs()) consider(binding_->epochs() - 1);
  if (best.matched == 0) return {.mismatched = samples.size()};
  known_ = true;
  epoch_ = best.epoch;
  position_ = best_end;
  best.global_step = StepOf(epoch_, position_ - 1);
  return best;
}

PositionTracker::Observation PositionTracker::ObserveRead(std::span<const std::uint64_t> samples,
                                                          std::uint64_t placement) {
  if (abandoned_ || samples.empty()) return {};
  Observation o;
  if (!known_) {
    o = Place(samples, placement);
  } else {
    // Against the position before this read: here (a little behind, well
    // ahead), or at the start of the next epoch; the nearer of the two in
    // reading order wins for a sample found in both. Samples the list holds
    // one after another (a window of time steps: one read, 64 samples) are
    // placed as one.
    const std::uint64_t size = ViewOf(epoch_).part.size();
    const std::uint64_t from = position_ > behind_ ? position_ - behind_ : 0;
    auto here_wins = [&](const std::optional<std::uint64_t>& here,
                         const std::optional<std::uint64_t>& next) {
      return here && (!next || (*here >= position_ ? *here - position_ : 0) <=
                                   size - std::min(size, position_) + *next);
    };
    std::uint64_t here_end = 0, next_end = 0;
    std::uint64_t here_count = 0, next_count = 0;
    const std::optional<std::uint64_t> here_run =
        samples.size() > 1 ? FindRun(epoch_, samples, from, position_ + ahead_, position_)
                           : std::nullopt;
    const std::optional<std::uint64_t> next_run =
        samples.size() > 1 ? FindRun(epoch_ + 1, samples, 0, ahead_, 0) : std::nullopt;
    if (here_wins(here_run, next_run)) {
      here_count = samples.size();
      here_end = *here_run + samples.size();
    } else if (next_run) {
      next_count = samples.size();
      next_end = *next_run + samples.size();
    } else {
      for (std::uint64_t sample : samples) {
        const std::optional<std::uint64_t> here = Find(epoch_, sample, from, position_ + ahead_);
        const std::optional<std::uint64_t> next = Find(epoch_ + 1, sample, 0, ahead_);
        if (here_wins(here, next)) {
          ++here_count;
          here_end = std::max(here_end, *here + 1);
        } else if (next) {
          ++next_count;
          next_end = std::max(next_end, *next + 1);
        } else {
          ++o.mismatched;
        }
      }
    }
    o.matched = here_count + next_count;
    if (next_count > 0) {
      // The read reaches into the next epoch: this process is there now.
      ++epoch_;
      position_ = next_end;
    } else if (here_count > 0) {
      position_ = std::max(position_, here_end);
    }
    o.epoch = epoch_;
    if (o.matched > 0) o.global_step = StepOf(epoch_, position_ - 1);
  }
  if (o.matched > 0) {
    mismatches_ = 0;
  } else if ((mismatches_ += static_cast<std::uint32_t>(o.mismatched)) >= kMaxMismatches) {
    abandoned_ = true;
  }
  return o;
}

}  // namespace prescient::vol
