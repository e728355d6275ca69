// Follows one process's reads through its rank's schedule.
//
// A rank's reads come from its main process or from its DataLoader workers,
// worker w taking batches w, w+W, ... in order; which worker a process is,
// and which epoch a freshly forked worker is in, is invisible to C. So the
// tracker locates each read's samples in the rank's epoch list: near the
// current position (a window wide enough for the workers' interleaving) or at
// the start of the next epoch; the first read is placed through the step the
// rank has reached (`placement`).
//
// A read is judged as a whole, against the position before it: a batch read
// (`d[sorted(batch)]`, a slice `d[i:i+B]`, several steps at once) covers its
// steps' samples in any order, and the fields of one sample (an image, then
// its label, from another dataset) are separate reads of the same samples, so
// a short way back from the current position matches too. Matched reads give
// this process's global step; reads that match nothing are counted, and a
// long run of them (another order than the schedule's) stops the tracking
// with one warning.
//
// Not thread-safe (the read callback is serialised by HDF5's lock).
#ifndef PRESCIENT_VOL_SCHEDULE_POSITION_TRACKER_H_
#define PRESCIENT_VOL_SCHEDULE_POSITION_TRACKER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "vol/schedule/schedule_binding.h"

namespace prescient::vol {

class PositionTracker {
 public:
  explicit PositionTracker(std::shared_ptr<const ScheduleBinding> binding);

  struct Observation {
    std::uint64_t matched = 0;      // samples found where the schedule said
    std::uint64_t mismatched = 0;   // samples the schedule did not predict here
    std::uint64_t global_step = 0;  // the furthest matched sample's step (when matched > 0)
    std::uint32_t epoch = 0;        // its epoch
  };
  // One read's samples, in any order, repeats allowed. `placement` (a global
  // step: where this rank is) places the very first read.
  Observation ObserveRead(std::span<const std::uint64_t> samples, std::uint64_t placement);

  // True once the reads have persistently left the schedule.
  bool abandoned() const { return abandoned_; }
  // Consecutive unmatched samples after which tracking stops.
  static constexpr std::uint32_t kMaxMismatches = 256;

 private:
  // Position of `sample` in `epoch`'s list if within [from, to).
  std::optional<std::uint64_t> Find(std::uint32_t epoch, std::uint64_t sample, std::uint64_t from,
                                    std::uint64_t to) const;
  // Position of the first of `samples` where `epoch`'s list holds them one
  // after another, all within [from, to), nearest `near`.
  std::optional<std::uint64_t> FindRun(std::uint32_t epoch, std::span<const std::uint64_t> samples,
                                       std::uint64_t from, std::uint64_t to,
                                       std::uint64_t near) const;
  Observation Place(std::span<const std::uint64_t> samples, std::uint64_t placement);
  std::uint64_t StepOf(std::uint32_t epoch, std::uint64_t position) const;

  // What a read looks an epoch up in, kept here so that a read takes none of
  // the binding's locks and map lookups: a read looks in its epoch and the
  // next, which fall in different slots (epoch % 2).
  struct EpochView {
    std::uint32_t epoch = UINT32_MAX;  // UINT32_MAX: empty
    std::shared_ptr<const ScheduleBinding::EpochPositions> positions;
    scheduler::RankEpochView part;  // this rank's list
  };
  const EpochView& ViewOf(std::uint32_t epoch) const;

  std::shared_ptr<const ScheduleBinding> binding_;
  mutable std::array<EpochView, 2> views_;
  std::uint64_t ahead_;   // how far ahead of the position a read may be
  std::uint64_t behind_;  // how far behind (the other fields of recent samples)
  bool known_ = false;
  std::uint32_t epoch_ = 0;
  std::uint64_t position_ = 0;  // one past the furthest matched position in epoch_'s list
  std::uint32_t mismatches_ = 0;
  bool abandoned_ = false;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_POSITION_TRACKER_H_
