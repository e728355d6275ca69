#include "scheduler/plan/epoch_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "scheduler/plan/plan_rng.h"

namespace prescient::scheduler::plan {
namespace {

// N(u, v) straight from the definition, with sets.
std::uint64_t BruteCost(const std::vector<SampleId>& u, const std::vector<SampleId>& v,
                        std::size_t buffer) {
  const std::size_t tail_from = u.size() > buffer ? u.size() - buffer : 0;
  const std::set<SampleId> tail(u.begin() + static_cast<std::ptrdiff_t>(tail_from), u.end());
  const std::set<SampleId> head(
      v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(buffer, v.size())));
  std::uint64_t missing = 0;
  for (const SampleId s : head) missing += tail.count(s) == 0;
  return missing;
}

std::vector<std::vector<SampleId>> RandomEpochs(std::uint64_t n, std::uint32_t epochs,
                                                std::size_t length, std::uint64_t seed) {
  std::vector<std::vector<SampleId>> out(epochs);
  PlanRng rng(seed);
  for (auto& seq : out) {
    seq.resize(n);
    std::iota(seq.begin(), seq.end(), SampleId{0});
    rng.Shuffle(std::span<SampleId>(seq));
    for (std::size_t i = 0; seq.size() < length; ++i) seq.push_back(seq[i]);  // padding
    seq.resize(length);                                                       // or drop
  }
  return out;
}

TEST(EpochCostMatrix, MatchesTheDefinitionForEveryMethod) {
  const std::uint64_t n = 200;
  for (const std::size_t length : {200, 203, 150}) {                  // exact, padded, dropped
    for (const std::size_t buffer : {0, 1, 37, 99, 120, 190, 250}) {  // both methods
      SCOPED_TRACE(testing::Message() << "length " << length << " buffer " << buffer);
      const auto epochs = RandomEpochs(n, 7, length, length * 1000 + buffer);
      const EpochCostMatrix cost = BuildEpochCostMatrix(
          n, 7, buffer, [&](std::uint32_t e, std::vector<SampleId>& out) { out = epochs[e]; });
      for (std::uint32_t u = 0; u < 7; ++u) {
        for (std::uint32_t v = 0; v < 7; ++v) {
          if (u != v) {
            EXPECT_EQ(cost(u, v), BruteCost(epochs[u], epochs[v], buffer)) << u << v;
          }
        }
      }
    }
  }
}

EpochCostMatrix RandomMatrix(std::uint32_t epochs, std::uint64_t seed) {
  EpochCostMatrix m(epochs);
  PlanRng rng(seed);
  for (std::uint32_t u = 0; u < epochs; ++u) {
    for (std::uint32_t v = 0; v < epochs; ++v) m.at(u, v) = u == v ? 0 : 50 + rng.Below(1000);
  }
  return m;
}

std::uint64_t BruteForceOptimum(const EpochCostMatrix& m) {
  std::vector<std::uint32_t> p(m.epochs());
  std::iota(p.begin(), p.end(), 0u);
  std::uint64_t best = ~std::uint64_t{0};
  do {
    best = std::min(best, PathCost(m, p));
  } while (std::next_permutation(p.begin(), p.end()));
  return best;
}

bool IsPermutation(std::vector<std::uint32_t> p, std::uint32_t n) {
  std::sort(p.begin(), p.end());
  for (std::uint32_t i = 0; i < n; ++i) {
    if (p.size() != n || p[i] != i) return false;
  }
  return true;
}

TEST(EpochOrderSolvers, HeldKarpFindsTheOptimum) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const EpochCostMatrix m = RandomMatrix(7, seed);
    const auto order = SolveEpochOrderExact(m);
    ASSERT_TRUE(IsPermutation(order, 7));
    EXPECT_EQ(PathCost(m, order), BruteForceOptimum(m));
  }
  EXPECT_THROW(SolveEpochOrderExact(RandomMatrix(kExactEpochLimit + 1, 1)), std::invalid_argument);
}

TEST(EpochOrderSolvers, HeuristicIsValidAndCloseToTheOptimum) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const EpochCostMatrix m = RandomMatrix(8, seed);
    const auto order = SolveEpochOrderHeuristic(m);
    ASSERT_TRUE(IsPermutation(order, 8));
    const std::uint64_t optimum = BruteForceOptimum(m);
    EXPECT_GE(PathCost(m, order), optimum);
    EXPECT_LE(PathCost(m, order), optimum * 11 / 10);  // within 10% on these
    std::vector<std::uint32_t> identity(8);
    std::iota(identity.begin(), identity.end(), 0u);
    EXPECT_LE(PathCost(m, order), PathCost(m, identity));
  }
}

TEST(EpochOrderSolvers, HeuristicFindsAHiddenFreePath) {
  // A zero-cost path through 40 epochs in a scrambled order; every other edge costs.
  const std::uint32_t n = 40;
  std::vector<std::uint32_t> hidden(n);
  std::iota(hidden.begin(), hidden.end(), 0u);
  PlanRng rng(99);
  rng.Shuffle(std::span<std::uint32_t>(hidden));
  EpochCostMatrix m = RandomMatrix(n, 3);
  for (std::uint32_t i = 0; i + 1 < n; ++i) m.at(hidden[i], hidden[i + 1]) = 0;
  const auto order = SolveEpochOrderHeuristic(m);
  EXPECT_TRUE(IsPermutation(order, n));
  EXPECT_EQ(PathCost(m, order), 0u);
}

}  // namespace
}  // namespace prescient::scheduler::plan
