// The position tracker against a real schedule file (DistributedSampler order,
// one rank, two DataLoader workers), fed the read streams a DataLoader makes.
#include "vol/schedule/position_tracker.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <random>

#include "scheduler/core/loader_spec.h"
#include "scheduler/core/schedule_file.h"
#include "vol/schedule/bound_fields.h"
#include "vol/schedule/rank_progress.h"
#include "vol/schedule/samples_of_rows.h"
#include "vol/schedule/schedule_oracle.h"

namespace prescient::vol {
namespace {

constexpr std::uint64_t kSamples = 200;
constexpr std::uint32_t kEpochs = 3;
constexpr std::uint32_t kBatch = 4;
constexpr std::uint32_t kWorkers = 2;

class PositionTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/tracker." + std::to_string(::getpid()) + ".sched";
    scheduler::ScheduleHeader header;
    header.map = scheduler::SampleMap({{"/x.h5", kSamples, 1000, 1}}, {{"x", 64}});
    header.source = "torch-distributed";
    scheduler::LoaderSpec spec;
    spec.seed = 7;
    header.parameters = scheduler::CanonicalLoaderParameters(spec);
    header.layout = {.ranks = 1, .ranks_per_node = 1, .workers = kWorkers, .batch_size = kBatch};
    header.epochs = kEpochs;
    header.num_samples = kSamples;
    header.seed = 7;
    scheduler::WriteRecipeFile(path_, header);
    binding_ = ScheduleBinding::Open(path_, 0, [](const std::string& m) { FAIL() << m; });
    ASSERT_NE(binding_, nullptr);
  }
  void TearDown() override { ::unlink(path_.c_str()); }

  // The samples worker `w` reads in `epoch`: batches w, w + W, ...
  std::vector<std::uint64_t> WorkerReads(std::uint32_t epoch, std::uint32_t w) const {
    const scheduler::RankEpochView part = binding_->Part(0, epoch);
    std::vector<std::uint64_t> reads;
    for (std::size_t step = w; step < part.steps(); step += kWorkers) {
      for (scheduler::SampleId s : part.Step(step)) reads.push_back(s);
    }
    return reads;
  }

  std::string path_;
  std::shared_ptr<ScheduleBinding> binding_;
};

TEST_F(PositionTrackerTest, FollowsAWorkerAcrossEpochs) {
  // A persistent worker 1: the same process reads its batches of every epoch.
  PositionTracker tracker(binding_);
  std::uint64_t last_step = 0;
  for (std::uint32_t epoch = 0; epoch < kEpochs; ++epoch) {
    for (std::uint64_t sample : WorkerReads(epoch, 1)) {
      const PositionTracker::Observation o = tracker.ObserveRead({&sample, 1}, 0);
      ASSERT_EQ(o.matched, 1u) << "epoch " << epoch << " sample " << sample;
      EXPECT_EQ(o.epoch, epoch);
      EXPECT_GE(o.global_step, last_step);
      last_step = o.global_step;
    }
  }
  EXPECT_EQ(last_step,
            binding_->total_steps() - 1);  // 50 steps an epoch; worker 1 has the odd ones
  EXPECT_FALSE(tracker.abandoned());
}

TEST_F(PositionTrackerTest, FreshWorkerIsPlacedThroughTheNodeStep) {
  // A worker forked for epoch 2 (non-persistent workers) starts with no
  // history; the node step says where the rank's other processes are.
  PositionTracker tracker(binding_);
  const std::uint64_t node_step = binding_->GlobalStep(2, 0);
  const std::vector<std::uint64_t> reads = WorkerReads(2, 0);
  const PositionTracker::Observation first = tracker.ObserveRead({&reads[0], 1}, node_step);
  ASSERT_EQ(first.matched, 1u);
  EXPECT_EQ(first.epoch, 2u);
  EXPECT_EQ(first.global_step, node_step);
}

// The header of an imported schedule (an explicit order) over the fixture's
// samples, rank and workers.
scheduler::ScheduleHeader ImportedHeader() {
  scheduler::ScheduleHeader header;
  header.map = scheduler::SampleMap({{"/x.h5", kSamples, 1000, 1}}, {{"x", 64}});
  header.source = "import";
  header.layout = {.ranks = 1, .ranks_per_node = 1, .workers = kWorkers, .batch_size = kBatch};
  header.epochs = kEpochs;
  header.num_samples = kSamples;
  return header;
}

// A followed schedule (PRESCIENT_FOLLOW) keeps finished epochs as empty steps
// and ends with the epoch that just started; a worker whose rank has no
// placement (not forked from the rank's process) is placed in that last epoch.
TEST(PositionTrackerFollowed, PlacesAReadWithNoPlacementInTheLastEpoch) {
  const std::string path =
      ::testing::TempDir() + "/followed." + std::to_string(::getpid()) + ".sched";
  const scheduler::ScheduleHeader header = ImportedHeader();
  scheduler::AccessSchedule schedule(kSamples, header.layout, kEpochs);
  for (std::uint32_t epoch = 0; epoch < kEpochs; ++epoch) {
    scheduler::RankEpoch& part = schedule.Part(0, epoch);
    for (std::uint64_t step = 0; step < kSamples / kBatch; ++step) {
      if (epoch + 1 == kEpochs) {  // only the last epoch has its samples, in reverse
        for (std::uint32_t i = 0; i < kBatch; ++i) {
          part.samples.push_back(
              static_cast<scheduler::SampleId>(kSamples - 1 - step * kBatch - i));
        }
      }
      part.step_begin.push_back(part.samples.size());
    }
  }
  scheduler::WriteScheduleFile(path, header, schedule);
  auto binding = ScheduleBinding::Open(path, 0, [](const std::string& m) { FAIL() << m; });
  ASSERT_NE(binding, nullptr);
  PositionTracker tracker(binding);
  const std::uint64_t sample = kSamples - 1 - 2 * kBatch;  // step 2 of the last epoch
  const PositionTracker::Observation o = tracker.ObserveRead({&sample, 1}, /*placement=*/0);
  ASSERT_EQ(o.matched, 1u);
  EXPECT_EQ(o.epoch, kEpochs - 1);
  EXPECT_EQ(o.global_step, binding->GlobalStep(kEpochs - 1, 2));
  ::unlink(path.c_str());
}

// Writes to `path` a schedule of one file of `rows` rows, a sample a row, for
// one rank without workers reading one index a step: kEpochs epochs, each a
// new shuffle of indices 0..indices-1, index i standing for the samples
// samples_of(i). Returns each epoch's order of indices.
template <typename SamplesOf>
std::vector<std::vector<std::uint32_t>> WriteShuffledIndexSchedule(const std::string& path,
                                                                   std::uint64_t rows,
                                                                   std::uint32_t indices,
                                                                   std::uint32_t seed,
                                                                   SamplesOf samples_of) {
  scheduler::ScheduleHeader header;
  header.map = scheduler::SampleMap({{"/x.h5", rows, 1000, 1}}, {{"x", 64}});
  header.source = "import";
  header.layout = {.ranks = 1, .ranks_per_node = 1, .workers = 0, .batch_size = 1};
  header.epochs = kEpochs;
  header.num_samples = rows;
  scheduler::AccessSchedule schedule(rows, header.layout, kEpochs);
  std::vector<std::vector<std::uint32_t>> orders;
  std::mt19937 random(seed);
  for (std::uint32_t epoch = 0; epoch < kEpochs; ++epoch) {
    std::vector<std::uint32_t> order(indices);
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), random);
    scheduler::RankEpoch& part = schedule.Part(0, epoch);
    for (std::uint32_t index : order) {
      for (std::uint64_t sample : samples_of(index))
        part.samples.push_back(static_cast<std::uint32_t>(sample));
      part.step_begin.push_back(part.samples.size());  // one index a step
    }
    orders.push_back(std::move(order));
  }
  scheduler::WriteScheduleFile(path, header, schedule);
  return orders;
}

// Samples that share rows: each index reads a time step and the next one
// (FourCastNet's input and target), so every row is listed twice in an epoch,
// at two unrelated places. Every read matches, not only a row's first use.
TEST(PositionTrackerRepeats, EveryUseOfARowListedTwiceMatches) {
  const std::string path =
      ::testing::TempDir() + "/repeats." + std::to_string(::getpid()) + ".sched";
  constexpr std::uint64_t kRows = 64;
  constexpr std::uint32_t kIndices = kRows - 1;
  const std::vector<std::vector<std::uint32_t>> orders = WriteShuffledIndexSchedule(
      path, kRows, kIndices, 3,
      [](std::uint32_t index) { return std::vector<std::uint64_t>{index, index + 1u}; });
  auto binding = ScheduleBinding::Open(path, 0, [](const std::string& m) { FAIL() << m; });
  ASSERT_NE(binding, nullptr);
  PositionTracker tracker(binding);
  std::uint64_t matched = 0, mismatched = 0;
  for (std::uint32_t epoch = 0; epoch < kEpochs; ++epoch) {
    for (std::uint32_t index : orders[epoch]) {
      for (std::uint64_t row : {std::uint64_t{index}, std::uint64_t{index} + 1}) {
        const PositionTracker::Observation o = tracker.ObserveRead({&row, 1}, 0);
        matched += o.matched;
        mismatched += o.mismatched;
      }
    }
  }
  EXPECT_EQ(mismatched, 0u);
  EXPECT_EQ(matched, 2ull * kIndices * kEpochs);
  EXPECT_FALSE(tracker.abandoned());
  ::unlink(path.c_str());
}

// Sliding windows over a time series, shuffled: index i reads rows
// [i * kStride, i * kStride + kWindow), each row a sample, so every row is
// listed at several positions of an epoch (once per window holding it). One
// read per index is placed at its own window, not at an earlier window that
// shares its first rows, and every sample of it matches.
TEST(PositionTrackerWindows, AReadOfAWindowIsPlacedAtItsOwnStep) {
  const std::string path =
      ::testing::TempDir() + "/windows." + std::to_string(::getpid()) + ".sched";
  constexpr std::uint64_t kRows = 96, kWindow = 8, kStride = 2;
  constexpr std::uint32_t kIndices = (kRows - kWindow) / kStride + 1;
  const std::vector<std::vector<std::uint32_t>> orders =
      WriteShuffledIndexSchedule(path, kRows, kIndices, 5, [](std::uint32_t index) {
        std::vector<std::uint64_t> window(kWindow);
        std::iota(window.begin(), window.end(), std::uint64_t{index} * kStride);
        return window;
      });
  auto binding = ScheduleBinding::Open(path, 0, [](const std::string& m) { FAIL() << m; });
  ASSERT_NE(binding, nullptr);

  // The list's lookup itself: the window of index k is found at k's step,
  // past the earlier windows that hold its first samples, and not at the
  // same rows listed across two neighbouring windows (nearer `near`). A run
  // must lie within [from, to).
  const scheduler::RankEpochView part = binding->Part(0, 0);
  const ScheduleBinding::EpochPositions positions(kRows, part);
  for (std::uint32_t step = 0; step < kIndices; ++step) {
    std::vector<std::uint64_t> window(kWindow);
    std::iota(window.begin(), window.end(), std::uint64_t{orders[0][step]} * kStride);
    const std::uint64_t at = step * kWindow;
    for (std::uint64_t near : {at, at + 1, at > 0 ? at - 1 : 0}) {
      EXPECT_EQ(positions.RunWithin(window, part, 0, part.size(), near), at) << near;
    }
    EXPECT_NE(positions.RunWithin(window, part, at + 1, part.size(), at), at);
    EXPECT_NE(positions.RunWithin(window, part, 0, at + kWindow - 1, at), at);
    EXPECT_EQ(positions.RunWithin(window, part, at, at + kWindow, 0), at);
    const std::optional<std::uint64_t> any = positions.RunWithin(window, part, 0, part.size(), 0);
    ASSERT_TRUE(any.has_value());
    EXPECT_TRUE(std::equal(window.begin(), window.end(), part.samples().begin() + *any));
  }
  std::vector<std::uint64_t> absent = {3, 2};  // listed in no window in that order
  EXPECT_EQ(positions.RunWithin(absent, part, 0, part.size(), 0), std::nullopt);

  PositionTracker tracker(binding);
  std::uint64_t matched = 0, mismatched = 0;
  for (std::uint32_t epoch = 0; epoch < kEpochs; ++epoch) {
    for (std::uint32_t step = 0; step < kIndices; ++step) {
      std::vector<std::uint64_t> window(kWindow);
      std::iota(window.begin(), window.end(), std::uint64_t{orders[epoch][step]} * kStride);
      const PositionTracker::Observation o = tracker.ObserveRead(window, 0);
      matched += o.matched;
      mismatched += o.mismatched;
      EXPECT_EQ(o.epoch, epoch);
      EXPECT_EQ(o.global_step, binding->GlobalStep(epoch, step)) << "epoch " << epoch;
    }
  }
  EXPECT_EQ(mismatched, 0u);
  EXPECT_EQ(matched, std::uint64_t{kWindow} * kIndices * kEpochs);
  EXPECT_FALSE(tracker.abandoned());
  ::unlink(path.c_str());
}

// DistributedSampler(shuffle=False) over a list shuffled once: every epoch
// reads the same order, so a fresh worker's first batch is found at the same
// place in every epoch, and the rank's placement decides between them.
TEST(PositionTrackerRepeatedOrder, AFreshWorkerIsPlacedInTheEpochNearestItsRank) {
  const std::string path =
      ::testing::TempDir() + "/repeated." + std::to_string(::getpid()) + ".sched";
  const scheduler::ScheduleHeader header = ImportedHeader();
  std::vector<std::uint32_t> order(kSamples);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), std::mt19937(5));
  scheduler::AccessSchedule schedule(kSamples, header.layout, kEpochs);
  for (std::uint32_t epoch = 0; epoch < kEpochs; ++epoch) {
    scheduler::RankEpoch& part = schedule.Part(0, epoch);
    for (std::uint64_t i = 0; i < kSamples; ++i) {
      part.samples.push_back(order[i]);
      if ((i + 1) % kBatch == 0) part.step_begin.push_back(i + 1);  // the end of a step
    }
  }
  scheduler::WriteScheduleFile(path, header, schedule);
  auto binding = ScheduleBinding::Open(path, 0, [](const std::string& m) { FAIL() << m; });
  ASSERT_NE(binding, nullptr);
  const std::uint64_t steps = kSamples / kBatch;
  const std::uint64_t batch[kBatch] = {order[0], order[1], order[2], order[3]};
  struct Case {
    std::uint64_t placement;
    std::uint32_t epoch;  // where the first batch belongs
  };
  for (const Case& c : {
           Case{binding->GlobalStep(1, 0), 1},          // the rank starts epoch 1
           Case{binding->GlobalStep(1, steps - 3), 2},  // its last batches not reported yet
           Case{binding->GlobalStep(2, 0), 2},
       }) {
    PositionTracker tracker(binding);
    const PositionTracker::Observation o = tracker.ObserveRead(batch, c.placement);
    EXPECT_EQ(o.matched, kBatch);
    EXPECT_EQ(o.epoch, c.epoch) << "placement " << c.placement;
    EXPECT_EQ(o.global_step, binding->GlobalStep(c.epoch, 0));
  }
  ::unlink(path.c_str());
}

TEST_F(PositionTrackerTest, ForeignOrderIsCountedThenAbandoned) {
  PositionTracker tracker(binding_);
  const std::vector<std::uint64_t> reads = WorkerReads(0, 0);
  ASSERT_EQ(tracker.ObserveRead({&reads[0], 1}, 0).matched, 1u);
  // Samples far from where this process is: late in epoch 0 and in epoch 1.
  const auto positions0 = binding_->PositionsOf(0);
  const auto positions1 = binding_->PositionsOf(1);
  std::vector<std::uint64_t> foreign;
  for (std::uint64_t s = 0; s < kSamples; ++s) {
    if (!positions0->Within(s, 0, 120) && !positions1->Within(s, 0, 120)) foreign.push_back(s);
  }
  ASSERT_FALSE(foreign.empty());
  std::uint32_t mismatches = 0;
  for (std::uint32_t i = 0; !tracker.abandoned() && i < 10 * PositionTracker::kMaxMismatches; ++i) {
    if (tracker.ObserveRead({&foreign[i % foreign.size()], 1}, 0).matched == 0) ++mismatches;
  }
  EXPECT_TRUE(tracker.abandoned());
  EXPECT_EQ(mismatches, PositionTracker::kMaxMismatches);
  EXPECT_EQ(tracker.ObserveRead({&reads[1], 1}, 0).matched, 0u);  // stays off
}

TEST_F(PositionTrackerTest, SortedBatchReadsMatchAsAWhole) {
  // DataLoader(batch_size=None, sampler=BatchSampler(...)) with d[sorted(batch)]:
  // a worker reads each of its batches in one read, rows sorted, not in list order.
  PositionTracker tracker(binding_);
  const scheduler::RankEpochView part = binding_->Part(0, 0);
  std::uint64_t matched = 0, mismatched = 0;
  for (std::uint32_t epoch = 0; epoch < kEpochs; ++epoch) {
    const scheduler::RankEpochView p = binding_->Part(0, epoch);
    for (std::size_t step = 0; step < p.steps(); step += kWorkers) {  // worker 0
      std::vector<std::uint64_t> batch(p.Step(step).begin(), p.Step(step).end());
      std::sort(batch.begin(), batch.end());
      const PositionTracker::Observation o = tracker.ObserveRead(batch, 0);
      matched += o.matched;
      mismatched += o.mismatched;
      EXPECT_EQ(o.global_step, binding_->GlobalStep(epoch, step));
      // Its label, read right after from another dataset: the same samples again.
      const PositionTracker::Observation label = tracker.ObserveRead(batch, 0);
      EXPECT_EQ(label.matched, batch.size());
    }
  }
  EXPECT_EQ(mismatched, 0u);
  EXPECT_EQ(matched, kEpochs * part.size() / 2);
}

TEST_F(PositionTrackerTest, SlicesOverSeveralStepsMatch) {
  // One process (no workers in the loop) reading two steps at a time.
  PositionTracker tracker(binding_);
  const scheduler::RankEpochView p = binding_->Part(0, 1);
  for (std::size_t step = 0; step + 1 < p.steps(); step += 2) {
    std::vector<std::uint64_t> rows(p.Step(step).begin(), p.Step(step).end());
    rows.insert(rows.end(), p.Step(step + 1).begin(), p.Step(step + 1).end());
    std::reverse(rows.begin(), rows.end());
    const PositionTracker::Observation o = tracker.ObserveRead(rows, binding_->GlobalStep(1, 0));
    EXPECT_EQ(o.mismatched, 0u);
    EXPECT_EQ(o.global_step, binding_->GlobalStep(1, step + 1));
  }
}

TEST_F(PositionTrackerTest, ARankThatHasNotReportedIsPlacedFromItsOwnStart) {
  // Another rank of the node has moved the node's step into epoch 1 while this
  // rank has reported nothing: its first worker is still in epoch 0, and is
  // placed there (the node's step would have put it an epoch ahead whenever
  // its first sample is also one of the rank's epoch-1 samples).
  cache::CacheOptions options;
  options.capacity_bytes = 4 << 20;
  options.name_prefix = "prescient-placement-test-" + std::to_string(::getpid());
  auto opened = cache::NodeCache::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  cache::NodeCache& node = *opened.value();
  RankProgress progress(node, *binding_);
  ASSERT_TRUE(node.ReportProgress(/*participant=*/1, binding_->GlobalStep(1, 5), ::getpid()).ok());
  ASSERT_GE(progress.Of(0), binding_->GlobalStep(1, 0));  // the node's step: epoch 1
  EXPECT_EQ(progress.PlacementOf(0), 0u);                 // the rank's own start

  // Every first read of the rank's epoch-0 workers lands in epoch 0.
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    PositionTracker tracker(binding_);
    const std::vector<std::uint64_t> reads = WorkerReads(0, w);
    const PositionTracker::Observation o =
        tracker.ObserveRead({&reads[0], 1}, progress.PlacementOf(0));
    ASSERT_EQ(o.matched, 1u);
    EXPECT_EQ(o.epoch, 0u) << "worker " << w;
  }
}

TEST_F(PositionTrackerTest, OracleAnswersFromTheNodeIndex) {
  cache::CacheOptions options;
  options.capacity_bytes = 4 << 20;
  options.name_prefix = "prescient-oracle-test-" + std::to_string(::getpid());
  auto opened = cache::NodeCache::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  cache::NodeCache& node = *opened.value();
  BoundFields bound;
  RankProgress progress(node, *binding_);
  std::atomic<std::uint64_t> failures{0};
  ScheduleOracle oracle(*binding_, bound, progress, failures, nullptr);
  ASSERT_TRUE(bound.Set(3, {.field = {0, 0}, .grouped = false}));
  ASSERT_TRUE(bound.Set(5, {.field = {0, 0}, .grouped = true}));

  const scheduler::RankEpochView epoch1 = binding_->Part(0, 1);
  const std::uint64_t sample = epoch1.sample(0);
  const std::uint64_t step = oracle.NextUse(3, sample, binding_->GlobalStep(0, 49));
  EXPECT_EQ(step, binding_->GlobalStep(1, 0));
  EXPECT_EQ(oracle.NextUse(4, sample, 0), cache::NextUseOracle::kNever);  // not bound
  EXPECT_EQ(oracle.NextUse(3, kSamples + 5, 0), cache::NextUseOracle::kNever);
  EXPECT_EQ(oracle.NextUse(3, sample, binding_->total_steps()), cache::NextUseOracle::kNever);
  EXPECT_EQ(oracle.NextUse(5, 7, 100), 101u);  // small rows: needed right away
  // A read at its step keys the row by its use after that read.
  const std::uint64_t read_step = binding_->GlobalStep(1, 0);
  ReadOracle read(*binding_, bound, progress, failures, nullptr, 0, read_step);
  EXPECT_GT(read.NextUse(3, sample, 0), read_step);
  EXPECT_EQ(failures.load(), 0u);
}

// A group of a map of groups is read whole by its index: every entry of it
// (small rows cached several to an entry) has its first row's next use.
TEST(ScheduleOracleGroups, EntriesOfAGroupHaveItsFirstRowsNextUse) {
  const std::string path =
      ::testing::TempDir() + "/groups-oracle." + std::to_string(::getpid()) + ".sched";
  std::vector<scheduler::MapFile> groups;
  for (int g = 0; g < 50; ++g) {
    groups.push_back({"/seeds.h5", 4, 1000, 1, {}, "s" + std::to_string(1000 + g)});
  }
  scheduler::ScheduleHeader header;
  header.map = scheduler::SampleMap(groups, {{"data", 64}});
  header.source = "torch-distributed";
  scheduler::LoaderSpec spec;
  spec.seed = 7;
  header.parameters = scheduler::CanonicalLoaderParameters(spec);
  header.layout = {.ranks = 1, .ranks_per_node = 1, .workers = 0, .batch_size = 4};
  header.epochs = 2;
  header.num_samples = kSamples;
  header.seed = 7;
  scheduler::WriteRecipeFile(path, header);
  const std::shared_ptr<ScheduleBinding> binding =
      ScheduleBinding::Open(path, 0, [](const std::string& m) { FAIL() << m; });
  ASSERT_NE(binding, nullptr);
  cache::CacheOptions options;
  options.capacity_bytes = 4 << 20;
  options.name_prefix = "prescient-groups-oracle-test-" + std::to_string(::getpid());
  auto opened = cache::NodeCache::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  BoundFields bound;
  RankProgress progress(*opened.value(), *binding);
  std::atomic<std::uint64_t> failures{0};
  ScheduleOracle oracle(*binding, bound, progress, failures, nullptr);
  ASSERT_TRUE(bound.Set(6, {.field = {10, 0}, .grouped = true}));   // entries of 2 rows
  ASSERT_TRUE(bound.Set(7, {.field = {10, 0}, .grouped = false}));  // the same group, row by row
  const std::uint64_t now = 3;
  const std::uint64_t first_row = oracle.NextUse(7, 0, now);
  ASSERT_NE(first_row, now + 1);  // what a grouped entry of another map gets
  EXPECT_EQ(oracle.NextUse(6, 0, now), first_row);
  EXPECT_EQ(oracle.NextUse(6, 1, now), first_row);  // the entry of rows 2 and 3
  EXPECT_EQ(failures.load(), 0u);
  ::unlink(path.c_str());
}

TEST(ScheduleBindingOpen, UnusableFilesWarnOnce) {
  std::vector<std::string> warnings;
  auto warn = [&](const std::string& m) { warnings.push_back(m); };
  EXPECT_EQ(ScheduleBinding::Open("/nonexistent.sched", 0, warn), nullptr);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("PRESCIENT_SCHEDULE"), std::string::npos);
  const std::string garbage = ::testing::TempDir() + "/garbage." + std::to_string(::getpid());
  FILE* f = std::fopen(garbage.c_str(), "w");
  std::fputs("not a schedule", f);
  std::fclose(f);
  EXPECT_EQ(ScheduleBinding::Open(garbage, 0, warn), nullptr);
  EXPECT_EQ(warnings.size(), 2u);
  ::unlink(garbage.c_str());
}

// The samples of a read's rows, asked twice a run of consecutive rows, are
// those asked row by row: for rows that are samples, groups of 4 and of 256
// rows read whole, in part, across groups, descending, repeated and mixed.
TEST(SamplesOfRows, AreTheSamplesAskedRowByRow) {
  std::mt19937_64 random(11);
  for (const std::uint64_t rows_per_sample : {1u, 4u, 256u}) {
    std::uint64_t asked = 0;
    const auto sample_of = [&](std::uint64_t row) {
      ++asked;
      return 1000 + row / rows_per_sample;
    };
    std::vector<std::vector<std::uint64_t>> reads = {
        {}, {7}, {5, 4, 3}, {2, 2, 3, 3}, {9, 10, 11, 40, 41, 3, 4, 5, 6, 7, 8}};
    std::vector<std::uint64_t> group(256);
    std::iota(group.begin(), group.end(), 512);  // a group read whole
    reads.push_back(group);
    reads.emplace_back(group.begin() + 10, group.begin() + 200);  // in part
    std::iota(group.begin(), group.end(), 100);                   // across two groups
    reads.push_back(group);
    for (int k = 0; k < 50; ++k) {  // runs of random lengths at random places
      std::vector<std::uint64_t> rows;
      for (int run = 0; run < 4; ++run) {
        const std::uint64_t first = random() % 2000, length = 1 + random() % 300;
        for (std::uint64_t r = 0; r < length; ++r) rows.push_back(first + r);
      }
      reads.push_back(rows);
    }
    for (const std::vector<std::uint64_t>& rows : reads) {
      std::vector<std::uint64_t> expected;
      for (const std::uint64_t row : rows) {
        const std::uint64_t sample = 1000 + row / rows_per_sample;
        if (expected.empty() || expected.back() != sample) expected.push_back(sample);
      }
      std::vector<std::uint64_t> samples = {99};  // replaced, not appended to
      asked = 0;
      SamplesOfRows(rows, sample_of, samples);
      EXPECT_EQ(samples, expected)
          << rows_per_sample << " rows a sample, " << rows.size() << " rows";
      EXPECT_LE(asked, 2 * rows.size());
    }
    // A whole group is asked about twice, not once a row.
    std::iota(group.begin(), group.end(), 512);
    asked = 0;
    std::vector<std::uint64_t> samples;
    SamplesOfRows(group, sample_of, samples);
    EXPECT_EQ(asked, 2u);
  }
}

}  // namespace
}  // namespace prescient::vol
