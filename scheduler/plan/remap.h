// SOLAR's node-to-sample remapping and load balancing (Sun et al., sections
// 4.3-4.4), planned against a model of the node caches.
//
// The planner keeps, for every node, the set of samples it predicts that node
// caches: a Belady cache of `cache_per_node` samples keyed by the *global*
// next use of each sample (known from the random order, whatever node reads it
// then). A sample with a predicted holder is a predicted hit; the remap sends
// it to the holder's ranks. The global batch's membership never changes; only
// which rank of the step reads which of its samples.
//
// Without balance every rank reads exactly the step's nominal batch; hits that
// do not fit on their node move elsewhere ("displaced"). With balance the
// storage reads (predicted misses) are split evenly over ranks, within one,
// and the hits go to their nodes as long as no rank's batch exceeds
// floor(balance_cap * nominal batch); per-rank batch sizes then vary. No rank
// is left with an empty batch while the step has a sample for every rank (the
// storage reads may then differ by two in that step).
#ifndef PRESCIENT_SCHEDULER_PLAN_REMAP_H_
#define PRESCIENT_SCHEDULER_PLAN_REMAP_H_

#include <cstdint>
#include <span>
#include <vector>

#include "scheduler/core/access_schedule.h"
#include "scheduler/plan/planner.h"

namespace prescient::scheduler::plan {

inline constexpr std::uint32_t kNeverUsed = 0xffffffffu;

class RemapPlanner {
 public:
  // `steps_per_epoch` bounds how far ahead a next use can lie (two epochs).
  RemapPlanner(std::uint64_t num_samples, const WorldLayout& layout, std::uint64_t cache_per_node,
               std::uint64_t steps_per_epoch, bool balance, double balance_cap);

  // Splits global batch `batch`, read at global step `now`, over the ranks:
  // out[r] receives rank r's samples (in batch order). next_use[i] is the
  // global step at which batch[i] is read next (kNeverUsed if never). Updates
  // the cache model.
  void AssignStep(std::span<const SampleId> batch, std::span<const std::uint32_t> next_use,
                  std::uint32_t now, std::vector<std::vector<SampleId>>& out);

  const RemapReport& report() const { return report_; }

 private:
  static constexpr std::uint32_t kNoHolder = 0xffffffffu;

  // Per node: Belady set keyed by next use, in buckets on a ring of steps.
  struct NodeModel {
    std::uint64_t held = 0;
    std::vector<std::vector<SampleId>> ring;  // ring[key % ring.size()]
    std::vector<SampleId> never;              // held samples never used again
    std::uint32_t top = 0;                    // no bucket above `top` is non-empty
  };

  void Hold(std::uint32_t node, SampleId s, std::uint32_t key);
  bool EvictFurthest(std::uint32_t node, std::uint32_t now, std::uint32_t than);
  void Admit(std::uint32_t node, SampleId s, std::uint32_t key, std::uint32_t now);
  void SplitCounts(std::uint64_t batch, std::uint32_t now);
  void GiveEveryRankASample();
  void ExpireBucket(std::uint32_t now);

  WorldLayout layout_;
  std::uint32_t nodes_;
  std::uint64_t capacity_;
  bool balance_;
  double cap_;
  // Per sample, side by side so one cache line answers both questions.
  struct Held {
    std::uint32_t holder = kNoHolder;  // predicted node, or kNoHolder
    std::uint32_t key = kNeverUsed;    // its key in the holder's ring
  };
  std::vector<Held> held_;
  std::vector<NodeModel> model_;
  std::uint32_t ring_size_ = 0;

  // Per-step scratch.
  std::vector<std::vector<std::uint32_t>> hits_;         // per node: batch indices
  std::vector<std::uint32_t> misses_;                    // batch indices
  std::vector<std::uint64_t> kept_, quota_, hit_share_;  // per node, rank, rank
  std::vector<std::uint32_t> reader_node_;               // per batch index
  std::vector<std::uint32_t> rank_of_;                   // per batch index
  std::vector<SampleId> due_;
  RemapReport report_;
};

}  // namespace prescient::scheduler::plan

#endif  // PRESCIENT_SCHEDULER_PLAN_REMAP_H_
