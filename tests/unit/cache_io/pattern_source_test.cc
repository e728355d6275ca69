#include "cache/io/pattern_source.h"

#include <gtest/gtest.h>

#include <vector>

#include "cache/io/spliced_source.h"

namespace prescient::cache::io {
namespace {

std::vector<std::byte> Bytes(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  for (int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

TEST(PatternSourceTest, EveryByteIsThePatternAtItsOffset) {
  auto source = PatternSource::Make(Bytes({1, 2, 3}), 10, "fill");
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(source.value()->Size().value(), 10u);
  std::vector<std::byte> all(10);
  ASSERT_TRUE(source.value()->ReadExact(0, all).ok());
  EXPECT_EQ(all, Bytes({1, 2, 3, 1, 2, 3, 1, 2, 3, 1}));
  std::vector<std::byte> middle(5);
  ASSERT_TRUE(source.value()->ReadExact(4, middle).ok());
  EXPECT_EQ(middle, Bytes({2, 3, 1, 2, 3}));
  std::vector<std::byte> none;
  EXPECT_TRUE(source.value()->ReadExact(10, none).ok());
}

TEST(PatternSourceTest, ReadsPastTheEndAndEmptyPatternsAreRefused) {
  auto source = PatternSource::Make(Bytes({7}), 4, "fill");
  ASSERT_TRUE(source.ok());
  std::vector<std::byte> two(2);
  EXPECT_EQ(source.value()->ReadExact(3, two).code(), Status::Code::kIoError);
  EXPECT_EQ(source.value()->ReadExact(~0ull, two).code(), Status::Code::kIoError);
  EXPECT_EQ(PatternSource::Make({}, 4, "fill").status().code(), Status::Code::kInvalidArgument);
}

// Spliced between other runs, the pattern starts over at the run's start.
TEST(PatternSourceTest, SplicedItRestartsAtItsRun) {
  std::shared_ptr<const RandomAccessSource> fill =
      std::move(PatternSource::Make(Bytes({9, 8}), 4, "fill").value());
  std::shared_ptr<const RandomAccessSource> ones =
      std::move(PatternSource::Make(Bytes({1}), 3, "ones").value());
  auto spliced = SplicedSource::Make({{.begin = 0, .bytes = 3, .file = ones, .file_offset = 0},
                                      {.begin = 3, .bytes = 4, .file = fill, .file_offset = 0}},
                                     "spliced");
  ASSERT_TRUE(spliced.ok());
  std::vector<std::byte> all(7);
  ASSERT_TRUE(spliced.value()->ReadExact(0, all).ok());
  EXPECT_EQ(all, Bytes({1, 1, 1, 9, 8, 9, 8}));
}

}  // namespace
}  // namespace prescient::cache::io
