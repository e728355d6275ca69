// Loader orders: DistributedSampler / DataLoader semantics on vectors recorded
// from torch 2.6, and lazy per-(rank, epoch) generation equal to the whole.
#include "scheduler/core/loader_orders.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace prescient::scheduler {
namespace {

WorldLayout Layout(std::uint32_t ranks, std::uint32_t batch, std::uint32_t workers = 0) {
  WorldLayout l;
  l.ranks = ranks;
  l.ranks_per_node = 1;
  l.batch_size = batch;
  l.workers = workers;
  return l;
}

TEST(LoaderOrdersTest, DistributedSamplerVector) {
  // DistributedSampler(range(50), num_replicas=2, rank=1, seed=11).set_epoch(2)
  LoaderSpec spec;
  spec.seed = 11;
  const RankEpoch part = GenerateLoaderRankEpoch(spec, 50, Layout(2, 4), 1, 2);
  EXPECT_EQ(part.samples, (std::vector<SampleId>{24, 5,  16, 39, 2,  20, 1,  41, 25, 47, 21, 15, 7,
                                                 3,  33, 48, 19, 14, 46, 45, 6,  13, 27, 11, 9}));
  EXPECT_EQ(part.steps(), 7u);  // 25 samples in batches of 4, last one short
  EXPECT_EQ(part.Step(6).size(), 1u);
}

TEST(LoaderOrdersTest, DistributedSamplerPaddingAndDropLast) {
  // n=1003, R=4, rank 3, seed 7, epoch 3: 251 samples padded, 250 dropped.
  LoaderSpec spec;
  spec.seed = 7;
  const RankEpoch padded = GenerateLoaderRankEpoch(spec, 1003, Layout(4, 1000), 3, 3);
  ASSERT_EQ(padded.samples.size(), 251u);
  EXPECT_EQ(std::vector<SampleId>(padded.samples.begin(), padded.samples.begin() + 5),
            (std::vector<SampleId>{570, 623, 648, 260, 945}));
  EXPECT_EQ(std::vector<SampleId>(padded.samples.end() - 5, padded.samples.end()),
            (std::vector<SampleId>{495, 215, 45, 506, 273}));
  spec.drop_last = true;
  const RankEpoch dropped = GenerateLoaderRankEpoch(spec, 1003, Layout(4, 1000), 3, 3);
  ASSERT_EQ(dropped.samples.size(), 250u);
  EXPECT_EQ(std::vector<SampleId>(dropped.samples.end() - 5, dropped.samples.end()),
            (std::vector<SampleId>{360, 495, 215, 45, 506}));
}

TEST(LoaderOrdersTest, PaddingRepeatsTheOrderCyclically) {
  // 3 samples on 8 ranks: the padded list is the order repeated.
  LoaderSpec spec;
  spec.shuffle = false;
  const AccessSchedule s = GenerateLoaderSchedule(spec, 3, Layout(8, 1), 1);
  for (std::uint32_t r = 0; r < 8; ++r) {
    ASSERT_EQ(s.Part(r, 0).samples.size(), 1u);
    EXPECT_EQ(s.Part(r, 0).samples[0], r % 3);
  }
}

TEST(LoaderOrdersTest, TorchLoaderVector) {
  // DataLoader(range(10), batch_size=3, shuffle=True, generator=manual_seed(5)),
  // two epochs, no workers.
  LoaderSpec spec;
  spec.source = LoaderSource::kTorchLoader;
  spec.seed = 5;
  const AccessSchedule s = GenerateLoaderSchedule(spec, 10, Layout(1, 3), 2);
  EXPECT_EQ(s.Part(0, 0).samples, (std::vector<SampleId>{7, 4, 8, 1, 2, 3, 6, 5, 9, 0}));
  EXPECT_EQ(s.Part(0, 1).samples, (std::vector<SampleId>{2, 1, 6, 3, 5, 9, 4, 7, 8, 0}));
  EXPECT_EQ(s.Part(0, 0).steps(), 4u);
}

TEST(LoaderOrdersTest, PersistentWorkersSkipTheBaseSeedAfterEpochZero) {
  LoaderSpec spec;
  spec.source = LoaderSource::kTorchLoader;
  spec.seed = 5;
  const AccessSchedule plain = GenerateLoaderSchedule(spec, 10, Layout(1, 3, 2), 2);
  spec.persistent_workers = true;
  const AccessSchedule persistent = GenerateLoaderSchedule(spec, 10, Layout(1, 3, 2), 2);
  EXPECT_EQ(plain.Part(0, 0).samples, persistent.Part(0, 0).samples);
  EXPECT_NE(plain.Part(0, 1).samples, persistent.Part(0, 1).samples);
}

TEST(LoaderOrdersTest, DropLastBatchRemovesTheShortStep) {
  LoaderSpec spec;
  spec.drop_last_batch = true;
  const RankEpoch part = GenerateLoaderRankEpoch(spec, 50, Layout(2, 4), 0, 0);
  EXPECT_EQ(part.steps(), 6u);
  EXPECT_EQ(part.samples.size(), 24u);
  EXPECT_EQ(StepsPerEpoch(spec, 50, Layout(2, 4)), 6u);
}

TEST(LoaderOrdersTest, LazyRankEpochEqualsWholeScheduleForEverySource) {
  for (LoaderSource source :
       {LoaderSource::kTorchDistributed, LoaderSource::kTorchLoader, LoaderSource::kNumpy,
        LoaderSource::kNumpyLegacy, LoaderSource::kSequential}) {
    for (bool reseed : {false, true}) {
      LoaderSpec spec;
      spec.source = source;
      spec.seed = 17;
      spec.shuffle = source != LoaderSource::kSequential;
      const bool numpy = source == LoaderSource::kNumpy || source == LoaderSource::kNumpyLegacy;
      if (reseed && !numpy) continue;
      spec.reseed_each_epoch = reseed;
      const std::uint32_t ranks = source == LoaderSource::kTorchLoader ? 1 : 3;
      const AccessSchedule whole = GenerateLoaderSchedule(spec, 101, Layout(ranks, 7), 4);
      for (std::uint32_t e = 0; e < 4; ++e) {
        for (std::uint32_t r = 0; r < ranks; ++r) {
          const RankEpoch lazy = GenerateLoaderRankEpoch(spec, 101, Layout(ranks, 7), r, e);
          EXPECT_EQ(lazy.samples, whole.Part(r, e).samples) << LoaderSourceName(source) << e;
          EXPECT_EQ(lazy.step_begin, whole.Part(r, e).step_begin);
        }
      }
    }
  }
}

TEST(LoaderOrdersTest, EveryEpochCoversTheDataset) {
  LoaderSpec spec;
  spec.source = LoaderSource::kNumpy;
  spec.seed = 2;
  const AccessSchedule s = GenerateLoaderSchedule(spec, 1000, Layout(4, 16), 3);
  for (std::uint32_t e = 0; e < 3; ++e) {
    std::vector<int> seen(1000, 0);
    for (std::uint32_t r = 0; r < 4; ++r) {
      for (SampleId id : s.Part(r, e).samples) ++seen[id];
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  }
  // Consecutive epochs differ (one generator, not reseeded).
  EXPECT_NE(s.Part(0, 0).samples, s.Part(0, 1).samples);
}

TEST(LoaderSpecTest, CanonicalStringRoundTrips) {
  LoaderSpec spec;
  spec.source = LoaderSource::kTorchLoader;
  spec.seed = 123456789012345ULL;
  spec.drop_last_batch = true;
  spec.persistent_workers = true;
  const std::string text = CanonicalLoaderParameters(spec);
  EXPECT_EQ(text,
            "seed=123456789012345,shuffle=1,drop_last=0,drop_last_batch=1,persistent_workers=1,"
            "reseed_each_epoch=0");
  EXPECT_EQ(ParseLoaderSpec("torch-loader", text), spec);
}

TEST(LoaderSpecTest, RejectsBadInput) {
  EXPECT_THROW(ParseLoaderSpec("torch", ""), std::invalid_argument);
  EXPECT_THROW(ParseLoaderSpec("numpy", "seed=-1"), std::invalid_argument);
  EXPECT_THROW(ParseLoaderSpec("numpy", "colour=red"), std::invalid_argument);
  EXPECT_THROW(ParseLoaderSpec("numpy", "shuffle=maybe"), std::invalid_argument);
  LoaderSpec loader;
  loader.source = LoaderSource::kTorchLoader;
  EXPECT_THROW(ValidateLoaderSpec(loader, 10, Layout(2, 1)), std::invalid_argument);
  loader.persistent_workers = true;
  EXPECT_THROW(ValidateLoaderSpec(loader, 10, Layout(1, 1, 0)), std::invalid_argument);
  LoaderSpec legacy;
  legacy.source = LoaderSource::kNumpyLegacy;
  legacy.seed = 1ULL << 32;
  EXPECT_THROW(ValidateLoaderSpec(legacy, 10, Layout(1, 1)), std::invalid_argument);
  EXPECT_THROW(ValidateLoaderSpec(LoaderSpec{}, 0, Layout(1, 1)), std::invalid_argument);
}

}  // namespace
}  // namespace prescient::scheduler
