// The in-memory form of an access schedule: which samples every rank reads in
// every epoch, in read order, cut into steps (one local batch per global step).
//
// This is the hand-off type between the parts of scheduler/: loader orders and
// planners produce it, the schedule file stores it, the simulator and the
// cache's next-use queries consume it. It is a plain value type; it owns its
// storage and is safe to share read-only between threads.
//
// Sample ids are row numbers along dimension 0 of one dataset. They are stored
// as 32-bit values: 2^32 - 1 samples per dataset is far beyond any training set
// (ImageNet-22k has 14 M), and halving the footprint matters at 90 epochs.
#ifndef PRESCIENT_SCHEDULER_CORE_ACCESS_SCHEDULE_H_
#define PRESCIENT_SCHEDULER_CORE_ACCESS_SCHEDULE_H_

#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

namespace prescient::scheduler {

using SampleId = std::uint32_t;

// Who reads: data-parallel ranks grouped into nodes, each rank possibly with
// DataLoader worker processes that take its batches round-robin.
struct WorldLayout {
  std::uint32_t ranks = 1;           // data-parallel ranks (R)
  std::uint32_t ranks_per_node = 1;  // node n holds ranks [n*rpn, (n+1)*rpn)
  std::uint32_t workers = 0;         // DataLoader workers per rank; 0 = main process
  std::uint32_t batch_size = 1;      // nominal per-rank batch size

  std::uint32_t nodes() const { return (ranks + ranks_per_node - 1) / ranks_per_node; }
  std::uint32_t NodeOf(std::uint32_t rank) const { return rank / ranks_per_node; }
  // The process that reads local batch `step` of a rank: worker step % workers.
  std::uint32_t WorkerOf(std::uint64_t step) const {
    return workers == 0 ? 0 : static_cast<std::uint32_t>(step % workers);
  }
};

// What one rank reads in one epoch. Step s (a global step: every rank of the
// epoch has the same number of steps) covers
// samples[step_begin[s], step_begin[s + 1]). Planned, load-balanced schedules
// give steps of different sizes; loader orders give batch_size (the last step
// may be shorter).
struct RankEpoch {
  std::vector<SampleId> samples;
  std::vector<std::uint64_t> step_begin = {0};  // size = steps + 1

  std::size_t steps() const { return step_begin.size() - 1; }
  std::span<const SampleId> Step(std::size_t s) const {
    return {samples.data() + step_begin[s], samples.data() + step_begin[s + 1]};
  }
};

class AccessSchedule {
 public:
  AccessSchedule() = default;
  AccessSchedule(std::uint64_t num_samples, WorldLayout layout, std::uint32_t epochs)
      : num_samples_(num_samples),
        layout_(layout),
        epochs_(epochs),
        parts_(static_cast<std::size_t>(epochs) * layout.ranks) {}

  std::uint64_t num_samples() const { return num_samples_; }
  const WorldLayout& layout() const { return layout_; }
  std::uint32_t epochs() const { return epochs_; }

  // REQUIRES: rank < layout().ranks, epoch < epochs().
  RankEpoch& Part(std::uint32_t rank, std::uint32_t epoch) { return parts_.at(Index(rank, epoch)); }
  const RankEpoch& Part(std::uint32_t rank, std::uint32_t epoch) const {
    return parts_.at(Index(rank, epoch));
  }

 private:
  std::size_t Index(std::uint32_t rank, std::uint32_t epoch) const {
    if (rank >= layout_.ranks || epoch >= epochs_) {
      throw std::out_of_range("AccessSchedule: rank or epoch out of range");
    }
    return static_cast<std::size_t>(epoch) * layout_.ranks + rank;
  }

  std::uint64_t num_samples_ = 0;
  WorldLayout layout_;
  std::uint32_t epochs_ = 0;
  std::vector<RankEpoch> parts_;  // index epoch * ranks + rank
};

}  // namespace prescient::scheduler

#endif  // PRESCIENT_SCHEDULER_CORE_ACCESS_SCHEDULE_H_
