// prescient-plan-bench: times the planner's phases and the simulator on an
// in-memory schedule, without the schedule file (scheduler/bench/README in
// RESULTS.md). The end-to-end numbers come from prescient-schedule itself
// (run_imagenet_bench.sh); this one says where the time goes.
//
//   prescient-plan-bench SAMPLES EPOCHS RANKS RANKS_PER_NODE BATCH PLAN_SPEC [--simulate]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "scheduler/plan/epoch_order.h"
#include "scheduler/plan/epoch_shape.h"
#include "scheduler/plan/orders.h"
#include "scheduler/plan/planner.h"
#include "scheduler/simulate/report.h"
#include "scheduler/simulate/simulator.h"

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int Run(int argc, char** argv) {
  using namespace prescient::scheduler;
  if (argc < 7) {
    std::fprintf(stderr,
                 "usage: %s SAMPLES EPOCHS RANKS RANKS_PER_NODE BATCH PLAN_SPEC [--simulate]\n",
                 argv[0]);
    return 2;
  }
  const std::uint64_t n = std::strtoull(argv[1], nullptr, 10);
  const auto epochs = static_cast<std::uint32_t>(std::strtoul(argv[2], nullptr, 10));
  WorldLayout layout;
  layout.ranks = static_cast<std::uint32_t>(std::strtoul(argv[3], nullptr, 10));
  layout.ranks_per_node = static_cast<std::uint32_t>(std::strtoul(argv[4], nullptr, 10));
  layout.batch_size = static_cast<std::uint32_t>(std::strtoul(argv[5], nullptr, 10));
  const plan::PlanOptions options = plan::ParsePlanOptions(argv[6]);
  const bool simulate = argc > 7 && std::string(argv[7]) == "--simulate";
  const std::uint64_t seed = 1;

  if (options.epoch_order) {
    const plan::EpochShape shape = plan::ShapeFor(n, layout, options.drop_last);
    const std::uint64_t buffer =
        std::min<std::uint64_t>(options.cache.SamplesFor(n) * layout.nodes(), shape.length);
    auto start = Clock::now();
    const plan::EpochCostMatrix cost = plan::BuildEpochCostMatrix(
        n, epochs, buffer, [&](std::uint32_t e, std::vector<SampleId>& out) {
          plan::GlobalEpochSequence(n, shape, seed, e, out);
        });
    std::printf("epoch cost matrix (%u epochs, buffer %llu): %.2f s\n", epochs,
                static_cast<unsigned long long>(buffer), Since(start));
    std::vector<std::uint32_t> identity(epochs);
    for (std::uint32_t e = 0; e < epochs; ++e) identity[e] = e;
    start = Clock::now();
    const auto heuristic = plan::SolveEpochOrderHeuristic(cost);
    std::printf("heuristic (nn+2opt+oropt): %.2f s, cost %llu (identity order %llu)\n",
                Since(start), static_cast<unsigned long long>(plan::PathCost(cost, heuristic)),
                static_cast<unsigned long long>(plan::PathCost(cost, identity)));
    if (epochs <= plan::kExactEpochLimit) {
      start = Clock::now();
      const auto exact = plan::SolveEpochOrderExact(cost);
      std::printf("exact (held-karp): %.2f s, cost %llu\n", Since(start),
                  static_cast<unsigned long long>(plan::PathCost(cost, exact)));
    }
  }
  auto start = Clock::now();
  const plan::PlanResult result = plan::PlanWithReport(n, layout, epochs, seed, options, {});
  std::printf("PlanWithReport(%s): %.2f s\n", plan::CanonicalPlanOptions(options).c_str(),
              Since(start));
  std::printf(
      "epoch order %s: cost %llu -> %llu; remap: predicted hits %llu, displaced %llu, "
      "max rank batch %u, min rank batch %u, max read spread %u\n",
      result.epoch_order.solver.c_str(),
      static_cast<unsigned long long>(result.epoch_order.identity_cost),
      static_cast<unsigned long long>(result.epoch_order.optimised_cost),
      static_cast<unsigned long long>(result.remap.predicted_hits),
      static_cast<unsigned long long>(result.remap.displaced_hits), result.remap.max_rank_batch,
      result.remap.min_rank_batch, result.remap.max_storage_spread);
  if (simulate) {
    simulate::SimulateOptions sim;
    sim.cache_samples = options.cache.SamplesFor(n);
    start = Clock::now();
    const simulate::SimulationResult r = simulate::Simulate(plan::ViewOf(result.schedule), sim);
    std::printf("Simulate (all policies): %.2f s\n", Since(start));
    simulate::PrintTable(r, std::cout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prescient-plan-bench: %s\n", e.what());
    return 1;
  }
}
