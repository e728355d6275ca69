// Follows one process's reads through its rank's schedule.
//
// A rank's reads come from its main process or from its DataLoader workers,
// worker w taking batches w, w+W, ... in order; which worker a process is,
// and which epoch a freshly forked worker is in, is invisible to C. So the
// tracker locates each read sample in the rank's epoch list: near the current
// position (a window wide enough for the workers' interleaving) or at the
// start of the next epoch; the first read is placed through the node's step.
// Matched reads give this process's global step, which the cache's node step
// follows; reads that match nothing are counted, and a long run of them
// (another order than the schedule's) stops the tracking with one warning.
//
// Not thread-safe (the read callback is serialised by HDF5's lock).
#ifndef PRESCIENT_VOL_SCHEDULE_POSITION_TRACKER_H_
#define PRESCIENT_VOL_SCHEDULE_POSITION_TRACKER_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "vol/schedule/schedule_binding.h"

namespace prescient::vol {

class PositionTracker {
 public:
  explicit PositionTracker(std::shared_ptr<const ScheduleBinding> binding);

  struct Observation {
    bool matched = false;
    std::uint64_t global_step = 0;  // valid when matched
    std::uint32_t epoch = 0;        // valid when matched
  };
  // One read sample. `node_step` places the very first read.
  Observation Observe(std::uint64_t sample, std::uint64_t node_step);

  // True once the reads have persistently left the schedule.
  bool abandoned() const { return abandoned_; }
  // Consecutive mismatches after which tracking stops.
  static constexpr std::uint32_t kMaxMismatches = 256;

 private:
  std::optional<std::uint64_t> Find(std::uint32_t epoch, std::uint64_t sample, std::uint64_t from,
                                    std::uint64_t to) const;
  Observation Matched(std::uint32_t epoch, std::uint64_t position);

  std::shared_ptr<const ScheduleBinding> binding_;
  std::uint64_t window_;
  bool known_ = false;
  std::uint32_t epoch_ = 0;
  std::uint64_t position_ = 0;  // next expected position in epoch_'s list
  std::uint32_t mismatches_ = 0;
  bool abandoned_ = false;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_POSITION_TRACKER_H_
