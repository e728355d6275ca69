// Plan(): drives the orders, the epoch-order search and the remap pass
// (planner.h). Only the schedule itself is materialised (4 bytes per read);
// the global orders are regenerated from their seeds when needed, so the
// working set beyond the output is a few arrays of num_samples entries.
#include "scheduler/plan/planner.h"

#include <algorithm>
#include <future>
#include <optional>
#include <stdexcept>

#include "scheduler/plan/epoch_order.h"
#include "scheduler/plan/epoch_shape.h"
#include "scheduler/plan/orders.h"
#include "scheduler/plan/remap.h"

namespace prescient::scheduler::plan {
namespace {

void Validate(const PlanOptions& options) {
  if (options.order != Order::kGlobal &&
      (options.epoch_order || options.remap || options.balance)) {
    throw std::invalid_argument(
        "plan options 'epoch-order', 'remap' and 'balance' work on a fully random order: use "
        "order=global (or switch them off)");
  }
  if (options.balance && !options.remap) {
    throw std::invalid_argument(
        "plan option 'balance' moves samples between ranks: it needs remap=on");
  }
  if (options.balance_cap < 1)
    throw std::invalid_argument("plan option 'balance-cap' must be >= 1");
}

void Report(const std::function<void(double)>& progress, double fraction) {
  if (progress) progress(std::clamp(fraction, 0.0, 1.0));
}

// Phase 1 (order=global): which random epoch runs as epoch i.
EpochOrderReport ChooseEpochOrder(std::uint64_t n, const WorldLayout& layout, std::uint32_t epochs,
                                  std::uint64_t seed, const PlanOptions& options,
                                  const EpochShape& shape) {
  EpochOrderReport report;
  report.order.resize(epochs);
  for (std::uint32_t i = 0; i < epochs; ++i) report.order[i] = i;
  report.solver = "none";
  const std::uint64_t cache = options.cache.SamplesFor(n);
  if (!options.epoch_order || epochs < 2 || cache == 0) return report;
  report.buffer_samples = std::min<std::uint64_t>(cache * layout.nodes(), shape.length);
  const EpochCostMatrix cost = BuildEpochCostMatrix(
      n, epochs, report.buffer_samples, [&](std::uint32_t e, std::vector<SampleId>& out) {
        GlobalEpochSequence(n, shape, seed, e, out);
      });
  report.identity_cost = PathCost(cost, report.order);
  if (epochs <= kExactEpochLimit) {
    report.order = SolveEpochOrderExact(cost);
    report.exact = true;
    report.solver = "held-karp";
  } else {
    report.order = SolveEpochOrderHeuristic(cost);
    report.solver = "nn+2opt+oropt";
  }
  report.optimised_cost = PathCost(cost, report.order);
  return report;
}

void AppendStep(RankEpoch& part, std::span<const SampleId> samples, bool sort) {
  const std::size_t at = part.samples.size();
  part.samples.insert(part.samples.end(), samples.begin(), samples.end());
  if (sort) std::sort(part.samples.begin() + static_cast<std::ptrdiff_t>(at), part.samples.end());
  part.step_begin.push_back(part.samples.size());
}

void SortSteps(RankEpoch& part) {
  for (std::size_t s = 0; s < part.steps(); ++s) {
    std::sort(part.samples.begin() + static_cast<std::ptrdiff_t>(part.step_begin[s]),
              part.samples.begin() + static_cast<std::ptrdiff_t>(part.step_begin[s + 1]));
  }
}

// What the remap pass needs of epoch k besides its sequence: every position's
// next use (global step), which needs epoch k + 1's sequence. Computed on a
// second thread one epoch ahead of the remap pass.
struct Lookahead {
  std::vector<SampleId> next_sequence;  // epoch k + 1 (empty for the last epoch)
  std::vector<std::uint32_t> next_use;  // per position of epoch k
};

void ComputeLookahead(std::uint64_t n, const EpochShape& shape, std::uint64_t seed,
                      const std::vector<std::uint32_t>& order, std::uint32_t k,
                      const std::vector<SampleId>& sequence, std::vector<std::uint32_t>& step_in,
                      Lookahead& out) {
  const auto steps = static_cast<std::uint32_t>(shape.steps);
  const std::uint32_t base = k * steps;
  const bool last = k + 1 == order.size();
  if (!last) {
    GlobalEpochSequence(n, shape, seed, order[k + 1], out.next_sequence);
    step_in.assign(n, kNeverUsed);
    for (std::size_t p = out.next_sequence.size(); p-- > 0;) {
      step_in[out.next_sequence[p]] =
          base + steps + static_cast<std::uint32_t>(p / shape.global_batch);
    }
  }
  out.next_use.resize(sequence.size());
  for (std::uint64_t p = 0; p < sequence.size(); ++p) {
    // Padding repeats position p at p + n (orders.cc), inside this epoch.
    const std::uint64_t step = p / shape.global_batch;
    if (p + n < shape.length && (p + n) / shape.global_batch > step) {
      out.next_use[p] = base + static_cast<std::uint32_t>((p + n) / shape.global_batch);
    } else if (last) {
      out.next_use[p] = kNeverUsed;
    } else {
      const std::uint32_t in_next = step_in[sequence[p]];
      out.next_use[p] = in_next != kNeverUsed ? in_next : base + 2 * steps;  // dropped: a guess
    }
  }
}

// Phase 2 (order=global): cut every epoch into global batches and split them
// over the ranks, through the remap planner when remap is on. With remap, a
// second thread prepares the next epoch (sequence, next uses) and sorts the
// previous one while this thread remaps the current one.
void PlanGlobal(std::uint64_t n, const WorldLayout& layout, std::uint32_t epochs,
                std::uint64_t seed, const PlanOptions& options, const EpochShape& shape,
                PlanResult& result, const std::function<void(double)>& progress,
                double progress_from) {
  const std::vector<std::uint32_t>& order = result.epoch_order.order;
  const auto steps = static_cast<std::uint32_t>(shape.steps);
  if (static_cast<std::uint64_t>(steps) * (epochs + 3) >= kNeverUsed) {
    throw std::invalid_argument("plan: too many steps in total for 32-bit step numbers");
  }
  const auto reserve = [&](std::uint32_t e) {
    for (std::uint32_t r = 0; r < layout.ranks; ++r) {
      RankEpoch& part = result.schedule.Part(r, e);
      part.samples.reserve(shape.per_rank + (options.balance ? shape.per_rank / 8 + 64 : 0));
      part.step_begin.reserve(shape.steps + 1);
    }
  };
  const auto report = [&](std::uint32_t e) {
    Report(progress, progress_from + (1 - progress_from) * (e + 1) / epochs);
  };
  std::vector<SampleId> current;
  GlobalEpochSequence(n, shape, seed, order[0], current);
  if (!options.remap) {
    for (std::uint32_t e = 0; e < epochs; ++e) {
      if (e > 0) GlobalEpochSequence(n, shape, seed, order[e], current);
      reserve(e);
      for (std::uint32_t s = 0; s < steps; ++s) {
        const std::uint64_t begin = shape.StepBegin(s), b = shape.RankBatch(s);
        for (std::uint32_t r = 0; r < layout.ranks; ++r) {
          AppendStep(result.schedule.Part(r, e),
                     std::span<const SampleId>(current.data() + begin + r * b, b), options.sort);
        }
      }
      report(e);
    }
    return;
  }

  RemapPlanner remap(n, layout, options.cache.SamplesFor(n), shape.steps, options.balance,
                     options.balance_cap);
  std::vector<std::uint32_t> step_in;
  Lookahead ready, pending;
  ComputeLookahead(n, shape, seed, order, 0, current, step_in, ready);
  std::vector<std::vector<SampleId>> split;
  for (std::uint32_t e = 0; e < epochs; ++e) {
    // The helper prepares epoch e + 1 and sorts epoch e - 1 (done by now).
    std::future<void> helper;
    if (e + 1 < epochs || (options.sort && e > 0)) {
      helper = std::async(std::launch::async, [&, e] {
        if (e + 1 < epochs) {
          ComputeLookahead(n, shape, seed, order, e + 1, ready.next_sequence, step_in, pending);
        }
        if (options.sort && e > 0) {
          for (std::uint32_t r = 0; r < layout.ranks; ++r)
            SortSteps(result.schedule.Part(r, e - 1));
        }
      });
    }
    reserve(e);
    for (std::uint32_t s = 0; s < steps; ++s) {
      const std::uint64_t begin = shape.StepBegin(s), end = shape.StepBegin(s + 1);
      remap.AssignStep(std::span<const SampleId>(current.data() + begin, end - begin),
                       std::span<const std::uint32_t>(ready.next_use.data() + begin, end - begin),
                       e * steps + s, split);
      for (std::uint32_t r = 0; r < layout.ranks; ++r) {
        AppendStep(result.schedule.Part(r, e), split[r], false);
      }
    }
    for (std::uint32_t r = 0; r < layout.ranks; ++r) {
      auto& samples = result.schedule.Part(r, e).samples;
      if (samples.capacity() > samples.size() + samples.size() / 16) samples.shrink_to_fit();
    }
    if (helper.valid()) helper.get();
    current.swap(ready.next_sequence);
    std::swap(ready, pending);
    report(e);
  }
  if (options.sort) {
    for (std::uint32_t r = 0; r < layout.ranks; ++r) SortSteps(result.schedule.Part(r, epochs - 1));
  }
  result.remap = remap.report();
}

void PlanPerRank(std::uint64_t n, const WorldLayout& layout, std::uint32_t epochs,
                 std::uint64_t seed, const PlanOptions& options, const EpochShape& shape,
                 PlanResult& result, const std::function<void(double)>& progress) {
  using Kind = RankOrderGenerator::Kind;
  const Kind kind = options.order == Order::kLocal     ? Kind::kLocal
                    : options.order == Order::kPartial ? Kind::kPartial
                                                       : Kind::kGroups;
  const double param =
      kind == Kind::kPartial ? options.partial_q : static_cast<double>(options.group_size);
  RankOrderGenerator generator(kind, param, n, shape, seed);
  std::vector<std::vector<SampleId>*> out(layout.ranks);
  for (std::uint32_t e = 0; e < epochs; ++e) {
    for (std::uint32_t r = 0; r < layout.ranks; ++r) out[r] = &result.schedule.Part(r, e).samples;
    generator.NextEpoch(e, out);
    for (std::uint32_t r = 0; r < layout.ranks; ++r) {
      RankEpoch& part = result.schedule.Part(r, e);
      FillUniformSteps(shape, part);
      if (options.sort) SortSteps(part);
    }
    Report(progress, static_cast<double>(e + 1) / epochs);
  }
}

}  // namespace

PlanResult PlanWithReport(std::uint64_t num_samples, const WorldLayout& layout,
                          std::uint32_t epochs, std::uint64_t seed, const PlanOptions& options,
                          const std::function<void(double fraction)>& progress) {
  Validate(options);
  const EpochShape shape = ShapeFor(num_samples, layout, options.drop_last);
  PlanResult result;
  result.schedule = AccessSchedule(num_samples, layout, epochs);
  Report(progress, 0);
  if (epochs == 0) return result;
  if (options.order != Order::kGlobal) {
    result.epoch_order.order.resize(epochs);
    for (std::uint32_t i = 0; i < epochs; ++i) result.epoch_order.order[i] = i;
    result.epoch_order.solver = "none";
    PlanPerRank(num_samples, layout, epochs, seed, options, shape, result, progress);
    return result;
  }
  result.epoch_order = ChooseEpochOrder(num_samples, layout, epochs, seed, options, shape);
  const double after_order = options.epoch_order ? 0.2 : 0.0;
  Report(progress, after_order);
  PlanGlobal(num_samples, layout, epochs, seed, options, shape, result, progress, after_order);
  return result;
}

AccessSchedule Plan(std::uint64_t num_samples, const WorldLayout& layout, std::uint32_t epochs,
                    std::uint64_t seed, const PlanOptions& options,
                    const std::function<void(double fraction)>& progress) {
  return std::move(PlanWithReport(num_samples, layout, epochs, seed, options, progress).schedule);
}

}  // namespace prescient::scheduler::plan
