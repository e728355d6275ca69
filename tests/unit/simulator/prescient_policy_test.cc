// The `prescient` policy: owners from plan/ownership.h, held from their first
// load, plus a Belady cache of the rest of each node's capacity for samples
// the node does not own (the node agent's policy, vol/agent).
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "scheduler/plan/ownership.h"
#include "scheduler/plan/planner.h"
#include "scheduler/simulate/policies.h"
#include "scheduler/simulate/simulator.h"

namespace prescient::scheduler::simulate {
namespace {

using plan::ViewOf;

WorldLayout Layout(std::uint32_t ranks, std::uint32_t rpn, std::uint32_t batch) {
  return WorldLayout{.ranks = ranks, .ranks_per_node = rpn, .workers = 0, .batch_size = batch};
}

SimulationResult SimulateWith(const AccessSchedule& s, std::uint64_t cache,
                              std::vector<Policy> policies) {
  SimulateOptions o;
  o.cache_samples = cache;
  o.policies = std::move(policies);
  return Simulate(ViewOf(s), o);
}

const PolicyResult& Find(const SimulationResult& r, Policy p) {
  for (const PolicyResult& x : r.policies) {
    if (x.policy == p) return x;
  }
  throw std::logic_error("policy not simulated");
}

// 4 nodes of 2 ranks, random permutations every epoch.
AccessSchedule RandomOrder(std::uint64_t samples, std::uint32_t epochs) {
  return plan::Plan(samples, Layout(8, 2, 10), epochs, 11, plan::ParsePlanOptions(""), {});
}

TEST(PrescientPolicy, ReadsEachSampleOnceWhenTheAggregateCacheCoversTheDataset) {
  const AccessSchedule s = RandomOrder(4000, 3);
  const SimulationResult r =
      SimulateWith(s, 1600, {Policy::kPrescient, Policy::kNopfs});  // 40% per node
  const PolicyResult& p = Find(r, Policy::kPrescient);
  EXPECT_EQ(r.bounds.compulsory_global, 4000u);
  EXPECT_EQ(p.total.reads, 12000u);
  EXPECT_EQ(p.total.storage + p.total.hits + p.total.remote, p.total.reads);
  EXPECT_EQ(p.total.storage, r.bounds.compulsory_global);
  EXPECT_EQ(p.epochs[0].counts.storage, 4000u);  // every sample's first load, then none
  EXPECT_GT(p.total.remote, 0u);
  EXPECT_LE(p.total.storage, Find(r, Policy::kNopfs).total.storage);
  ASSERT_TRUE(r.ownership.has_value());
  EXPECT_EQ(r.ownership->budget, 1000u);
  EXPECT_EQ(r.ownership->owned, 4000u);
  EXPECT_EQ(r.ownership->unowned, 0u);
}

TEST(PrescientPolicy, ATinyCacheReadsMoreThanOncePerSample) {
  const AccessSchedule s = RandomOrder(4000, 3);
  const SimulationResult r = SimulateWith(s, 40, {Policy::kPrescient});  // 1% per node
  const PolicyResult& p = Find(r, Policy::kPrescient);
  EXPECT_GT(p.total.storage, r.bounds.compulsory_global);
  ASSERT_TRUE(r.ownership.has_value());
  EXPECT_EQ(r.ownership->budget, 35u);  // 40 - 40 / 8
  EXPECT_EQ(r.ownership->owned, 4 * 35u);
  EXPECT_EQ(r.ownership->unowned, 4000u - 4 * 35);
}

TEST(PrescientPolicy, NoCacheIsNoCache) {
  const AccessSchedule s = RandomOrder(1000, 2);
  const SimulationResult r = SimulateWith(s, 0, {Policy::kPrescient});
  const PolicyResult& p = Find(r, Policy::kPrescient);
  EXPECT_EQ(p.total.storage, p.total.reads);
}

// Two nodes of one rank, four epochs of one step of two samples:
//   node 0: {3, 0} {0, 1} {0, 2} {1, 2}   reads 0 x3, 1 x2, 2 x2, 3 x1
//   node 1: {2, 3} {3, 2} {3, 2} {3, 0}   reads 3 x4, 2 x3, 0 x1
// Cache 3 per node: budget min(3, ceil(4 / 2)) = 2, owners 0, 1 -> node 0 and
// 2, 3 -> node 1, and a Belady part of one sample per node.
TEST(PrescientPolicy, HandCheckedTwoNodes) {
  AccessSchedule s(4, Layout(2, 1, 2), 4);
  const std::vector<std::vector<SampleId>> node0 = {{3, 0}, {0, 1}, {0, 2}, {1, 2}};
  const std::vector<std::vector<SampleId>> node1 = {{2, 3}, {3, 2}, {3, 2}, {3, 0}};
  for (std::uint32_t e = 0; e < 4; ++e) {
    s.Part(0, e).samples = node0[e];
    s.Part(0, e).step_begin = {0, 2};
    s.Part(1, e).samples = node1[e];
    s.Part(1, e).step_begin = {0, 2};
  }
  const plan::SampleOwners owners = plan::AssignOwners(ViewOf(s), 3);
  ASSERT_EQ(owners.Owner(0), 0u);
  ASSERT_EQ(owners.Owner(1), 0u);
  ASSERT_EQ(owners.Owner(2), 1u);
  ASSERT_EQ(owners.Owner(3), 1u);

  const SimulationResult r = SimulateWith(s, 3, {Policy::kPrescient, Policy::kBelady});
  const PolicyResult& p = Find(r, Policy::kPrescient);
  // Step 0: node 0 asks for 3 first: node 1 loads it from storage (not kept
  //         by node 0, which never reads it again); node 0 loads 0; node 1
  //         loads 2 and hits 3.
  // Step 1: node 0 hits 0 and loads 1; node 1 hits 3 and 2.
  // Step 2: node 0 hits 0 and fetches 2 from node 1 (kept in its Belady part:
  //         read again next step); node 1 hits 3 and 2.
  // Step 3: node 0 hits 1 and 2 (Belady part); node 1 hits 3, fetches 0.
  const std::vector<Counts> expected = {
      {.reads = 4, .storage = 3, .hits = 1, .remote = 0},
      {.reads = 4, .storage = 1, .hits = 3, .remote = 0},
      {.reads = 4, .storage = 0, .hits = 3, .remote = 1},
      {.reads = 4, .storage = 0, .hits = 3, .remote = 1},
  };
  ASSERT_EQ(p.steps.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "step " << i);
    EXPECT_EQ(p.steps[i].counts.reads, expected[i].reads);
    EXPECT_EQ(p.steps[i].counts.storage, expected[i].storage);
    EXPECT_EQ(p.steps[i].counts.hits, expected[i].hits);
    EXPECT_EQ(p.steps[i].counts.remote, expected[i].remote);
  }
  EXPECT_EQ(p.total.storage, 4u);
  EXPECT_EQ(p.total.hits, 10u);
  EXPECT_EQ(p.total.remote, 2u);
  EXPECT_EQ(r.bounds.compulsory_global, 4u);
  // Node-local Belady with three slots reads each node's distinct samples
  // (node 0's 3 is never read again there, so it takes no slot).
  EXPECT_EQ(r.bounds.compulsory_node, 7u);
  EXPECT_EQ(Find(r, Policy::kBelady).total.storage, 7u);
}

TEST(PrescientPolicy, NeedsOwners) {
  const AccessSchedule s = RandomOrder(100, 1);
  EXPECT_THROW(MakePolicyModel(Policy::kPrescient, ViewOf(s), 10, nullptr, nullptr),
               std::invalid_argument);
  const plan::SampleOwners other = plan::AssignOwners(ViewOf(RandomOrder(200, 1)), 10);
  EXPECT_THROW(MakePolicyModel(Policy::kPrescient, ViewOf(s), 10, nullptr, &other),
               std::invalid_argument);
}

}  // namespace
}  // namespace prescient::scheduler::simulate
