#include "cache/io/coalescing_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "test_dataset.h"

namespace prescient::cache::io {
namespace {

ContiguousLayout Contiguous(std::uint64_t rows = 100, std::uint64_t row_bytes = 1000) {
  return {.path = "f", .data_offset = 4096, .row_bytes = row_bytes, .num_rows = rows};
}

TEST(ContiguousPlanTest, NoCoalescingGivesOneReadPerRow) {
  const std::vector<std::uint64_t> rows = {7, 3, 4, 3};
  const ReadPlan plan = PlanContiguousReads(Contiguous(), rows, kNoCoalescing).value();
  ASSERT_EQ(plan.tasks.size(), 3u);  // duplicates collapse, order is by file position
  EXPECT_EQ(plan.tasks[0].rows, std::vector<std::uint64_t>{3});
  EXPECT_EQ(plan.tasks[0].reads[0].file_offset, 4096u + 3000u);
  EXPECT_EQ(plan.tasks[0].reads[0].length, 1000u);
  EXPECT_EQ(plan.tasks[2].rows, std::vector<std::uint64_t>{7});
  EXPECT_EQ(plan.bytes_read(), 3000u);
}

TEST(ContiguousPlanTest, MergesAcrossGapsUpToThreshold) {
  // Rows 0 and 2 are 1000 bytes apart; rows 2 and 5 are 2000 apart.
  const std::vector<std::uint64_t> rows = {0, 2, 5};
  CoalescingOptions options{.max_gap_bytes = 1000, .max_run_bytes = 1 << 20};
  ReadPlan plan = PlanContiguousReads(Contiguous(), rows, options).value();
  ASSERT_EQ(plan.tasks.size(), 2u);
  EXPECT_EQ(plan.tasks[0].rows, (std::vector<std::uint64_t>{0, 2}));
  EXPECT_EQ(plan.tasks[0].reads[0].length, 3000u);  // the gap row is read too
  EXPECT_EQ(plan.tasks[1].rows, std::vector<std::uint64_t>{5});

  options.max_gap_bytes = 2000;
  plan = PlanContiguousReads(Contiguous(), rows, options).value();
  ASSERT_EQ(plan.tasks.size(), 1u);
  EXPECT_EQ(plan.tasks[0].reads[0].file_offset, 4096u);
  EXPECT_EQ(plan.tasks[0].reads[0].length, 6000u);
  EXPECT_EQ(plan.num_rows(), 3u);
}

TEST(ContiguousPlanTest, RunCapSplitsLongRuns) {
  std::vector<std::uint64_t> rows;
  for (std::uint64_t r = 0; r < 10; ++r) rows.push_back(r);
  const CoalescingOptions options{.max_gap_bytes = 1 << 20, .max_run_bytes = 3500};
  const ReadPlan plan = PlanContiguousReads(Contiguous(), rows, options).value();
  ASSERT_EQ(plan.tasks.size(), 4u);  // 3 + 3 + 3 + 1 rows
  for (const ReadTask& task : plan.tasks) EXPECT_LE(task.reads[0].length, 3500u);
  EXPECT_EQ(plan.tasks[3].rows, std::vector<std::uint64_t>{9});
  EXPECT_EQ(plan.bytes_read(), 10000u);
}

TEST(ContiguousPlanTest, RowLargerThanCapIsStillReadWhole) {
  const std::vector<std::uint64_t> rows = {1, 2};
  const CoalescingOptions options{.max_gap_bytes = 0, .max_run_bytes = 10};
  const ReadPlan plan = PlanContiguousReads(Contiguous(), rows, options).value();
  ASSERT_EQ(plan.tasks.size(), 2u);
  EXPECT_EQ(plan.tasks[0].reads[0].length, 1000u);
}

TEST(ContiguousPlanTest, ShortReadsCoverTheirWindowsOfWholeRows) {
  // 1000-byte rows, 100 rows from offset 4096; a window is the most whole rows
  // in 3000 bytes, counted from row 0: rows 0-2, 3-5, ..., 99 alone at the end.
  CoalescingOptions options = kNoCoalescing;
  options.read_window_bytes = 3000;
  const std::vector<std::uint64_t> rows = {10, 51, 99};
  const ReadPlan plan = PlanContiguousReads(Contiguous(), rows, options).value();
  ASSERT_EQ(plan.tasks.size(), 3u);
  EXPECT_EQ(plan.tasks[0].reads[0].file_offset, 4096u + 9'000u);  // rows 9-11
  EXPECT_EQ(plan.tasks[0].reads[0].length, 3000u);
  EXPECT_EQ(plan.tasks[0].rows, std::vector<std::uint64_t>{10});
  EXPECT_EQ(plan.tasks[1].reads[0].file_offset, 4096u + 51'000u);  // rows 51-53
  EXPECT_EQ(plan.tasks[1].reads[0].length, 3000u);
  EXPECT_EQ(plan.tasks[2].reads[0].file_offset, 4096u + 99'000u);  // never past the data
  EXPECT_EQ(plan.tasks[2].reads[0].length, 1000u);
  // Bytes that are not a whole number of rows: windows of the rows that fit.
  options.read_window_bytes = 2500;
  const ReadPlan two = PlanContiguousReads(Contiguous(), rows, options).value();
  EXPECT_EQ(two.tasks[1].reads[0].file_offset, 4096u + 50'000u);  // rows 50-51
  EXPECT_EQ(two.tasks[1].reads[0].length, 2000u);
  // A read already as long stays as it is; a window never drops below one row.
  options.read_window_bytes = 500;
  const ReadPlan one = PlanContiguousReads(Contiguous(), rows, options).value();
  EXPECT_EQ(one.tasks[0].reads[0].file_offset, 4096u + 10'000u);
  EXPECT_EQ(one.tasks[0].reads[0].length, 1000u);
}

TEST(ContiguousPlanTest, AShortMergedReadCoversEveryWindowItTouches) {
  // Rows 3 and 4 merge (they touch) and straddle windows 0-3 and 4-7.
  CoalescingOptions options{.max_gap_bytes = 0, .max_run_bytes = 1 << 20};
  options.read_window_bytes = 4000;
  const std::vector<std::uint64_t> rows = {3, 4};
  const ReadPlan plan = PlanContiguousReads(Contiguous(), rows, options).value();
  ASSERT_EQ(plan.tasks.size(), 1u);
  EXPECT_EQ(plan.tasks[0].reads[0].file_offset, 4096u);
  EXPECT_EQ(plan.tasks[0].reads[0].length, 8000u);
  EXPECT_EQ(plan.tasks[0].rows, (std::vector<std::uint64_t>{3, 4}));
}

TEST(ContiguousPlanTest, RejectsRowsOutOfRange) {
  const std::vector<std::uint64_t> rows = {1, 100};
  const auto plan = PlanContiguousReads(Contiguous(), rows, kNoCoalescing);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("100"), std::string::npos);
}

// Every row of the plan's tasks, each task's rows checked to lie inside its reads.
std::vector<std::uint64_t> RowsInsideReads(const ContiguousLayout& layout, const ReadPlan& plan) {
  std::vector<std::uint64_t> rows;
  for (const ReadTask& task : plan.tasks) {
    for (std::uint64_t row : task.rows) {
      const bool inside = std::any_of(task.reads.begin(), task.reads.end(), [&](const FileRead& r) {
        return layout.RowOffset(row) >= r.file_offset &&
               layout.RowOffset(row) + layout.row_bytes <= r.file_offset + r.length;
      });
      EXPECT_TRUE(inside) << "row " << row << " is not inside its task's reads";
      rows.push_back(row);
    }
  }
  return rows;
}

TEST(ContiguousSlicesTest, AReadDeliversTheLaterSlicesRowsItSpans) {
  // Slice 0 wants rows 0 and 2; the gap row 1 is read with them, and row 1
  // belongs to slice 1: it is delivered by slice 0's read, not read again.
  const ContiguousLayout layout = Contiguous();
  const CoalescingOptions options{.max_gap_bytes = 1000, .max_run_bytes = 1 << 20};
  const std::vector<std::vector<std::uint64_t>> slices = {{0, 2}, {1, 9}};
  const ReadPlan plan = PlanContiguousSlices(layout, slices, options).value();
  ASSERT_EQ(plan.tasks.size(), 2u);
  EXPECT_EQ(plan.tasks[0].rows, (std::vector<std::uint64_t>{0, 1, 2}));
  EXPECT_EQ(plan.tasks[1].rows, std::vector<std::uint64_t>{9});  // slice order is kept
  EXPECT_EQ(plan.bytes_read(), 4000u);
  // Planned slice by slice without it, row 1 costs a second read.
  EXPECT_EQ(PlanContiguousReads(layout, slices[1], options).value().bytes_read(), 2000u);
}

TEST(ContiguousSlicesTest, ExtendedReadsTakeTheRowsTheyReach) {
  // A 1000-byte row read in its window of two rows (the whole rows in 2500
  // bytes) delivers the later slice's row beside it, before or after it.
  const ContiguousLayout layout = Contiguous();
  const CoalescingOptions options{
      .max_gap_bytes = 0, .max_run_bytes = 1 << 20, .read_window_bytes = 2500};
  const std::vector<std::vector<std::uint64_t>> slices = {{10}, {11, 12}};
  const ReadPlan plan = PlanContiguousSlices(layout, slices, options).value();
  ASSERT_EQ(plan.tasks.size(), 2u);
  EXPECT_EQ(plan.tasks[0].rows, (std::vector<std::uint64_t>{10, 11}));
  EXPECT_EQ(plan.tasks[1].rows, std::vector<std::uint64_t>{12});
  const std::vector<std::vector<std::uint64_t>> backward = {{13}, {12, 20}};
  const ReadPlan back = PlanContiguousSlices(layout, backward, options).value();
  ASSERT_EQ(back.tasks.size(), 2u);
  EXPECT_EQ(back.tasks[0].rows, (std::vector<std::uint64_t>{12, 13}));
  EXPECT_EQ(back.tasks[1].rows, std::vector<std::uint64_t>{20});
}

TEST(ContiguousSlicesTest, EveryRowIsDeliveredOnceWhateverTheSlices) {
  const ContiguousLayout layout = Contiguous(1000);
  const CoalescingOptions options{
      .max_gap_bytes = 3000, .max_run_bytes = 20000, .read_window_bytes = 4000};
  std::vector<std::vector<std::uint64_t>> slices(5);
  std::vector<std::uint64_t> expected;
  for (std::uint64_t row = 0; row < 1000; row += 1 + row % 3) {
    slices[(row * 7919) % 5].push_back(row);
    expected.push_back(row);
  }
  const ReadPlan plan = PlanContiguousSlices(layout, slices, options).value();
  std::vector<std::uint64_t> got = RowsInsideReads(layout, plan);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, expected);
  // Never more bytes than the slices planned on their own.
  std::uint64_t alone = 0;
  for (const std::vector<std::uint64_t>& slice : slices)
    alone += PlanContiguousReads(layout, slice, options).value().bytes_read();
  EXPECT_LT(plan.bytes_read(), alone);
}

TEST(ContiguousSlicesTest, RejectsRowsOutOfRange) {
  const std::vector<std::vector<std::uint64_t>> slices = {{1}, {100}};
  EXPECT_FALSE(PlanContiguousSlices(Contiguous(), slices, kNoCoalescing).ok());
}

TEST(ContiguousPlanTest, EmptyRowSetGivesEmptyPlan) {
  const ReadPlan plan = PlanContiguousReads(Contiguous(), {}, kNoCoalescing).value();
  EXPECT_TRUE(plan.tasks.empty());
}

// Chunked: every chunk appears in exactly one task, each task's rows are
// exactly the requested rows of the slabs its chunks belong to.
void ExpectChunkInvariants(const ChunkedLayout& layout, const ReadPlan& plan,
                           const std::set<std::uint64_t>& requested) {
  std::set<std::uint64_t> chunks_seen, rows_seen;
  for (const ReadTask& task : plan.tasks) {
    std::set<std::uint64_t> slabs;
    for (const std::uint64_t r : task.rows) {
      EXPECT_TRUE(rows_seen.insert(r).second) << "row " << r << " in two tasks";
      slabs.insert(layout.SlabOfRow(r));
    }
    std::set<std::uint64_t> task_chunks;
    for (const FileRead& read : task.reads) {
      for (const ChunkSpan& span : read.chunks) {
        EXPECT_TRUE(chunks_seen.insert(span.chunk_index).second) << "chunk read twice";
        task_chunks.insert(span.chunk_index);
        const auto& location = layout.chunk(span.chunk_index);
        ASSERT_TRUE(location.has_value());
        EXPECT_EQ(read.file_offset + span.offset_in_read, location->file_offset);
        EXPECT_LE(span.offset_in_read + span.stored_size, read.length);
      }
    }
    for (const std::uint64_t c : task.unallocated_chunks) task_chunks.insert(c);
    for (const std::uint64_t slab : slabs) {
      for (std::uint64_t c = slab * layout.chunks_per_slab();
           c < (slab + 1) * layout.chunks_per_slab(); ++c) {
        EXPECT_EQ(task_chunks.count(c), 1u) << "slab " << slab << " missing chunk " << c;
      }
    }
    EXPECT_EQ(task_chunks.size(), slabs.size() * layout.chunks_per_slab());
  }
  EXPECT_EQ(rows_seen, requested);
}

TEST(ChunkedPlanTest, EachChunkReadOnceForManyRows) {
  ChunkedLayout layout = ChunkedLayout::Make("f", {100, 8}, {10, 8}, 4, {}).value();
  testing::MakeChunked({.shape = {100, 8}, .chunk_shape = {10, 8}, .gap_between_chunks = 5000},
                       layout);
  const std::vector<std::uint64_t> rows = {3, 1, 9, 5};  // all in chunk 0
  const ReadPlan plan = PlanChunkedReads(layout, rows, kDefaultLocalDiskCoalescing).value();
  ASSERT_EQ(plan.tasks.size(), 1u);
  ASSERT_EQ(plan.tasks[0].reads.size(), 1u);
  ASSERT_EQ(plan.tasks[0].reads[0].chunks.size(), 1u);
  EXPECT_EQ(plan.tasks[0].reads[0].length, 320u);
  EXPECT_EQ(plan.tasks[0].rows, (std::vector<std::uint64_t>{1, 3, 5, 9}));
}

TEST(ChunkedPlanTest, NearbyChunksMergeFarOnesDoNot) {
  ChunkedLayout layout = ChunkedLayout::Make("f", {100, 8}, {10, 8}, 4, {}).value();
  testing::MakeChunked({.shape = {100, 8}, .chunk_shape = {10, 8}, .gap_between_chunks = 100},
                       layout);
  const std::vector<std::uint64_t> rows = {0, 15, 45};  // chunks 0, 1, 4
  CoalescingOptions options{.max_gap_bytes = 100, .max_run_bytes = 1 << 20};
  ReadPlan plan = PlanChunkedReads(layout, rows, options).value();
  ASSERT_EQ(plan.tasks.size(), 2u);  // {0,1} adjacent (gap 100), 4 is 2 chunks further
  EXPECT_EQ(plan.tasks[0].rows, (std::vector<std::uint64_t>{0, 15}));
  ASSERT_EQ(plan.tasks[0].reads.size(), 1u);
  EXPECT_EQ(plan.tasks[0].reads[0].chunks.size(), 2u);
  EXPECT_EQ(plan.tasks[0].reads[0].length, 320u + 100u + 320u);
  ExpectChunkInvariants(layout, plan, {0, 15, 45});

  options.max_gap_bytes = 99;
  plan = PlanChunkedReads(layout, rows, options).value();
  EXPECT_EQ(plan.tasks.size(), 3u);
  options = {.max_gap_bytes = 1 << 20, .max_run_bytes = 1 << 20};
  plan = PlanChunkedReads(layout, rows, options).value();
  ASSERT_EQ(plan.tasks.size(), 1u);
  EXPECT_EQ(plan.tasks[0].reads.size(), 1u);
  EXPECT_EQ(plan.tasks[0].reads[0].chunks.size(), 3u);
}

TEST(ChunkedPlanTest, RunCapLimitsSlabsPerTask) {
  ChunkedLayout layout = ChunkedLayout::Make("f", {100, 8}, {10, 8}, 4, {}).value();
  testing::MakeChunked({.shape = {100, 8}, .chunk_shape = {10, 8}}, layout);
  std::vector<std::uint64_t> rows;
  for (std::uint64_t r = 0; r < 100; r += 3) rows.push_back(r);
  const CoalescingOptions options{.max_gap_bytes = 1 << 20, .max_run_bytes = 3 * 320};
  const ReadPlan plan = PlanChunkedReads(layout, rows, options).value();
  ASSERT_EQ(plan.tasks.size(), 4u);  // 10 chunks, 3 per task
  for (const ReadTask& task : plan.tasks) EXPECT_LE(task.reads[0].length, 3u * 320u);
  ExpectChunkInvariants(layout, plan, std::set<std::uint64_t>(rows.begin(), rows.end()));
}

TEST(ChunkedPlanTest, InnerDimensionSplitPutsWholeSlabInOneTask) {
  // Chunks (4, 3, 2) on (10, 5, 4): grid (3, 2, 2), 4 chunks per slab, edge chunks in every dim.
  ChunkedLayout layout = ChunkedLayout::Make("f", {10, 5, 4}, {4, 3, 2}, 2, {}).value();
  testing::MakeChunked({.shape = {10, 5, 4},
                        .chunk_shape = {4, 3, 2},
                        .element_size = 2,
                        .gap_between_chunks = 1 << 20},
                       layout);
  EXPECT_EQ(layout.chunks_per_slab(), 4u);
  const std::vector<std::uint64_t> rows = {9, 1, 2};
  const ReadPlan plan = PlanChunkedReads(layout, rows, kNoCoalescing).value();
  ASSERT_EQ(plan.tasks.size(), 2u);
  EXPECT_EQ(plan.tasks[0].rows, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(plan.tasks[0].reads.size(), 4u);  // far apart: one read per chunk, one task
  EXPECT_EQ(plan.tasks[1].rows, std::vector<std::uint64_t>{9});
  ExpectChunkInvariants(layout, plan, {1, 2, 9});
}

TEST(ChunkedPlanTest, ChunksOutOfFileOrderAreReadInFileOrder) {
  ChunkedLayout layout = ChunkedLayout::Make("f", {40, 6}, {10, 3}, 4, {}).value();
  testing::MakeChunked({.shape = {40, 6}, .chunk_shape = {10, 3}, .reverse_file_order = true},
                       layout);
  const std::vector<std::uint64_t> rows = {0, 11, 39};
  const ReadPlan plan = PlanChunkedReads(layout, rows, kDefaultLocalDiskCoalescing).value();
  ASSERT_EQ(plan.tasks.size(), 1u);
  const FileRead& read = plan.tasks[0].reads.at(0);
  for (std::size_t i = 1; i < read.chunks.size(); ++i) {
    EXPECT_GT(read.chunks[i].offset_in_read, read.chunks[i - 1].offset_in_read);
  }
  ExpectChunkInvariants(layout, plan, {0, 11, 39});
}

TEST(ChunkedPlanTest, UnallocatedChunksNeedNoRead) {
  ChunkedLayout layout = ChunkedLayout::Make("f", {30, 4}, {10, 2}, 4, {}).value();
  testing::MakeChunked({.shape = {30, 4}, .chunk_shape = {10, 2}, .unallocated = {1, 4, 5}},
                       layout);
  const std::vector<std::uint64_t> rows = {5, 25};  // slab 0 (chunks 0, 1), slab 2 (4, 5)
  const ReadPlan plan = PlanChunkedReads(layout, rows, kNoCoalescing).value();
  ASSERT_EQ(plan.tasks.size(), 2u);
  EXPECT_EQ(plan.tasks[0].rows, std::vector<std::uint64_t>{5});
  EXPECT_EQ(plan.tasks[0].unallocated_chunks, std::vector<std::uint64_t>{1});
  EXPECT_EQ(plan.tasks[1].rows, std::vector<std::uint64_t>{25});
  EXPECT_TRUE(plan.tasks[1].reads.empty());
  EXPECT_EQ(plan.tasks[1].unallocated_chunks, (std::vector<std::uint64_t>{4, 5}));
  ExpectChunkInvariants(layout, plan, {5, 25});
}

TEST(ChunkedPlanTest, EdgeChunkRowsPlanLikeOthers) {
  ChunkedLayout layout = ChunkedLayout::Make("f", {25, 4}, {10, 4}, 8, {}).value();
  testing::MakeChunked({.shape = {25, 4}, .chunk_shape = {10, 4}, .element_size = 8}, layout);
  const std::vector<std::uint64_t> rows = {24, 20};
  const ReadPlan plan = PlanChunkedReads(layout, rows, kNoCoalescing).value();
  ASSERT_EQ(plan.tasks.size(), 1u);
  EXPECT_EQ(plan.tasks[0].reads[0].length, 10u * 4u * 8u);  // stored full size
  EXPECT_FALSE(PlanChunkedReads(layout, std::vector<std::uint64_t>{25}, kNoCoalescing).ok());
}

TEST(ChunkedPlanTest, UnsupportedFilterStillPlansChunkAlignedGroups) {
  // The VOL loads such datasets through HDF5, but still chunk by chunk.
  ChunkedLayout layout =
      ChunkedLayout::Make("f", {10, 4}, {5, 4}, 4, {{.id = 32001, .client_data = {}}}).value();
  ASSERT_TRUE(
      layout.SetChunk(std::vector<std::uint64_t>{0, 0}, {.file_offset = 100, .stored_size = 50})
          .ok());
  ASSERT_TRUE(
      layout.SetChunk(std::vector<std::uint64_t>{5, 0}, {.file_offset = 150, .stored_size = 60})
          .ok());
  const ReadPlan plan =
      PlanChunkedReads(layout, std::vector<std::uint64_t>{1, 3, 7}, kNoCoalescing).value();
  ASSERT_EQ(plan.tasks.size(), 2u);
  EXPECT_EQ(plan.tasks[0].rows, (std::vector<std::uint64_t>{1, 3}));
  EXPECT_EQ(plan.tasks[1].rows, std::vector<std::uint64_t>{7});
}

TEST(PlanReadsTest, DispatchesOnLayoutKind) {
  const RawLayout layout = Contiguous();
  const ReadPlan plan = PlanReads(layout, std::vector<std::uint64_t>{1, 2}, {}).value();
  EXPECT_EQ(plan.tasks.size(), 1u);
}

}  // namespace
}  // namespace prescient::cache::io
