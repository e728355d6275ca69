// The cache simulator (prescient-schedule simulate): replays a schedule
// against a node cache under a policy and counts, per epoch, step and rank,
// the storage reads, local hits and remote hits, and optionally the epoch time
// under NoPFS's performance model. Every result comes with its lower bounds.
//
// Time model: global steps are bulk-synchronous; inside a step every node
// serves its ranks' samples in rank order then position order. Node caches
// are shared by the ranks of a node and hold `cache_samples` samples.
//
// Policies (see scheduler/simulate/README.md):
//   none       no cache: every read goes to storage
//   lru        node cache, least recently used evicted; every miss admitted
//              until it is full, then one in eight (the runtime without a schedule)
//   belady     node cache, clairvoyant: evicts the sample whose next read on
//              this node is furthest away and does not admit a sample needed
//              later than everything cached (Belady's MIN: the fewest storage
//              reads any node-local cache can achieve on this order)
//   nopfs      NoPFS static placement (plan/placement.h): each node caches its
//              most frequently read samples (filled by their first read, never
//              evicted); a miss cached on another node is a remote hit
//   prescient  the policy of Prescient's node agent (prescient-node,
//              vol/agent): every sample read gets at most one owner node
//              (plan/ownership.h), which reads it from storage once, at its
//              first use anywhere, holds it to the end and serves the other
//              nodes (remote hits); the rest of each cache is a belady cache
//              of samples the node does not own. With owners for every sample
//              the job reads each sample from storage once.
//
// Lower bounds: compulsory misses per node (distinct samples a node reads:
// no node-local policy can do better), compulsory misses overall (distinct
// samples read anywhere: the bound with peer fetches), and Belady's optimum
// for this fixed order (always simulated).
#ifndef PRESCIENT_SCHEDULER_SIMULATE_SIMULATOR_H_
#define PRESCIENT_SCHEDULER_SIMULATE_SIMULATOR_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/plan/schedule_view.h"
#include "scheduler/simulate/storage_model.h"

namespace prescient::scheduler::simulate {

enum class Policy { kNone, kLru, kBelady, kNopfs, kPrescient };

const char* PolicyName(Policy policy);
// "all" or a comma-separated list of policy names; std::invalid_argument otherwise.
std::vector<Policy> ParsePolicies(std::string_view spec);

struct SimulateOptions {
  std::uint64_t cache_samples = 0;  // per node
  std::uint64_t row_bytes = 0;  // bytes per sample (all fields); 0 = unknown (no bytes, no model)
  // The fields (datasets) read per sample, from the schedule's sample map:
  // a sample read from storage reads one row of each, so storage rows =
  // storage samples x fields. Empty: one unnamed field. For reporting only:
  // all fields of a sample share its next use and are cached together.
  std::vector<std::string> fields;
  std::uint64_t slot_bytes = 0;  // cache bytes a sample occupies (block-rounded), reported
  std::vector<Policy> policies = {Policy::kNone, Policy::kLru, Policy::kBelady, Policy::kNopfs,
                                  Policy::kPrescient};
  std::optional<StorageModel> model;     // modelled times need row_bytes too
  unsigned threads = 2;                  // policies simulated side by side
  std::function<void(double)> progress;  // called from the calling thread
};

struct Counts {
  std::uint64_t reads = 0;    // samples consumed
  std::uint64_t storage = 0;  // read from storage
  std::uint64_t hits = 0;     // served by the node's own cache
  std::uint64_t remote = 0;   // served by another node's cache
};

struct StepStats {
  std::uint32_t epoch = 0;
  std::uint32_t step = 0;
  Counts counts;
  std::uint64_t max_rank_storage = 0;  // the slowest rank's storage reads
  std::uint64_t min_rank_storage = 0;
  double model_seconds = 0;  // the step's modelled time (slowest rank)
  double io_seconds = 0;     // the slowest rank's fetch time alone
};

struct EpochStats {
  Counts counts;
  std::uint64_t slowest_rank_storage = 0;  // sum over steps of the per-step maximum
  double model_seconds = 0;
  double io_seconds = 0;
};

struct PolicyResult {
  Policy policy = Policy::kNone;
  Counts total;
  std::uint64_t slowest_rank_storage = 0;
  double model_seconds = 0;
  double io_seconds = 0;
  std::vector<EpochStats> epochs;
  std::vector<Counts> rank_epochs;  // index epoch * ranks + rank
  std::vector<StepStats> steps;     // every global step
};

struct LowerBounds {
  std::uint64_t compulsory_node = 0;    // sum over nodes of distinct samples read
  std::uint64_t compulsory_global = 0;  // distinct samples read by anyone
  std::uint64_t belady = 0;             // storage reads of Belady's MIN per node
};

// How the prescient policy split the samples between the nodes.
struct OwnershipStats {
  std::uint64_t budget = 0;   // samples a node may own (plan::HeldBudget)
  std::uint64_t owned = 0;    // samples read that have an owner
  std::uint64_t unowned = 0;  // samples read that have none (aggregate budget too small)
};

struct SimulationResult {
  std::uint64_t num_samples = 0;
  WorldLayout layout;
  std::uint32_t epochs = 0;
  std::uint64_t cache_samples = 0;
  std::uint64_t row_bytes = 0;
  std::vector<std::string> fields;  // as in SimulateOptions
  std::uint64_t slot_bytes = 0;
  std::string model_name;  // empty: no storage model
  // Storage rows per sample read from storage: one per field.
  std::uint64_t rows_per_sample() const { return fields.empty() ? 1 : fields.size(); }
  LowerBounds bounds;
  std::optional<OwnershipStats> ownership;  // set when prescient was simulated
  std::vector<PolicyResult> policies;       // in the order asked for
};

SimulationResult Simulate(const plan::ScheduleView& view, const SimulateOptions& options);

}  // namespace prescient::scheduler::simulate

#endif  // PRESCIENT_SCHEDULER_SIMULATE_SIMULATOR_H_
