#include "scheduler/plan/placement.h"

#include <gtest/gtest.h>

namespace prescient::scheduler::plan {
namespace {

// Two nodes of one rank, two epochs, steps of two samples.
AccessSchedule Handmade() {
  AccessSchedule s(8, WorldLayout{.ranks = 2, .ranks_per_node = 1, .workers = 0, .batch_size = 2},
                   2);
  const auto set = [&](std::uint32_t r, std::uint32_t e, std::vector<SampleId> v) {
    s.Part(r, e).samples = v;
    s.Part(r, e).step_begin = {0, 2, 4};
  };
  set(0, 0, {5, 1, 2, 3});
  set(0, 1, {1, 2, 4, 5});
  set(1, 0, {0, 6, 7, 1});
  set(1, 1, {0, 1, 7, 6});
  return s;
}

TEST(Placement, MostFrequentSamplesInFirstReadOrder) {
  const AccessSchedule s = Handmade();
  const StaticPlacement p = PlaceByFrequency(ViewOf(s), 3);
  // Node 0 reads 5,1,2 twice (first at steps 0,0,1) and 3,4 once; prefetch
  // order is first read, ties by id.
  EXPECT_EQ(p.CachedSamples(0), (std::vector<SampleId>{1, 5, 2}));
  // Node 1 reads 0,6,7,1 twice; ties by first read: 0,6 (step 0), 7,1 (step 1), then id.
  EXPECT_EQ(p.CachedSamples(1), (std::vector<SampleId>{0, 6, 1}));
  EXPECT_TRUE(p.CachedOn(0, 5));
  EXPECT_FALSE(p.CachedOn(0, 3));
  EXPECT_TRUE(p.CachedOn(1, 1));
  EXPECT_EQ(p.Owner(1), 0u);  // both read it twice: the lower node id
  EXPECT_EQ(p.Owner(6), 1u);
  EXPECT_EQ(p.Owner(3), StaticPlacement::kNoOwner);
  EXPECT_EQ(p.OwnerFirstStep(2), 1u);
  EXPECT_EQ(p.OwnerFirstStep(3), StaticPlacement::kNever);
}

TEST(Placement, CapacityBoundsAndZero) {
  const AccessSchedule s = Handmade();
  EXPECT_TRUE(PlaceByFrequency(ViewOf(s), 0).CachedSamples(0).empty());
  EXPECT_EQ(PlaceByFrequency(ViewOf(s), 100).CachedSamples(0).size(), 5u);  // only what it reads
}

}  // namespace
}  // namespace prescient::scheduler::plan
