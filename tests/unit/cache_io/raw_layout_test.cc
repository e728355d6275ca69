#include "cache/io/raw_layout.h"

#include <gtest/gtest.h>

#include "cache/io/raw_layout_text.h"
#include "test_dataset.h"

namespace prescient::cache::io {
namespace {

TEST(ChunkedLayoutTest, GeometryOfInnerSplitAndEdgeChunks) {
  const ChunkedLayout layout =
      ChunkedLayout::Make("f", {100, 128, 100}, {32, 64, 128}, 4, {}).value();
  EXPECT_EQ(layout.grid_shape(), (std::vector<std::uint64_t>{4, 2, 1}));
  EXPECT_EQ(layout.chunks_per_slab(), 2u);
  EXPECT_EQ(layout.row_bytes(), 128u * 100u * 4u);
  EXPECT_EQ(layout.chunk_bytes(), 32u * 64u * 128u * 4u);
  EXPECT_EQ(layout.SlabOfRow(99), 3u);
  EXPECT_EQ(layout.GridCoords(7), (std::vector<std::uint64_t>{3, 1, 0}));
  EXPECT_EQ(layout.allocated_chunks(), 0u);
}

TEST(ChunkedLayoutTest, RejectsBadShapes) {
  EXPECT_FALSE(ChunkedLayout::Make("f", {}, {}, 4, {}).ok());
  EXPECT_FALSE(ChunkedLayout::Make("f", {10, 4}, {5}, 4, {}).ok());
  EXPECT_FALSE(ChunkedLayout::Make("f", {10, 4}, {5, 0}, 4, {}).ok());
  EXPECT_FALSE(ChunkedLayout::Make("f", {10, 4}, {5, 4}, 0, {}).ok());
  EXPECT_FALSE(ChunkedLayout::Make("f", {10, 4}, {5, 4}, 4, {}, {std::byte{1}}).ok());
  EXPECT_FALSE(ChunkedLayout::Make("f", {1u << 30, 1u << 30}, {1, 1}, 4, {}).ok());
}

TEST(ChunkedLayoutTest, SetChunkChecksBoundaries) {
  ChunkedLayout layout = ChunkedLayout::Make("f", {10, 4}, {5, 4}, 4, {}).value();
  const std::vector<std::uint64_t> good = {5, 0}, unaligned = {3, 0}, outside = {10, 0},
                                   short_rank = {5};
  EXPECT_TRUE(layout.SetChunk(good, {.file_offset = 100, .stored_size = 80}).ok());
  EXPECT_FALSE(layout.SetChunk(unaligned, {.file_offset = 1, .stored_size = 1}).ok());
  EXPECT_FALSE(layout.SetChunk(outside, {.file_offset = 1, .stored_size = 1}).ok());
  EXPECT_FALSE(layout.SetChunk(short_rank, {.file_offset = 1, .stored_size = 1}).ok());
  EXPECT_FALSE(layout.SetChunk(good, {.file_offset = 1, .stored_size = 0}).ok());
  ASSERT_TRUE(layout.chunk(1).has_value());
  EXPECT_EQ(layout.chunk(1)->file_offset, 100u);
  EXPECT_FALSE(layout.chunk(0).has_value());
}

TEST(ContiguousLayoutTest, Validate) {
  EXPECT_TRUE((ContiguousLayout{.path = "", .data_offset = 8, .row_bytes = 4, .num_rows = 3})
                  .Validate()
                  .ok());
  EXPECT_FALSE((ContiguousLayout{.path = "", .data_offset = 8, .row_bytes = 0, .num_rows = 3})
                   .Validate()
                   .ok());
  EXPECT_FALSE(
      (ContiguousLayout{.path = "", .data_offset = ~0ull - 4, .row_bytes = 4, .num_rows = 3})
          .Validate()
          .ok());
}

TEST(RawLayoutTextTest, RoundTripsChunkedLayout) {
  ChunkedLayout layout = ChunkedLayout::Make("f", {1}, {1}, 1, {}).value();
  testing::MakeChunked({.shape = {20, 6, 5},
                        .chunk_shape = {8, 4, 5},
                        .element_size = 2,
                        .shuffle = true,
                        .deflate = true,
                        .unallocated = {3}},
                       layout, {std::byte{0xab}, std::byte{0x01}});
  const std::string text = FormatRawLayoutText(layout);
  const RawLayout parsed = ParseRawLayoutText(text).value();
  EXPECT_EQ(FormatRawLayoutText(parsed), text);
  const auto& chunked = std::get<ChunkedLayout>(parsed);
  EXPECT_EQ(chunked.allocated_chunks(), layout.num_chunks() - 1);
  EXPECT_EQ(chunked.fill_value(), (std::vector<std::byte>{std::byte{0xab}, std::byte{0x01}}));
  EXPECT_EQ(chunked.filters().size(), 2u);
}

TEST(RawLayoutTextTest, ParsesContiguousWithSpacesInPath) {
  const RawLayout layout = ParseRawLayoutText(
                               "prescient-raw-layout 1\n# comment\nkind contiguous\n"
                               "path /data/my file.h5\ndata_offset 2048\nrow_bytes 16\n"
                               "num_rows 3\n")
                               .value();
  const auto& contiguous = std::get<ContiguousLayout>(layout);
  EXPECT_EQ(contiguous.path, "/data/my file.h5");
  EXPECT_EQ(contiguous.data_offset, 2048u);
}

TEST(RawLayoutTextTest, RejectsMalformedInputWithLineNumber) {
  const auto bad = ParseRawLayoutText("prescient-raw-layout 1\nkind chunked\nshape 10 x\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 3"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(ParseRawLayoutText("prescient-raw-layout 2\n").ok());
  EXPECT_FALSE(ParseRawLayoutText("kind mystery\n").ok());
  EXPECT_FALSE(ParseRawLayoutText("kind chunked\nshape 10\nchunk_shape 5\nelement_size 4\n"
                                  "chunk 3 100 10 0\n")
                   .ok());  // not a chunk boundary
  EXPECT_FALSE(ParseRawLayoutText("kind chunked\nshape 10\nchunk_shape 5\nelement_size 4\n"
                                  "fill 0g\n")
                   .ok());
}

}  // namespace
}  // namespace prescient::cache::io
