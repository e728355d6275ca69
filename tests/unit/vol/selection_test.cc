// The selection decoder against every selection shape h5py 3.13 produces
// (research notes, h5py-read-path-and-samplers.md section 1.3), on a dataset
// x of shape (100, 3, 32, 32) and y of shape (100).
#include "vol/read/selection.h"

#include <gtest/gtest.h>

#include <chrono>

namespace prescient::vol {
namespace {

const std::vector<std::uint64_t> kX = {100, 3, 32, 32};
const std::vector<std::uint64_t> kY = {100};

SelectionInput Regular(std::vector<std::uint64_t> dims, std::vector<std::uint64_t> start,
                       std::vector<std::uint64_t> stride, std::vector<std::uint64_t> count,
                       std::vector<std::uint64_t> block) {
  SelectionInput in;
  in.kind = SelectionKind::kRegular;
  in.dims = std::move(dims);
  in.start = std::move(start);
  in.stride = std::move(stride);
  in.count = std::move(count);
  in.block = std::move(block);
  return in;
}

std::vector<RowRun> Runs(const DecodedSelection& s) { return s.rows.Materialize(); }

TEST(DecodeSelection, SingleIndex) {  // x[5]
  auto s = DecodeSelection(Regular(kX, {5, 0, 0, 0}, {1, 1, 1, 1}, {1, 3, 32, 32}, {1, 1, 1, 1}));
  EXPECT_EQ(s.kind, SelectionKind::kRegular);
  EXPECT_TRUE(s.whole_rows);
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{5, 1}}));
  EXPECT_EQ(s.elements, 3u * 32 * 32);
}

TEST(DecodeSelection, Slice) {  // x[10:20]
  auto s = DecodeSelection(Regular(kX, {10, 0, 0, 0}, {1, 1, 1, 1}, {10, 3, 32, 32}, {1, 1, 1, 1}));
  EXPECT_TRUE(s.whole_rows);
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{10, 10}}));
  EXPECT_EQ(s.rows.run_count(), 1u);
}

TEST(DecodeSelection, StridedSlice) {  // x[10:20:3]
  auto s = DecodeSelection(Regular(kX, {10, 0, 0, 0}, {3, 1, 1, 1}, {4, 3, 32, 32}, {1, 1, 1, 1}));
  EXPECT_TRUE(s.whole_rows);
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{10, 1}, {13, 1}, {16, 1}, {19, 1}}));
  EXPECT_EQ(s.rows.rows(), 4u);
}

TEST(DecodeSelection, FancyListMergedIntoOneBlock) {  // x[[3,4,5]]: count 1, block (3,3,32,32)
  auto s = DecodeSelection(Regular(kX, {3, 0, 0, 0}, {1, 1, 1, 1}, {1, 1, 1, 1}, {3, 3, 32, 32}));
  EXPECT_TRUE(s.whole_rows);
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{3, 3}}));
  EXPECT_EQ(s.elements, 3u * 3 * 32 * 32);
}

TEST(DecodeSelection, FancyListStrided) {  // x[[0,2,4,6]]
  auto s = DecodeSelection(Regular(kX, {0, 0, 0, 0}, {2, 1, 1, 1}, {4, 1, 1, 1}, {1, 3, 32, 32}));
  EXPECT_TRUE(s.whole_rows);
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{0, 1}, {2, 1}, {4, 1}, {6, 1}}));
}

TEST(DecodeSelection, OneDimensionalFancyList) {  // y[[1,5,9]]
  auto s = DecodeSelection(Regular(kY, {1}, {4}, {3}, {1}));
  EXPECT_TRUE(s.whole_rows);
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{1, 1}, {5, 1}, {9, 1}}));
}

TEST(DecodeSelection, StridedBlocks) {  // x[[1,2,3,5,6,7]]: start 1, stride 4, count 2, block 3
  auto s = DecodeSelection(Regular(kX, {1, 0, 0, 0}, {4, 1, 1, 1}, {2, 1, 1, 1}, {3, 3, 32, 32}));
  EXPECT_TRUE(s.whole_rows);
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{1, 3}, {5, 3}}));
  EXPECT_EQ(s.rows.rows(), 6u);
}

TEST(DecodeSelection, PartialRowIsNotWhole) {  // x[5, :, 10:20]
  auto s = DecodeSelection(Regular(kX, {5, 0, 10, 0}, {1, 1, 1, 1}, {1, 3, 10, 32}, {1, 1, 1, 1}));
  EXPECT_FALSE(s.whole_rows);
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{5, 1}}));
  EXPECT_EQ(s.elements, 3u * 10 * 32);
}

TEST(DecodeSelection, IntegerInInnerDimensionIsNotWhole) {  // x[5, 1]
  auto s = DecodeSelection(Regular(kX, {5, 1, 0, 0}, {1, 1, 1, 1}, {1, 1, 32, 32}, {1, 1, 1, 1}));
  EXPECT_FALSE(s.whole_rows);
}

TEST(DecodeSelection, FullSliceIsWhole) {  // x[:]
  auto s = DecodeSelection(Regular(kX, {0, 0, 0, 0}, {1, 1, 1, 1}, {100, 3, 32, 32}, {1, 1, 1, 1}));
  EXPECT_TRUE(s.whole_rows);
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{0, 100}}));
}

TEST(DecodeSelection, IrregularFancyList) {  // x[[3,17,42]]: 3 blocks
  SelectionInput in;
  in.kind = SelectionKind::kIrregular;
  in.dims = kX;
  for (std::uint64_t row : {3, 17, 42}) {
    in.blocks.insert(in.blocks.end(), {row, 0, 0, 0, row, 2, 31, 31});
  }
  auto s = DecodeSelection(in);
  EXPECT_EQ(s.kind, SelectionKind::kIrregular);
  EXPECT_TRUE(s.whole_rows);
  EXPECT_TRUE(s.rows.ascending());
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{3, 1}, {17, 1}, {42, 1}}));
  EXPECT_EQ(s.elements, 3u * 3 * 32 * 32);
}

TEST(DecodeSelection, IrregularAdjacentBlocksMerge) {  // x[[3,4,5,17]]: (3..5) and (17)
  SelectionInput in;
  in.kind = SelectionKind::kIrregular;
  in.dims = kX;
  in.blocks = {3, 0, 0, 0, 5, 2, 31, 31, 17, 0, 0, 0, 17, 2, 31, 31};
  auto s = DecodeSelection(in);
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{3, 3}, {17, 1}}));
}

TEST(DecodeSelection, IrregularPartialRows) {
  SelectionInput in;
  in.kind = SelectionKind::kIrregular;
  in.dims = kX;
  in.blocks = {3, 0, 0, 0, 3, 2, 31, 15, 9, 0, 0, 0, 9, 2, 31, 31};
  auto s = DecodeSelection(in);
  EXPECT_FALSE(s.whole_rows);
  EXPECT_EQ(s.elements, 3u * 32 * 16 + 3u * 32 * 32);
}

// Row parts: x's rows are 3 x 32 x 32 elements (one plane of a channel is 1,024).
using Part = std::vector<ElementRun>;

TEST(DecodeSelection, RowPartOfChannels) {  // x[5, 0:2]: two planes, one run
  auto s = DecodeSelection(Regular(kX, {5, 0, 0, 0}, {1, 1, 1, 1}, {1, 2, 32, 32}, {1, 1, 1, 1}));
  EXPECT_FALSE(s.whole_rows);
  EXPECT_EQ(s.row_elements, 3u * 32 * 32);
  EXPECT_EQ(s.row_part, (Part{{0, 2048}}));
}

TEST(DecodeSelection, RowPartOfStridedChannelsAcrossRows) {  // x[4:7, ::2]
  auto s = DecodeSelection(Regular(kX, {4, 0, 0, 0}, {1, 2, 1, 1}, {3, 2, 32, 32}, {1, 1, 1, 1}));
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{4, 3}}));
  EXPECT_EQ(s.row_part, (Part{{0, 1024}, {2048, 1024}}));
  EXPECT_EQ(s.elements, 3u * 2 * 1024);
}

TEST(DecodeSelection, RowPartOfACrop) {  // x[5, :, 10:12, 30:]: 3 channels x 2 lines of 2
  auto s = DecodeSelection(Regular(kX, {5, 0, 10, 30}, {1, 1, 1, 1}, {1, 3, 2, 2}, {1, 1, 1, 1}));
  EXPECT_EQ(s.row_part, (Part{{10 * 32 + 30, 2},
                              {11 * 32 + 30, 2},
                              {1024 + 10 * 32 + 30, 2},
                              {1024 + 11 * 32 + 30, 2},
                              {2048 + 10 * 32 + 30, 2},
                              {2048 + 11 * 32 + 30, 2}}));
}

TEST(DecodeSelection, RowPartRunsJoinAcrossLines) {  // x[5, 1:, 31:, :]: line 31 of two planes
  auto s = DecodeSelection(Regular(kX, {5, 1, 31, 0}, {1, 1, 1, 1}, {1, 2, 1, 32}, {1, 1, 1, 1}));
  EXPECT_EQ(s.row_part, (Part{{1024 + 31 * 32, 32}, {2048 + 31 * 32, 32}}));
  // Lines 31 and 0 of the next plane touch: x[5, 0:2, 31:] then x[5, 1:, :1] is not a hyperslab,
  // but a plane's last line and the next plane's first do join when both are selected.
  auto t = DecodeSelection(
      Regular({100, 2, 2, 4}, {5, 0, 0, 0}, {1, 1, 1, 1}, {1, 2, 2, 2}, {1, 1, 1, 1}));
  EXPECT_EQ(t.row_part, (Part{{0, 2}, {4, 2}, {8, 2}, {12, 2}}));
}

TEST(DecodeSelection, IrregularRowPartOfListedChannels) {  // x[[3, 9], [0, 2]]
  SelectionInput in;
  in.kind = SelectionKind::kIrregular;
  in.dims = kX;
  for (std::uint64_t row : {3, 9}) {
    for (std::uint64_t ch : {0, 2})
      in.blocks.insert(in.blocks.end(), {row, ch, 0, 0, row, ch, 31, 31});
  }
  auto s = DecodeSelection(in);
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{3, 1}, {9, 1}}));
  EXPECT_EQ(s.row_part, (Part{{0, 1024}, {2048, 1024}}));
  EXPECT_EQ(s.elements, 2u * 2 * 1024);
}

TEST(DecodeSelection, IrregularRowPartsThatDifferHaveNoPart) {
  SelectionInput in;
  in.kind = SelectionKind::kIrregular;
  in.dims = kX;
  // Row 3 takes channels 0 and 2, row 9 channel 0 only.
  in.blocks = {3, 0, 0, 0, 3, 0, 31, 31, 3, 2, 0, 0, 3, 2, 31, 31, 9, 0, 0, 0, 9, 0, 31, 31};
  EXPECT_TRUE(DecodeSelection(in).row_part.empty());
  // Row 3 channel 0, row 9 channel 2: as many boxes, other ones.
  in.blocks = {3, 0, 0, 0, 3, 0, 31, 31, 9, 2, 0, 0, 9, 2, 31, 31};
  EXPECT_TRUE(DecodeSelection(in).row_part.empty());
  // The earlier case's partial rows (IrregularPartialRows): halves of a plane and whole rows.
  in.blocks = {3, 0, 0, 0, 3, 2, 31, 15, 9, 0, 0, 0, 9, 2, 31, 31};
  EXPECT_TRUE(DecodeSelection(in).row_part.empty());
}

TEST(DecodeSelection, WholeRowsAndPointsHaveNoPart) {
  EXPECT_TRUE(DecodeSelection(Regular(kX, {5, 0, 0, 0}, {1, 1, 1, 1}, {1, 3, 32, 32}, {1, 1, 1, 1}))
                  .row_part.empty());
  SelectionInput in;
  in.kind = SelectionKind::kPoints;
  in.dims = kX;
  in.points = {1, 0, 0, 0, 1, 0, 0, 1};
  EXPECT_TRUE(DecodeSelection(in).row_part.empty());
}

TEST(DecodeSelection, FineRowPartsAreLeftUndescribed) {
  // z[5, :, ::2, ::2] of a (10, 1, 256, 128) dataset: 128 x 64 single elements, more runs
  // than kMaxRowPartRuns (4,096); a (10, 1, 128, 128) one has exactly that many.
  auto s = DecodeSelection(
      Regular({10, 1, 256, 128}, {5, 0, 0, 0}, {1, 1, 2, 2}, {1, 1, 128, 64}, {1, 1, 1, 1}));
  EXPECT_FALSE(s.whole_rows);
  EXPECT_TRUE(s.row_part.empty());
  EXPECT_EQ(s.elements, 128u * 64);
  auto t = DecodeSelection(
      Regular({10, 1, 128, 128}, {5, 0, 0, 0}, {1, 1, 2, 2}, {1, 1, 64, 64}, {1, 1, 1, 1}));
  EXPECT_EQ(t.row_part.size(), kMaxRowPartRuns);
}

TEST(DecodeSelection, PointsOnOneDimensionalDataset) {  // y[mask]
  SelectionInput in;
  in.kind = SelectionKind::kPoints;
  in.dims = kY;
  in.points = {0, 7, 8, 9, 50};
  auto s = DecodeSelection(in);
  EXPECT_EQ(s.kind, SelectionKind::kPoints);
  EXPECT_TRUE(s.whole_rows);
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{0, 1}, {7, 3}, {50, 1}}));
  EXPECT_EQ(s.elements, 5u);
}

TEST(DecodeSelection, PointsKeepTransferOrderAndRepeats) {
  SelectionInput in;
  in.kind = SelectionKind::kPoints;
  in.dims = kY;
  in.points = {9, 3, 3};
  auto s = DecodeSelection(in);
  EXPECT_FALSE(s.rows.ascending());
  EXPECT_EQ(s.rows.rows(), 3u);
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{9, 1}, {3, 1}, {3, 1}}));
}

TEST(DecodeSelection, PointsOnMultiDimensionalDatasetAreNotWholeRows) {
  SelectionInput in;
  in.kind = SelectionKind::kPoints;
  in.dims = kX;
  in.points = {1, 0, 0, 0, 1, 0, 0, 1};
  auto s = DecodeSelection(in);
  EXPECT_FALSE(s.whole_rows);
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{1, 1}, {1, 1}}));
}

TEST(DecodeSelection, All) {  // x[()], np.asarray(x)
  SelectionInput in;
  in.kind = SelectionKind::kAll;
  in.dims = kX;
  auto s = DecodeSelection(in);
  EXPECT_TRUE(s.whole_rows);
  EXPECT_EQ(Runs(s), (std::vector<RowRun>{{0, 100}}));
  EXPECT_EQ(s.elements, 100u * 3 * 32 * 32);
}

TEST(DecodeSelection, ScalarDataset) {
  SelectionInput in;
  in.kind = SelectionKind::kAll;
  auto s = DecodeSelection(in);
  EXPECT_TRUE(s.scalar);
  EXPECT_EQ(s.rows.rows(), 0u);
  EXPECT_EQ(s.elements, 1u);
}

TEST(DecodeSelection, NoneSelectsNothing) {
  SelectionInput in;
  in.kind = SelectionKind::kNone;
  in.dims = kX;
  auto s = DecodeSelection(in);
  EXPECT_EQ(s.rows.rows(), 0u);
  EXPECT_EQ(s.elements, 0u);
}

TEST(DecodeSelection, MalformedInputThrows) {
  SelectionInput in = Regular(kX, {0}, {1}, {1}, {1});
  EXPECT_THROW(DecodeSelection(in), std::invalid_argument);
  SelectionInput blocks;
  blocks.kind = SelectionKind::kIrregular;
  blocks.dims = kX;
  blocks.blocks = {1, 2, 3};
  EXPECT_THROW(DecodeSelection(blocks), std::invalid_argument);
  SelectionInput inverted;
  inverted.kind = SelectionKind::kIrregular;
  inverted.dims = kY;
  inverted.blocks = {5, 4};
  EXPECT_THROW(DecodeSelection(inverted), std::invalid_argument);
}

TEST(DecodeSelection, HugeRegularSelectionIsNotExpanded) {
  // Every other row of a billion-row dataset: decoding must cost O(rank), not O(rows).
  const std::vector<std::uint64_t> dims = {2'000'000'000ULL, 16};
  const auto begin = std::chrono::steady_clock::now();
  auto s = DecodeSelection(Regular(dims, {0, 0}, {2, 1}, {1'000'000'000ULL, 16}, {1, 1}));
  const auto elapsed = std::chrono::steady_clock::now() - begin;
  EXPECT_EQ(s.rows.rows(), 1'000'000'000ULL);
  EXPECT_EQ(s.rows.run_count(), 1'000'000'000ULL);
  EXPECT_TRUE(s.whole_rows);
  // Generous bound: expanding would take seconds and gigabytes.
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count(), 50);
}

}  // namespace
}  // namespace prescient::vol
