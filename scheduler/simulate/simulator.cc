#include "scheduler/simulate/simulator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "scheduler/plan/ownership.h"
#include "scheduler/plan/placement.h"
#include "scheduler/simulate/next_use.h"
#include "scheduler/simulate/policies.h"

namespace prescient::scheduler::simulate {
namespace {

constexpr Policy kAllPolicies[] = {Policy::kNone, Policy::kLru, Policy::kBelady, Policy::kNopfs,
                                   Policy::kPrescient};

void Add(Counts& into, const Counts& c) {
  into.reads += c.reads;
  into.storage += c.storage;
  into.hits += c.hits;
  into.remote += c.remote;
}

// Accumulates one result: per-step, per-rank and per-epoch counts and times.
class Accumulator {
 public:
  Accumulator(Policy policy, const plan::ScheduleView& view, std::uint64_t total_steps,
              const SimulateOptions& options)
      : ranks_(view.layout.ranks),
        timed_(options.model.has_value() && !options.model->name.empty() && options.row_bytes > 0),
        row_(static_cast<double>(options.row_bytes)),
        model_(options.model) {
    result_.policy = policy;
    result_.epochs.resize(view.epochs);
    result_.rank_epochs.resize(static_cast<std::size_t>(view.epochs) * ranks_);
    result_.steps.reserve(total_steps);
  }

  void Step(std::uint32_t e, std::size_t s, const std::vector<Counts>& per_rank) {
    StepStats step;
    step.epoch = e;
    step.step = static_cast<std::uint32_t>(s);
    step.min_rank_storage = ~std::uint64_t{0};
    double clients = 0;
    for (std::uint32_t r = 0; r < ranks_; ++r) {
      const Counts& c = per_rank[r];
      Add(step.counts, c);
      Add(result_.rank_epochs[static_cast<std::size_t>(e) * ranks_ + r], c);
      step.max_rank_storage = std::max(step.max_rank_storage, c.storage);
      step.min_rank_storage = std::min(step.min_rank_storage, c.storage);
      clients += c.storage > 0 ? 1 : 0;
    }
    if (timed_) {
      for (const Counts& c : per_rank) {
        step.model_seconds = std::max(
            step.model_seconds, model_->RankSeconds(row_ * static_cast<double>(c.reads),
                                                    row_ * static_cast<double>(c.storage),
                                                    row_ * static_cast<double>(c.remote),
                                                    row_ * static_cast<double>(c.hits), clients));
        step.io_seconds = std::max(
            step.io_seconds, model_->FetchSeconds(row_ * static_cast<double>(c.storage),
                                                  row_ * static_cast<double>(c.remote),
                                                  row_ * static_cast<double>(c.hits), clients));
      }
    }
    EpochStats& epoch = result_.epochs[e];
    Add(epoch.counts, step.counts);
    epoch.slowest_rank_storage += step.max_rank_storage;
    epoch.model_seconds += step.model_seconds;
    epoch.io_seconds += step.io_seconds;
    result_.steps.push_back(step);
  }

  PolicyResult Finish() {
    for (const EpochStats& epoch : result_.epochs) {
      Add(result_.total, epoch.counts);
      result_.slowest_rank_storage += epoch.slowest_rank_storage;
      result_.model_seconds += epoch.model_seconds;
      result_.io_seconds += epoch.io_seconds;
    }
    return std::move(result_);
  }

 private:
  std::uint32_t ranks_;
  bool timed_;
  double row_;
  const std::optional<StorageModel>& model_;
  PolicyResult result_;
};

// What the policy models need besides the schedule, each built only when a
// policy that uses it is simulated.
struct PolicyInputs {
  const plan::StaticPlacement* placement = nullptr;  // nopfs
  const plan::SampleOwners* owners = nullptr;        // prescient
};

// Replays the whole schedule under one policy.
PolicyResult Replay(Policy policy, const plan::ScheduleView& view,
                    const std::vector<std::uint64_t>& first_steps, const NextUseTable& next_use,
                    const SimulateOptions& options, const PolicyInputs& inputs,
                    std::atomic<std::uint64_t>& steps_done) {
  const WorldLayout& layout = view.layout;
  const std::unique_ptr<PolicyModel> model =
      MakePolicyModel(policy, view, options.cache_samples, inputs.placement, inputs.owners);
  Accumulator result(policy, view, first_steps.back(), options);
  std::vector<plan::PartView> parts(layout.ranks);
  std::vector<Counts> step_counts(layout.ranks);
  for (std::uint32_t e = 0; e < view.epochs; ++e) {
    for (std::uint32_t r = 0; r < layout.ranks; ++r) parts[r] = view.part(r, e);
    const std::size_t steps = first_steps[e + 1] - first_steps[e];
    for (std::size_t s = 0; s < steps; ++s) {
      const auto now = static_cast<std::uint32_t>(first_steps[e] + s);
      for (std::uint32_t r = 0; r < layout.ranks; ++r) {
        const plan::PartView& part = parts[r];
        const std::uint32_t node = layout.NodeOf(r);
        const std::uint32_t* next =
            next_use.next[static_cast<std::size_t>(e) * layout.ranks + r].data();
        Counts& c = step_counts[r];
        c = Counts{};
        for (std::uint64_t i = part.step_begin[s]; i < part.step_begin[s + 1]; ++i) {
          switch (model->Read(node, part.samples[i], next[i], now)) {
            case Outcome::kStorage:
              ++c.storage;
              break;
            case Outcome::kHit:
              ++c.hits;
              break;
            case Outcome::kRemote:
              ++c.remote;
              break;
          }
        }
        c.reads = c.storage + c.hits + c.remote;
      }
      model->EndStep(now);
      result.Step(e, s, step_counts);
      steps_done.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return result.Finish();
}

}  // namespace

const char* PolicyName(Policy policy) {
  switch (policy) {
    case Policy::kNone:
      return "none";
    case Policy::kLru:
      return "lru";
    case Policy::kBelady:
      return "belady";
    case Policy::kNopfs:
      return "nopfs";
    case Policy::kPrescient:
      return "prescient";
  }
  return "?";
}

std::vector<Policy> ParsePolicies(std::string_view spec) {
  if (spec == "all") return {std::begin(kAllPolicies), std::end(kAllPolicies)};
  std::vector<Policy> out;
  while (!spec.empty()) {
    const std::size_t comma = spec.find(',');
    const std::string_view name = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    const Policy* found = std::find_if(std::begin(kAllPolicies), std::end(kAllPolicies),
                                       [&](Policy p) { return name == PolicyName(p); });
    if (found == std::end(kAllPolicies)) {
      throw std::invalid_argument("policy '" + std::string(name) +
                                  "': accepted: all | none, lru, belady, nopfs, prescient");
    }
    if (std::find(out.begin(), out.end(), *found) == out.end()) out.push_back(*found);
  }
  if (out.empty()) throw std::invalid_argument("policy: empty list");
  return out;
}

SimulationResult Simulate(const plan::ScheduleView& view, const SimulateOptions& options) {
  if (view.layout.ranks == 0 || view.layout.ranks_per_node == 0) {
    throw std::invalid_argument("simulate: the layout has no ranks");
  }
  const std::vector<std::uint64_t> first_steps = view.EpochFirstSteps();
  const NextUseTable next_use = ComputeNextUse(view, first_steps, std::max(1u, options.threads));

  SimulationResult result;
  result.num_samples = view.num_samples;
  result.layout = view.layout;
  result.epochs = view.epochs;
  result.cache_samples = options.cache_samples;
  result.row_bytes = options.row_bytes;
  result.fields = options.fields;
  result.slot_bytes = options.slot_bytes;
  if (options.model && options.row_bytes > 0) result.model_name = options.model->name;
  result.bounds.compulsory_node = next_use.compulsory_node;
  result.bounds.compulsory_global = next_use.compulsory_global;

  // Belady's optimum is always simulated: it is the bound every row is held to.
  std::vector<Policy> runs = options.policies;
  const bool belady_asked = std::find(runs.begin(), runs.end(), Policy::kBelady) != runs.end();
  if (!belady_asked) runs.push_back(Policy::kBelady);
  const auto simulated = [&](Policy p) {
    return std::find(runs.begin(), runs.end(), p) != runs.end();
  };
  std::optional<plan::StaticPlacement> placement;
  if (simulated(Policy::kNopfs)) placement = plan::PlaceByFrequency(view, options.cache_samples);
  std::optional<plan::SampleOwners> owners;
  if (simulated(Policy::kPrescient)) {
    owners = plan::AssignOwners(view, options.cache_samples);
    result.ownership =
        OwnershipStats{.budget = owners->budget(), .owned = 0, .unowned = owners->unowned()};
    for (std::uint32_t n = 0; n < owners->nodes(); ++n) {
      result.ownership->owned += owners->OwnedBy(n);
    }
  }
  const PolicyInputs inputs{.placement = placement ? &*placement : nullptr,
                            .owners = owners ? &*owners : nullptr};

  // One pass per policy, the heaviest first so the threads finish together.
  std::vector<Policy> passes = runs;
  const auto weight = [](Policy p) {
    return p == Policy::kPrescient || p == Policy::kBelady || p == Policy::kLru ? 0
           : p == Policy::kNopfs                                                ? 1
                                                                                : 2;
  };
  std::stable_sort(passes.begin(), passes.end(),
                   [&](Policy a, Policy b) { return weight(a) < weight(b); });
  std::vector<PolicyResult> outputs(passes.size());
  std::atomic<std::size_t> next_pass{0};
  std::atomic<std::uint64_t> steps_done{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto worker = [&] {
    for (std::size_t i; (i = next_pass.fetch_add(1)) < passes.size();) {
      try {
        outputs[i] = Replay(passes[i], view, first_steps, next_use, options, inputs, steps_done);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        failure = std::current_exception();
      }
    }
  };
  const unsigned threads =
      std::clamp<unsigned>(options.threads, 1, static_cast<unsigned>(passes.size()));
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
  const std::uint64_t total = first_steps.back() * passes.size();
  while (options.progress && next_pass.load() < passes.size() + threads) {
    options.progress(
        total == 0 ? 1 : static_cast<double>(steps_done.load()) / static_cast<double>(total));
    if (steps_done.load() >= total) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  if (options.progress) options.progress(1);

  std::vector<PolicyResult> results;  // in the order asked for
  for (const Policy p : runs) {
    for (PolicyResult& r : outputs) {
      if (r.policy == p) results.push_back(std::move(r));
    }
  }
  for (const PolicyResult& r : results) {
    if (r.policy == Policy::kBelady) result.bounds.belady = r.total.storage;
  }
  if (!belady_asked) {
    results.erase(std::remove_if(results.begin(), results.end(),
                                 [](const PolicyResult& r) { return r.policy == Policy::kBelady; }),
                  results.end());
  }
  result.policies = std::move(results);
  return result;
}

}  // namespace prescient::scheduler::simulate
