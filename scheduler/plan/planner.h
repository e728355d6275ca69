// Orders that Prescient plans itself (the loader follows the schedule file,
// through the Python sampler) and SOLAR's optimisations on a random order.
//
// Every order here is Prescient's own: the random streams come from
// `PlanRng` (SplitMix64, see plan_rng.h), keyed by (seed, epoch, purpose), so an
// epoch's permutation can be regenerated without the epochs before it.
//
// Step structure shared by all orders. A global step covers G = ranks *
// batch_size consecutive positions of the epoch's global sequence; the last
// step may be shorter. Rank r's part of a step is a slice of that global batch.
// Padding (drop_last off, the default): each epoch is padded to a multiple of
// `ranks` by repeating its first samples, as DistributedSampler does, so every
// rank has the same count; with drop_last on the epoch is cut to a multiple of
// G and the cut samples (a different random tail each epoch) are not read.
#ifndef PRESCIENT_SCHEDULER_PLAN_PLANNER_H_
#define PRESCIENT_SCHEDULER_PLAN_PLANNER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/core/access_schedule.h"

namespace prescient::scheduler::plan {

enum class Order {
  kGlobal,   // full random shuffle of the dataset every epoch
  kLocal,    // rank r keeps the contiguous partition r, shuffled every epoch
  kPartial,  // partial-local shuffling: exchange a fraction Q every epoch
  kGroups,   // groups of B contiguous samples shuffled across ranks
};

// Node cache capacity: an absolute sample count, or a percentage of the dataset.
struct CacheCapacity {
  bool is_percent = false;
  double value = 0;  // samples (integral) or percent in [0, 100]

  // Samples per node for a dataset of `num_samples` (rounded down, <= num_samples).
  std::uint64_t SamplesFor(std::uint64_t num_samples) const;

  bool operator==(const CacheCapacity&) const = default;
};

struct PlanOptions {
  Order order = Order::kGlobal;
  double partial_q = 0;          // order=partial:Q, Q in [0, 1]
  std::uint64_t group_size = 0;  // order=groups:B, B >= 1

  CacheCapacity cache;  // per node; drives epoch-order and remap

  // SOLAR switches. epoch-order, remap and balance work on order=global only
  // (they optimise a fully random order); balance needs remap. sort works on
  // every order.
  bool epoch_order = false;   // reorder epochs to maximise buffer reuse
  bool remap = false;         // move samples inside a global batch to the node caching them
  bool balance = false;       // equal storage reads per rank and step (within one)
  double balance_cap = 1.25;  // a rank's batch <= cap * mean batch (cap >= 1)
  bool sort = false;          // each rank's step sorted by sample id (file position)

  bool drop_last = false;  // see the file comment

  bool operator==(const PlanOptions&) const = default;
};

// Parses "key=value,key=value". Keys: order (global | local | partial:Q |
// groups:B), cache (N | P%), epoch-order, remap, balance, sort, drop-last
// (on | off), balance-cap (>= 1), solar (on = all four SOLAR switches).
// Empty spec = defaults. Throws std::invalid_argument naming the bad key or
// value and the accepted values.
PlanOptions ParsePlanOptions(std::string_view spec);

// Canonical form: every key in a fixed order, so equal options give equal
// strings and ParsePlanOptions(CanonicalPlanOptions(o)) == o.
std::string CanonicalPlanOptions(const PlanOptions& options);

// Cost of the epoch order (SOLAR's N(u,v) summed along the path).
struct EpochOrderReport {
  std::vector<std::uint32_t> order;  // order[i] = random epoch used as epoch i
  std::uint64_t buffer_samples = 0;  // buffer size of the cost model (aggregate cache)
  std::uint64_t identity_cost = 0;   // cost of 0, 1, ..., E-1
  std::uint64_t optimised_cost = 0;  // cost of `order`
  bool exact = false;                // true: `order` is a proven optimum
  std::string solver;                // "held-karp", "nn+2opt+oropt", "none"
};

// What the remap/balance pass achieved, summed over all steps and epochs.
struct RemapReport {
  std::uint64_t predicted_hits = 0;            // samples kept on the node predicted to cache them
  std::uint64_t displaced_hits = 0;            // predicted-cached samples that had to move node
  std::uint32_t max_rank_batch = 0;            // largest per-rank batch seen
  std::uint32_t min_rank_batch = 0xffffffffu;  // smallest per-rank batch seen
  std::uint32_t max_storage_spread = 0;  // max over steps of (max - min) predicted reads per rank
};

struct PlanResult {
  AccessSchedule schedule;
  EpochOrderReport epoch_order;
  RemapReport remap;
};

// Plans `epochs` epochs of `num_samples` samples for `layout`. `progress` is
// called with a fraction in [0, 1] (may be empty). Throws std::invalid_argument
// for inconsistent options (e.g. remap with order=local, zero ranks).
PlanResult PlanWithReport(std::uint64_t num_samples, const WorldLayout& layout,
                          std::uint32_t epochs, std::uint64_t seed, const PlanOptions& options,
                          const std::function<void(double fraction)>& progress);

AccessSchedule Plan(std::uint64_t num_samples, const WorldLayout& layout, std::uint32_t epochs,
                    std::uint64_t seed, const PlanOptions& options,
                    const std::function<void(double fraction)>& progress);

}  // namespace prescient::scheduler::plan

#endif  // PRESCIENT_SCHEDULER_PLAN_PLANNER_H_
