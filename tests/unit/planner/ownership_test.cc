#include "scheduler/plan/ownership.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "scheduler/plan/planner.h"

namespace prescient::scheduler::plan {
namespace {

WorldLayout Layout(std::uint32_t ranks, std::uint32_t rpn, std::uint32_t batch) {
  return WorldLayout{.ranks = ranks, .ranks_per_node = rpn, .workers = 0, .batch_size = batch};
}

// Two nodes of one rank, two epochs of one step; sample 6 is never read.
// Node 0 reads 0 once and 1, 2, 3 only it; node 1 reads 0 twice and 4, 5.
AccessSchedule Handmade() {
  AccessSchedule s(7, Layout(2, 1, 2), 2);
  const auto set = [&](std::uint32_t r, std::uint32_t e, std::vector<SampleId> v) {
    s.Part(r, e).samples = v;
    s.Part(r, e).step_begin = {0, 2};
  };
  set(0, 0, {0, 1});
  set(0, 1, {2, 3});
  set(1, 0, {0, 4});
  set(1, 1, {0, 5});
  return s;
}

// Random permutations every epoch (the planner's unplanned global order).
AccessSchedule RandomOrder(std::uint64_t samples, std::uint32_t nodes, std::uint32_t epochs) {
  return Plan(samples, Layout(2 * nodes, 2, 10), epochs, 7, ParsePlanOptions(""), {});
}

// Checks what every assignment must satisfy, and returns the samples read.
std::uint64_t ExpectConsistent(const AccessSchedule& s, const SampleOwners& owners) {
  std::vector<bool> read(s.num_samples(), false);
  for (std::uint32_t e = 0; e < s.epochs(); ++e) {
    for (std::uint32_t r = 0; r < s.layout().ranks; ++r) {
      for (const SampleId x : s.Part(r, e).samples) read[x] = true;
    }
  }
  std::vector<std::uint64_t> owned(owners.nodes(), 0);
  std::uint64_t read_count = 0, with_owner = 0;
  for (SampleId x = 0; x < s.num_samples(); ++x) {
    const std::uint32_t owner = owners.Owner(x);
    read_count += read[x] ? 1 : 0;
    if (!read[x]) {
      EXPECT_EQ(owner, SampleOwners::kNoOwner) << "sample " << x << " is never read";
      continue;
    }
    if (owner == SampleOwners::kNoOwner) continue;
    EXPECT_LT(owner, owners.nodes());
    ++owned[owner];
    ++with_owner;
  }
  for (std::uint32_t n = 0; n < owners.nodes(); ++n) {
    EXPECT_EQ(owners.OwnedBy(n), owned[n]) << "node " << n;
    EXPECT_LE(owned[n], owners.budget()) << "node " << n;
  }
  EXPECT_EQ(with_owner + owners.unowned(), read_count);
  return read_count;
}

TEST(Ownership, HeldBudgetIsAnEvenShareCappedByTheCacheLessItsTransitShare) {
  EXPECT_EQ(HeldBudget(800, 1000, 4), 250u);  // the even share
  EXPECT_EQ(HeldBudget(80, 1000, 4), 70u);    // 80 - 80 / 8
  EXPECT_EQ(HeldBudget(1000, 10, 3), 4u);     // ceil(10 / 3)
  EXPECT_EQ(HeldBudget(7, 1000, 4), 7u);      // 7 / 8 = 0: no transit share
  EXPECT_EQ(HeldBudget(0, 1000, 4), 0u);
  EXPECT_EQ(HeldBudget(100, 1000, 0), 0u);
}

TEST(Ownership, TheMostFrequentReaderOwnsASample) {
  const AccessSchedule s = Handmade();
  const SampleOwners owners = AssignOwners(ViewOf(s), 100);
  EXPECT_EQ(ExpectConsistent(s, owners), 6u);
  EXPECT_EQ(owners.budget(), HeldBudget(100, 6, 2));
  EXPECT_EQ(owners.budget(), 3u);  // min(100 - 12, ceil(6 / 2))
  EXPECT_EQ(owners.Owner(0), 1u);  // node 1 reads it twice, node 0 once
  for (const SampleId x : {1u, 2u, 3u}) EXPECT_EQ(owners.Owner(x), 0u) << x;
  for (const SampleId x : {4u, 5u}) EXPECT_EQ(owners.Owner(x), 1u) << x;
  EXPECT_EQ(owners.Owner(6), SampleOwners::kNoOwner);  // never read
  EXPECT_EQ(owners.unowned(), 0u);
}

TEST(Ownership, AFullNodeOverflowsToOneWithRoomThenSamplesGoUnowned) {
  const AccessSchedule s = Handmade();
  // Budget min(2 - 0, 3) = 2: node 0 alone reads three samples, so one of
  // them overflows to node 1 (which owns 0), and the aggregate budget of 4
  // leaves two of the six samples read without owner.
  const SampleOwners owners = AssignOwners(ViewOf(s), 2);
  ExpectConsistent(s, owners);
  EXPECT_EQ(owners.budget(), 2u);
  EXPECT_EQ(owners.OwnedBy(0), 2u);
  EXPECT_EQ(owners.OwnedBy(1), 2u);
  EXPECT_EQ(owners.unowned(), 2u);
  EXPECT_EQ(owners.Owner(0), 1u);
  EXPECT_EQ(owners.Owner(6), SampleOwners::kNoOwner);
}

TEST(Ownership, NoCacheNoOwners) {
  const AccessSchedule s = Handmade();
  const SampleOwners owners = AssignOwners(ViewOf(s), 0);
  ExpectConsistent(s, owners);
  EXPECT_EQ(owners.budget(), 0u);
  EXPECT_EQ(owners.unowned(), 6u);
  for (SampleId x = 0; x < 7; ++x) EXPECT_EQ(owners.Owner(x), SampleOwners::kNoOwner);
}

TEST(Ownership, BalancedAndCompleteWhenTheAggregateCoversTheDataset) {
  const AccessSchedule s = RandomOrder(4006, 4, 3);
  const std::uint64_t cache = 1600;  // 40% per node
  const SampleOwners owners = AssignOwners(ViewOf(s), cache);
  const std::uint64_t read = ExpectConsistent(s, owners);
  EXPECT_EQ(read, 4006u);
  EXPECT_EQ(owners.budget(), HeldBudget(cache, read, 4));
  EXPECT_EQ(owners.budget(), 1002u);  // ceil(4006 / 4), under 1600 - 200
  EXPECT_EQ(owners.unowned(), 0u);
  std::uint64_t least = ~std::uint64_t{0}, most = 0;
  for (std::uint32_t n = 0; n < 4; ++n) {
    least = std::min(least, owners.OwnedBy(n));
    most = std::max(most, owners.OwnedBy(n));
  }
  EXPECT_LE(most - least, 3u);
}

TEST(Ownership, UnownedSamplesWhenTheAggregateBudgetIsTooSmall) {
  const AccessSchedule s = RandomOrder(4000, 4, 3);
  const SampleOwners owners = AssignOwners(ViewOf(s), 400);  // 10% per node
  EXPECT_EQ(owners.budget(), HeldBudget(400, ExpectConsistent(s, owners), 4));
  EXPECT_EQ(owners.budget(), 350u);  // 400 - 400 / 8
  for (std::uint32_t n = 0; n < 4; ++n) EXPECT_EQ(owners.OwnedBy(n), 350u) << n;
  EXPECT_EQ(owners.unowned(), 4000u - 4 * 350);
}

TEST(Ownership, Deterministic) {
  const AccessSchedule s = RandomOrder(3000, 4, 2);
  const SampleOwners a = AssignOwners(ViewOf(s), 500);
  const SampleOwners b = AssignOwners(ViewOf(s), 500);
  ASSERT_EQ(a.num_samples(), b.num_samples());
  for (SampleId x = 0; x < a.num_samples(); ++x) ASSERT_EQ(a.Owner(x), b.Owner(x)) << x;
  EXPECT_EQ(a.unowned(), b.unowned());
}

}  // namespace
}  // namespace prescient::scheduler::plan
