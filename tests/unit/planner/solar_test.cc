// SOLAR's passes on a global order: invariants and that they do their job.
#include <gtest/gtest.h>

#include <unordered_map>

#include "scheduler/plan/epoch_order.h"
#include "scheduler/plan/epoch_shape.h"
#include "scheduler/plan/orders.h"
#include "scheduler/plan/planner.h"
#include "tests/unit/planner/plan_test_util.h"

namespace prescient::scheduler::plan {
namespace {

const WorldLayout kLayout{.ranks = 8, .ranks_per_node = 4, .workers = 0, .batch_size = 10};

// Fraction of reads (after epoch 0) on the node that read the sample last time.
double SameNodeFraction(const AccessSchedule& s) {
  std::unordered_map<SampleId, std::uint32_t> last_node;
  std::uint64_t same = 0, total = 0;
  for (std::uint32_t e = 0; e < s.epochs(); ++e) {
    for (std::size_t step = 0; step < s.Part(0, e).steps(); ++step) {
      for (std::uint32_t r = 0; r < s.layout().ranks; ++r) {
        for (const SampleId x : s.Part(r, e).Step(step)) {
          const std::uint32_t node = s.layout().NodeOf(r);
          if (e > 0) {
            same += last_node[x] == node;
            ++total;
          }
          last_node[x] = node;
        }
      }
    }
  }
  return static_cast<double>(same) / static_cast<double>(total);
}

TEST(Solar, OptimisedScheduleKeepsTheRandomOrdersGlobalBatches) {
  const std::uint64_t n = 2003;
  for (const char* spec : {"solar=on,cache=20%", "solar=on,cache=20%,balance-cap=1",
                           "remap=on,cache=40%", "solar=on,cache=5%,drop-last=on"}) {
    SCOPED_TRACE(spec);
    const PlanOptions options = ParsePlanOptions(spec);
    const PlanResult result = PlanWithReport(n, kLayout, 6, 11, options, {});
    const EpochShape shape = ShapeFor(n, kLayout, options.drop_last);
    std::vector<SampleId> random;
    for (std::uint32_t e = 0; e < 6; ++e) {
      GlobalEpochSequence(n, shape, 11, result.epoch_order.order[e], random);
      ASSERT_EQ(result.schedule.Part(0, e).steps(), shape.steps);
      for (std::size_t step = 0; step < shape.steps; ++step) {
        std::vector<SampleId> want(
            random.begin() + static_cast<std::ptrdiff_t>(shape.StepBegin(step)),
            random.begin() + static_cast<std::ptrdiff_t>(shape.StepBegin(step + 1)));
        std::sort(want.begin(), want.end());
        ASSERT_EQ(GlobalBatch(result.schedule, e, step), want) << "epoch " << e << " step " << step;
      }
    }
  }
}

TEST(Solar, RemapKeepsSamplesOnTheirNode) {
  const AccessSchedule plain = Plan(4000, kLayout, 5, 3, ParsePlanOptions("cache=50%"), {});
  const PlanResult remapped =
      PlanWithReport(4000, kLayout, 5, 3, ParsePlanOptions("remap=on,cache=50%"), {});
  EXPECT_NEAR(SameNodeFraction(plain), 0.5, 0.05);
  EXPECT_GT(SameNodeFraction(remapped.schedule), 0.85);
  EXPECT_GT(remapped.remap.predicted_hits, 4000u * 3);
  // Without balance every rank reads exactly the nominal batch.
  for (std::uint32_t r = 0; r < 8; ++r) {
    const RankEpoch& p = remapped.schedule.Part(r, 2);
    for (std::size_t s = 0; s < p.steps(); ++s) EXPECT_EQ(p.Step(s).size(), 10u);
  }
}

TEST(Solar, BalanceEvensStorageReadsWithinCap) {
  // A small cache makes hits uneven across nodes; balance evens the reads.
  const PlanResult unbalanced =
      PlanWithReport(4000, kLayout, 4, 5, ParsePlanOptions("remap=on,cache=15%"), {});
  const PlanResult balanced = PlanWithReport(
      4000, kLayout, 4, 5, ParsePlanOptions("remap=on,balance=on,balance-cap=1.3,cache=15%"), {});
  EXPECT_GT(unbalanced.remap.max_storage_spread, 1u);
  EXPECT_LE(balanced.remap.max_storage_spread, 1u);
  EXPECT_LE(balanced.remap.max_rank_batch, 13u);
  bool varied = false;
  for (std::uint32_t e = 0; e < 4; ++e) {
    EXPECT_EQ(EpochMultiset(balanced.schedule, e), Iota(4000));
    for (std::uint32_t r = 0; r < 8; ++r) {
      const RankEpoch& p = balanced.schedule.Part(r, e);
      EXPECT_EQ(p.steps(), 50u);
      for (std::size_t s = 0; s < p.steps(); ++s) {
        EXPECT_LE(p.Step(s).size(), 13u);
        varied |= p.Step(s).size() != 10;
      }
    }
  }
  EXPECT_TRUE(varied);
}

TEST(Solar, BalanceNeverLeavesARankWithoutABatch) {
  // One rank per node, one sample each, everything cached after epoch 0: most
  // steps are all hits and some node holds none of the step's samples.
  const WorldLayout layout{.ranks = 4, .ranks_per_node = 1, .workers = 0, .batch_size = 1};
  const PlanResult r =
      PlanWithReport(64, layout, 6, 2, ParsePlanOptions("remap=on,balance=on,cache=100%"), {});
  EXPECT_EQ(r.remap.min_rank_batch, 1u);
  EXPECT_LE(r.remap.max_rank_batch, 1u);  // cap 1.25 x 1
  for (std::uint32_t e = 0; e < 6; ++e) EXPECT_EQ(EpochMultiset(r.schedule, e), Iota(64));
  const PlanResult wider = PlanWithReport(
      400, WorldLayout{.ranks = 8, .ranks_per_node = 2, .workers = 0, .batch_size = 2}, 6, 2,
      ParsePlanOptions("remap=on,balance=on,balance-cap=3,cache=100%"), {});
  EXPECT_GE(wider.remap.min_rank_batch, 1u);
  for (std::uint32_t e = 0; e < 6; ++e) EXPECT_EQ(EpochMultiset(wider.schedule, e), Iota(400));
}

TEST(Solar, EpochOrderLowersTheCost) {
  const PlanResult exact =
      PlanWithReport(3000, kLayout, 8, 9, ParsePlanOptions("epoch-order=on,cache=10%"), {});
  EXPECT_TRUE(exact.epoch_order.exact);
  EXPECT_EQ(exact.epoch_order.solver, "held-karp");
  EXPECT_EQ(exact.epoch_order.buffer_samples, 600u);  // 10% x 2 nodes
  EXPECT_LT(exact.epoch_order.optimised_cost, exact.epoch_order.identity_cost);
  const PlanResult heuristic =
      PlanWithReport(3000, kLayout, 20, 9, ParsePlanOptions("epoch-order=on,cache=10%"), {});
  EXPECT_FALSE(heuristic.epoch_order.exact);
  EXPECT_LT(heuristic.epoch_order.optimised_cost, heuristic.epoch_order.identity_cost);
  for (std::uint32_t e = 0; e < 20; ++e)
    EXPECT_EQ(EpochMultiset(heuristic.schedule, e), Iota(3000));
}

TEST(Solar, ProgressIsMonotoneAndReachesOne) {
  std::vector<double> seen;
  Plan(1000, kLayout, 4, 1, ParsePlanOptions("solar=on,cache=10%"),
       [&](double f) { seen.push_back(f); });
  ASSERT_FALSE(seen.empty());
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_DOUBLE_EQ(seen.back(), 1.0);
}

}  // namespace
}  // namespace prescient::scheduler::plan
