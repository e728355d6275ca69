#include "cache/io/task_order.h"

#include <gtest/gtest.h>

#include <vector>

#include "cache/io/coalescing_planner.h"

namespace prescient::cache::io {
namespace {

std::vector<std::vector<std::uint64_t>> RowsOfTasks(const ReadPlan& plan) {
  std::vector<std::vector<std::uint64_t>> rows;
  for (const ReadTask& task : plan.tasks) rows.push_back(task.rows);
  return rows;
}

TEST(NormalizeNeedsTest, KeepsTheEarliestStepOfEachRowSortedByRow) {
  std::vector<RowNeed> needs = {{9, 4}, {2, 7}, {9, 1}, {5, RowNeed::kNotNeeded}, {2, 3}};
  NormalizeNeeds(needs);
  EXPECT_EQ(needs, (std::vector<RowNeed>{{2, 3}, {5, RowNeed::kNotNeeded}, {9, 1}}));
}

TEST(OrderTasksByFirstNeedTest, TheNextBatchComesFirstWhateverItsFilePosition) {
  const ContiguousLayout layout{.path = "f", .data_offset = 0, .row_bytes = 100, .num_rows = 1000};
  // Three runs at the start, middle and end of the file; the end is needed first.
  const std::vector<std::uint64_t> rows = {0, 1, 500, 501, 998, 999};
  CoalescingOptions options{.max_gap_bytes = 0, .max_run_bytes = 1 << 20};
  ReadPlan plan = PlanContiguousReads(layout, rows, options).value();
  ASSERT_EQ(plan.tasks.size(), 3u);
  std::vector<RowNeed> needs = {{0, 20}, {1, 5}, {500, 9}, {501, 30}, {998, 40}, {999, 2}};
  NormalizeNeeds(needs);
  OrderTasksByFirstNeed(plan, needs);
  // A run is as urgent as its most urgent row.
  EXPECT_EQ(RowsOfTasks(plan),
            (std::vector<std::vector<std::uint64_t>>{{998, 999}, {0, 1}, {500, 501}}));
  EXPECT_EQ(plan.tasks[0].reads[0].file_offset, 99800u);  // the reads moved with their rows
}

TEST(OrderTasksByFirstNeedTest, TiesAndUnneededRowsKeepFileOrder) {
  const ContiguousLayout layout{.path = "f", .data_offset = 0, .row_bytes = 100, .num_rows = 100};
  const std::vector<std::uint64_t> rows = {10, 20, 30, 40};
  ReadPlan plan = PlanContiguousReads(layout, rows, kNoCoalescing).value();
  // 20 and 40 are needed at the same step; 10 and 30 only ride along (read-around).
  std::vector<RowNeed> needs = {{20, 3}, {40, 3}, {10, RowNeed::kNotNeeded}};
  NormalizeNeeds(needs);
  OrderTasksByFirstNeed(plan, needs);  // 30 is missing from needs: not needed either
  EXPECT_EQ(RowsOfTasks(plan), (std::vector<std::vector<std::uint64_t>>{{20}, {40}, {10}, {30}}));
}

TEST(OrderTasksByFirstNeedTest, AnEmptyPlanStaysEmpty) {
  ReadPlan plan;
  OrderTasksByFirstNeed(plan, {});
  EXPECT_TRUE(plan.tasks.empty());
}

TEST(SplitByDeadlineTest, SlicesDoubleFromTheLoadersFront) {
  // Loaders at step 100, first slice 10 steps: [100,110) [110,130) [130,170) [170,250) ...
  std::vector<RowNeed> needs = {{1, 100}, {2, 109}, {3, 110}, {4, 129},   {5, 130},
                                {6, 169}, {7, 170}, {8, 50},  {9, 100000}};
  NormalizeNeeds(needs);
  const std::vector<std::uint64_t> rows = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const auto slices = SplitByDeadline(rows, needs, /*front=*/100, /*slice_steps=*/10);
  ASSERT_EQ(slices.size(), kMaxDeadlineSlices);
  EXPECT_EQ(slices[0], (std::vector<std::uint64_t>{1, 2, 8}));  // 8 is late already
  EXPECT_EQ(slices[1], (std::vector<std::uint64_t>{3, 4}));
  EXPECT_EQ(slices[2], (std::vector<std::uint64_t>{5, 6}));
  EXPECT_EQ(slices[3], (std::vector<std::uint64_t>{7}));
  // Far ahead, and a row no step needs (10): the last, open-ended slice.
  EXPECT_EQ(slices[kMaxDeadlineSlices - 1], (std::vector<std::uint64_t>{9, 10}));
}

TEST(SplitByDeadlineTest, ARoundFarAheadOfTheLoadersStaysInOneSlice) {
  // Everything needed 2,000-2,500 steps ahead with 10-step slices: all in the
  // last slice, so it coalesces as one plan.
  std::vector<RowNeed> needs;
  std::vector<std::uint64_t> rows;
  for (std::uint64_t r = 0; r < 50; ++r) {
    needs.push_back({r, 2100 + 10 * r});
    rows.push_back(r);
  }
  NormalizeNeeds(needs);
  const auto slices = SplitByDeadline(rows, needs, /*front=*/100, /*slice_steps=*/10);
  EXPECT_EQ(slices[kMaxDeadlineSlices - 1], rows);
  for (std::uint32_t s = 0; s + 1 < kMaxDeadlineSlices; ++s) EXPECT_TRUE(slices[s].empty()) << s;
}

TEST(SplitByDeadlineTest, AZeroSliceLengthCountsAsOneStep) {
  std::vector<RowNeed> needs = {{0, 5}, {1, 6}, {2, 8}};
  const std::vector<std::uint64_t> rows = {0, 1, 2};
  const auto slices = SplitByDeadline(rows, needs, /*front=*/5, /*slice_steps=*/0);
  EXPECT_EQ(slices[0], (std::vector<std::uint64_t>{0}));  // [5, 6)
  EXPECT_EQ(slices[1], (std::vector<std::uint64_t>{1}));  // [6, 8)
  EXPECT_EQ(slices[2], (std::vector<std::uint64_t>{2}));  // [8, 12)
}

}  // namespace
}  // namespace prescient::cache::io
