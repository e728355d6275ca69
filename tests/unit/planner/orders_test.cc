#include <gtest/gtest.h>

#include <set>
#include <unordered_set>

#include "scheduler/plan/planner.h"
#include "tests/unit/planner/plan_test_util.h"

namespace prescient::scheduler::plan {
namespace {

WorldLayout Layout(std::uint32_t ranks, std::uint32_t rpn, std::uint32_t batch) {
  return WorldLayout{.ranks = ranks, .ranks_per_node = rpn, .workers = 0, .batch_size = batch};
}

AccessSchedule PlanSpec(std::uint64_t n, const WorldLayout& layout, std::uint32_t epochs,
                        const char* spec, std::uint64_t seed = 42) {
  return Plan(n, layout, epochs, seed, ParsePlanOptions(spec), {});
}

// Fraction of rank r's samples in epoch e + 1 that it also read in epoch e,
// averaged over ranks and epochs.
double KeptFraction(const AccessSchedule& s) {
  double sum = 0;
  int count = 0;
  for (std::uint32_t e = 0; e + 1 < s.epochs(); ++e) {
    for (std::uint32_t r = 0; r < s.layout().ranks; ++r) {
      const auto& a = s.Part(r, e).samples;
      const std::unordered_set<SampleId> before(a.begin(), a.end());
      std::size_t kept = 0;
      for (const SampleId x : s.Part(r, e + 1).samples) kept += before.count(x);
      sum += static_cast<double>(kept) / static_cast<double>(a.size());
      ++count;
    }
  }
  return sum / count;
}

void ExpectEveryEpochExactlyOnce(const AccessSchedule& s) {
  for (std::uint32_t e = 0; e < s.epochs(); ++e) {
    EXPECT_EQ(EpochMultiset(s, e), Iota(s.num_samples())) << "epoch " << e;
  }
}

void ExpectEqualSteps(const AccessSchedule& s) {
  for (std::uint32_t e = 0; e < s.epochs(); ++e) {
    for (std::uint32_t r = 0; r < s.layout().ranks; ++r) {
      const RankEpoch& p = s.Part(r, e);
      EXPECT_EQ(p.steps(), s.Part(0, e).steps());
      EXPECT_EQ(p.step_begin.back(), p.samples.size());
    }
  }
}

TEST(Orders, EveryOrderReadsEverySampleOncePerEpoch) {
  for (const char* spec : {"order=global", "order=local", "order=partial:0.3", "order=groups:16",
                           "order=global,sort=on"}) {
    SCOPED_TRACE(spec);
    const AccessSchedule s = PlanSpec(960, Layout(8, 4, 10), 4, spec);
    ExpectEveryEpochExactlyOnce(s);
    ExpectEqualSteps(s);
    EXPECT_EQ(s.Part(3, 2).steps(), 12u);
  }
}

TEST(Orders, PaddingRepeatsAsDistributedSamplerDoes) {
  for (const char* spec : {"order=global", "order=local", "order=partial:0.5", "order=groups:8"}) {
    SCOPED_TRACE(spec);
    const AccessSchedule s = PlanSpec(103, Layout(4, 2, 5), 3, spec);
    ExpectEqualSteps(s);
    for (std::uint32_t e = 0; e < 3; ++e) {
      const auto all = EpochMultiset(s, e);
      ASSERT_EQ(all.size(), 104u);  // ceil(103 / 4) * 4
      const std::set<SampleId> distinct(all.begin(), all.end());
      EXPECT_EQ(distinct.size(), 103u);
      EXPECT_EQ(s.Part(0, e).samples.size(), 26u);
      EXPECT_EQ(s.Part(0, e).steps(), 6u);  // 5 x 5 + 1
    }
  }
}

TEST(Orders, DropLastReadsOnlyWholeGlobalBatches) {
  const AccessSchedule s = PlanSpec(103, Layout(4, 2, 5), 3, "order=global,drop-last=on");
  for (std::uint32_t e = 0; e < 3; ++e) {
    const auto all = EpochMultiset(s, e);
    EXPECT_EQ(all.size(), 100u);
    EXPECT_EQ(std::set<SampleId>(all.begin(), all.end()).size(), 100u);
    EXPECT_EQ(s.Part(1, e).steps(), 5u);
  }
  EXPECT_THROW(PlanSpec(10, Layout(4, 2, 5), 1, "drop-last=on"), std::invalid_argument);
}

TEST(Orders, LocalKeepsEachRankOnItsPartition) {
  const AccessSchedule s = PlanSpec(1000, Layout(4, 2, 25), 3, "order=local");
  for (std::uint32_t r = 0; r < 4; ++r) {
    for (std::uint32_t e = 0; e < 3; ++e) {
      for (const SampleId x : s.Part(r, e).samples) {
        EXPECT_GE(x, r * 250u);
        EXPECT_LT(x, (r + 1) * 250u);
      }
    }
    EXPECT_NE(s.Part(r, 0).samples, s.Part(r, 1).samples);  // reshuffled every epoch
  }
}

TEST(Orders, PartialZeroIsLocalAndOneBehavesAsGlobal) {
  const WorldLayout layout = Layout(8, 4, 25);
  const AccessSchedule local = PlanSpec(4000, layout, 4, "order=local", 7);
  const AccessSchedule q0 = PlanSpec(4000, layout, 4, "order=partial:0", 7);
  for (std::uint32_t e = 0; e < 4; ++e) {
    for (std::uint32_t r = 0; r < 8; ++r) {
      EXPECT_EQ(q0.Part(r, e).samples, local.Part(r, e).samples);
    }
  }
  // What a rank keeps from one epoch to the next: all of it (local), a 1/R
  // share (global, and partial:1), (1 - Q) + Q / R for partial:Q.
  const double global = KeptFraction(PlanSpec(4000, layout, 4, "order=global", 7));
  const double q1 = KeptFraction(PlanSpec(4000, layout, 4, "order=partial:1", 7));
  const double q3 = KeptFraction(PlanSpec(4000, layout, 4, "order=partial:0.3", 7));
  EXPECT_DOUBLE_EQ(KeptFraction(local), 1.0);
  EXPECT_NEAR(global, 1.0 / 8, 0.02);
  EXPECT_NEAR(q1, 1.0 / 8, 0.02);
  EXPECT_NEAR(q3, 0.7 + 0.3 / 8, 0.02);
  // partial:1 is a fresh uniform split every epoch, not a fixed partition.
  const AccessSchedule one = PlanSpec(4000, layout, 1, "order=partial:1", 7);
  std::size_t in_home = 0;
  for (const SampleId x : one.Part(0, 0).samples) in_home += x < 500;
  EXPECT_LT(in_home, 120u);  // ~ 500 / 8 expected
}

TEST(Orders, PartialKeepsEveryRankCountFixed) {
  const AccessSchedule s = PlanSpec(1001, Layout(7, 7, 11), 5, "order=partial:0.37");
  ExpectEveryEpochExactlyOnce(s);
  for (std::uint32_t e = 0; e < 5; ++e) {
    for (std::uint32_t r = 0; r < 7; ++r) EXPECT_EQ(s.Part(r, e).samples.size(), 143u);
  }
}

TEST(Orders, GroupsKeepContiguousGroupsTogether) {
  const std::uint64_t b = 32;
  const AccessSchedule s = PlanSpec(4096, Layout(4, 2, 16), 3, "order=groups:32");
  for (std::uint32_t e = 0; e < 3; ++e) {
    for (std::uint32_t r = 0; r < 4; ++r) {
      const auto& samples = s.Part(r, e).samples;
      std::set<std::uint64_t> groups;
      for (const SampleId x : samples) groups.insert(x / b);
      EXPECT_EQ(groups.size(), samples.size() / b);  // 1024 / 32 whole groups
      // Inside the rank's list, each group's samples are consecutive (one buffer).
      for (std::size_t i = 0; i < samples.size(); i += b) {
        for (std::size_t k = 1; k < b; ++k) EXPECT_EQ(samples[i + k] / b, samples[i] / b);
      }
      EXPECT_NE(samples[0] + 1, samples[1]);  // shuffled inside the buffer (w.h.p.)
    }
  }
  EXPECT_NE(s.Part(0, 0).samples, s.Part(0, 1).samples);
}

TEST(Orders, SeedDeterminesTheOrder) {
  const WorldLayout layout = Layout(4, 2, 8);
  for (const char* spec : {"order=global", "order=local", "order=partial:0.5", "order=groups:4"}) {
    const AccessSchedule a = PlanSpec(500, layout, 2, spec, 1);
    const AccessSchedule b = PlanSpec(500, layout, 2, spec, 1);
    const AccessSchedule c = PlanSpec(500, layout, 2, spec, 2);
    EXPECT_EQ(a.Part(1, 1).samples, b.Part(1, 1).samples) << spec;
    EXPECT_NE(a.Part(1, 1).samples, c.Part(1, 1).samples) << spec;
  }
}

TEST(Orders, SortOrdersEachStepByFilePosition) {
  const AccessSchedule plain = PlanSpec(600, Layout(3, 3, 20), 2, "order=global");
  const AccessSchedule sorted = PlanSpec(600, Layout(3, 3, 20), 2, "order=global,sort=on");
  for (std::uint32_t r = 0; r < 3; ++r) {
    for (std::size_t step = 0; step < sorted.Part(r, 1).steps(); ++step) {
      const auto got = sorted.Part(r, 1).Step(step);
      EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
      std::vector<SampleId> want(plain.Part(r, 1).Step(step).begin(),
                                 plain.Part(r, 1).Step(step).end());
      std::sort(want.begin(), want.end());
      EXPECT_EQ(std::vector<SampleId>(got.begin(), got.end()), want);
    }
  }
}

TEST(Orders, SolarSwitchesNeedAGlobalOrder) {
  EXPECT_THROW(PlanSpec(100, Layout(2, 1, 5), 2, "order=local,remap=on"), std::invalid_argument);
  EXPECT_THROW(PlanSpec(100, Layout(2, 1, 5), 2, "balance=on"), std::invalid_argument);
  EXPECT_THROW(PlanSpec(100, Layout(0, 1, 5), 2, ""), std::invalid_argument);
}

}  // namespace
}  // namespace prescient::scheduler::plan
