// NodeCache::Resident: which of a read's rows the cache holds, under one lock
// (a narrow read served from its cached rows asks it on every read).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::PatternLoader;
using testing::ScopedSegmentName;

constexpr std::uint64_t kRow = 8192;

TEST(Resident, SaysWhichRowsAreReadyAndNotThoseClaimedOrAbsent) {
  ScopedSegmentName name;
  auto opened = NodeCache::Open(name.options());
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  NodeCache& cache = *opened.value();
  const DatasetSlot ds = cache.RegisterDataset({31, 1}, kRow, 100).value();
  const std::vector<std::uint64_t> loaded = {2, 3, 7};
  std::vector<std::byte> out(loaded.size() * kRow);
  ASSERT_TRUE(
      cache.ReadRows(ds, loaded, out.data(), PatternLoader{1, kRow, nullptr}, nullptr).ok());
  // Row 9 claimed for prefetch, not yet published: in flight, not resident.
  ASSERT_EQ(cache.Claim(ds, std::vector<std::uint64_t>{9}, nullptr).value().size(), 1u);

  const std::vector<std::uint64_t> rows = {1, 2, 3, 4, 7, 9, 99};
  std::vector<std::uint8_t> resident(rows.size(), 7);
  EXPECT_EQ(cache.Resident(ds, rows, resident), 3u);
  EXPECT_EQ(resident, (std::vector<std::uint8_t>{0, 1, 1, 0, 1, 0, 0}));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(cache.Contains(ds, rows[i]), resident[i] != 0) << rows[i];
  }
  EXPECT_TRUE(cache.Abandon(ds, 9).ok());

  // Sizes that differ, or a slot not registered: nothing, every flag cleared.
  std::vector<std::uint8_t> short_flags(2, 7);
  EXPECT_EQ(cache.Resident(ds, rows, short_flags), 0u);
  EXPECT_EQ(short_flags, (std::vector<std::uint8_t>{0, 0}));
  EXPECT_EQ(cache.Resident(ds + 1, rows, resident), 0u);
  EXPECT_EQ(resident, std::vector<std::uint8_t>(rows.size(), 0));
}

}  // namespace
}  // namespace prescient::cache
