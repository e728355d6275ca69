#include <gtest/gtest.h>

#include <list>
#include <unordered_map>

#include "scheduler/plan/plan_rng.h"
#include "scheduler/simulate/node_caches.h"
#include "scheduler/simulate/sample_slots.h"

namespace prescient::scheduler::simulate {
namespace {

class SampleSlotsTest : public testing::TestWithParam<std::uint64_t> {};

// Universe 2,000: 8 x 500 = 4,000 >= 2,000 gives the dense array; a 100-entry
// map over the same universe is hashed.
TEST_P(SampleSlotsTest, AgreesWithUnorderedMapUnderChurn) {
  const std::uint64_t limit = GetParam();
  SampleSlots map(limit, 2000);
  std::unordered_map<SampleId, std::uint32_t> want;
  plan::PlanRng rng(5);
  for (int i = 0; i < 200000; ++i) {
    const auto s = static_cast<SampleId>(rng.Below(2000));
    std::uint32_t* got = map.Find(s);
    ASSERT_EQ(got != nullptr, want.count(s) == 1) << i;
    if (got != nullptr) {
      ASSERT_EQ(*got, want[s]);
      if (rng.Below(2) == 0) {
        map.Erase(s);
        want.erase(s);
      } else {
        *got = static_cast<std::uint32_t>(i);
        want[s] = static_cast<std::uint32_t>(i);
      }
    } else if (want.size() < limit) {
      map.Insert(s, static_cast<std::uint32_t>(i));
      want[s] = static_cast<std::uint32_t>(i);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DenseAndHashed, SampleSlotsTest, testing::Values(500, 100));

TEST(LruCache, AgreesWithAListLru) {
  for (const std::uint64_t capacity : {0, 1, 7, 64}) {
    LruCache cache(capacity, 1000);
    std::list<SampleId> order;  // front = most recent
    plan::PlanRng rng(capacity + 1);
    for (int i = 0; i < 20000; ++i) {
      const auto s = static_cast<SampleId>(rng.Below(100));
      auto it = std::find(order.begin(), order.end(), s);
      const bool want_hit = it != order.end();
      if (want_hit) order.erase(it);
      if (capacity > 0) {
        order.push_front(s);
        if (order.size() > capacity) order.pop_back();
      }
      ASSERT_EQ(cache.Read(s), want_hit) << "capacity " << capacity << " read " << i;
    }
  }
}

TEST(LruCache, OnceFullAdmitsOneMissInEveryAdmitEvery) {
  // A cyclic scan of 100 samples through a cache of 40: plain LRU evicts each
  // sample just before its next read; admitting one miss in eight keeps most
  // of what was taken first.
  for (const std::uint32_t admit_every : {1u, 8u}) {
    LruCache cache(40, 100, admit_every);
    int hits = 0;
    for (int pass = 0; pass < 5; ++pass) {
      for (SampleId s = 0; s < 100; ++s) hits += cache.Read(s) ? 1 : 0;
    }
    if (admit_every == 1) {
      EXPECT_EQ(hits, 0);
    } else {
      EXPECT_GT(hits, 4 * 25);
    }
  }
}

TEST(BeladyCache, EvictsTheFurthestAndBypassesLaterNeeds) {
  BeladyCache cache(2, 100, 50);
  SampleId victim;
  EXPECT_TRUE(cache.Admit(1, 10, &victim));
  EXPECT_TRUE(cache.Admit(2, 20, &victim));
  EXPECT_EQ(victim, BeladyCache::kNoVictim);
  EXPECT_FALSE(cache.Admit(3, 30, &victim));  // needed after both: not admitted
  EXPECT_FALSE(cache.Admit(4, kNoNextUse, &victim));
  EXPECT_TRUE(cache.Admit(5, 15, &victim));  // 2 (step 20) goes
  EXPECT_EQ(victim, 2u);
  EXPECT_TRUE(cache.Hit(1, kNoNextUse));  // 1 is never needed again: first to go
  EXPECT_TRUE(cache.Admit(6, 40, &victim));
  EXPECT_EQ(victim, 1u);
  EXPECT_FALSE(cache.Hit(2, 3));
  EXPECT_TRUE(cache.Hit(5, 16));
  EXPECT_TRUE(cache.Hit(6, 41));
}

}  // namespace
}  // namespace prescient::scheduler::simulate
