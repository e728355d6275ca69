// ClaimForPrefetch: Belady's no-admit rule against what is resident now,
// blocks reserved at claim time, rows in flight never evicted, UpdateKeys.
#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::FirstBadByte;
using testing::PatternLoader;
using testing::ScopedSegmentName;

constexpr std::uint64_t kRow = 4096;  // one block per row

class PrefetchClaimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_.options().capacity_bytes = 1 << 20;
    auto cache = NodeCache::Open(name_.options());
    ASSERT_TRUE(cache.ok()) << cache.status().message();
    cache_ = std::move(cache.value());
    ds_ = cache_->RegisterDataset({7, 7}, kRow, 100000).value();
    blocks_ = cache_->Stats().capacity_bytes / kRow;
    ASSERT_GT(blocks_, 100u);
  }
  // Claims rows [first, first + n) with next uses step0, step0 + 1, ...
  std::vector<std::uint64_t> ClaimRange(std::uint64_t first, std::uint64_t n, std::uint64_t step0) {
    std::vector<RowWithKey> rows;
    for (std::uint64_t i = 0; i < n; ++i) rows.push_back({first + i, step0 + i});
    auto claimed = cache_->ClaimForPrefetch(ds_, rows);
    EXPECT_TRUE(claimed.ok()) << claimed.status().message();
    return claimed.ok() ? claimed.value() : std::vector<std::uint64_t>{};
  }
  void PublishAll(const std::vector<std::uint64_t>& rows) {
    std::vector<std::byte> data(kRow);
    for (std::uint64_t r : rows) {
      testing::FillRow(3, r, data.data(), kRow);
      auto outcome = cache_->Publish(ds_, r, data.data(), nullptr);
      ASSERT_TRUE(outcome.ok());
      EXPECT_EQ(outcome.value(), PublishOutcome::kStored) << r;
    }
  }
  ScopedSegmentName name_;
  std::unique_ptr<NodeCache> cache_;
  DatasetSlot ds_ = kInvalidDatasetSlot;
  std::uint64_t blocks_ = 0;
};

TEST_F(PrefetchClaimTest, ReservesAtClaimTimeSoInFlightRowsCountAndArePublished) {
  // Fill the cache with rows in flight: each reserves its block now.
  const std::vector<std::uint64_t> first = ClaimRange(0, blocks_, 100);
  ASSERT_EQ(first.size(), blocks_);
  EXPECT_EQ(first.front(), 0u);
  EXPECT_EQ(cache_->Stats().rows_resident, 0u);  // nothing published yet...
  // ...but nothing more fits, whatever its key: rows in flight are never evicted.
  EXPECT_TRUE(ClaimRange(blocks_, 10, 0).empty());
  EXPECT_EQ(cache_->Stats().prefetch_declined, 10u);
  EXPECT_EQ(cache_->Stats().evictions, 0u);
  // Demand reads meanwhile cannot displace them either (delivered, not kept).
  std::vector<std::byte> out(kRow);
  const std::uint64_t other = blocks_ + 50;
  ReadRowsStats st;
  ASSERT_TRUE(
      cache_->ReadRows(ds_, {&other, 1}, out.data(), PatternLoader{3, kRow, nullptr}, nullptr, &st)
          .ok());
  EXPECT_EQ(st.not_admitted, 1u);
  // Every Publish is stored: its blocks were reserved.
  PublishAll(first);
  EXPECT_EQ(cache_->Stats().rows_resident, blocks_);
  EXPECT_EQ(cache_->Stats().rejections, 1u);  // only the demand read's row
}

TEST_F(PrefetchClaimTest, DoNoHarmEvictsOnlyRowsNeededLaterAtClaimTime) {
  // Resident: rows 0..B-1, next used at steps 1000..1000+B-1.
  PublishAll(ClaimRange(0, blocks_, 1000));
  ASSERT_EQ(cache_->Stats().rows_resident, blocks_);
  // Rows needed sooner than the furthest resident rows displace them, in
  // order of need: the 10 needed at 500..509 evict the 10 furthest now.
  const std::vector<std::uint64_t> sooner = ClaimRange(blocks_, 10, 500);
  EXPECT_EQ(sooner.size(), 10u);
  EXPECT_EQ(cache_->Stats().evictions, 10u);
  for (std::uint64_t r = blocks_ - 10; r < blocks_; ++r) EXPECT_FALSE(cache_->Contains(ds_, r));
  EXPECT_TRUE(cache_->Contains(ds_, blocks_ - 11));
  // A row needed later than everything resident is not claimed at all.
  EXPECT_TRUE(ClaimRange(2 * blocks_, 1, 1000 + blocks_).empty());
  // Nor a row needed exactly when the furthest resident row is (never evict
  // a row needed as soon as the one brought in).
  EXPECT_TRUE(ClaimRange(2 * blocks_, 1, 1000 + blocks_ - 11).empty());
  EXPECT_EQ(cache_->Stats().prefetch_declined, 2u);
  // Resident and in-flight rows are skipped, repeats too; order is kept.
  std::vector<RowWithKey> mixed = {
      {blocks_ + 100, 1}, {3, 2}, {blocks_, 3}, {blocks_ + 100, 4}, {blocks_ + 99, 5}};
  auto claimed = cache_->ClaimForPrefetch(ds_, mixed);
  ASSERT_TRUE(claimed.ok());
  EXPECT_EQ(claimed.value(), (std::vector<std::uint64_t>{blocks_ + 100, blocks_ + 99}));
  PublishAll(sooner);
  PublishAll(claimed.value());
  // Abandon frees a reservation's blocks.
  const std::vector<std::uint64_t> one = ClaimRange(3 * blocks_, 1, 0);
  ASSERT_EQ(one.size(), 1u);
  const std::uint64_t evictions = cache_->Stats().evictions;
  EXPECT_TRUE(cache_->Abandon(ds_, one[0]).ok());
  EXPECT_EQ(ClaimRange(3 * blocks_ + 1, 1, 0).size(), 1u);  // uses the freed block
  EXPECT_EQ(cache_->Stats().evictions, evictions);
}

TEST_F(PrefetchClaimTest, UpdateKeysReordersEviction) {
  PublishAll(ClaimRange(0, blocks_, 1000));
  // Row 0 was read and is next needed much later: it becomes the victim.
  const RowWithKey later{0, 5000};
  ASSERT_TRUE(cache_->UpdateKeys(ds_, {&later, 1}).ok());
  ASSERT_EQ(ClaimRange(blocks_, 1, 2000).size(), 1u);
  EXPECT_FALSE(cache_->Contains(ds_, 0));
  EXPECT_TRUE(cache_->Contains(ds_, blocks_ - 1));
  // And a row whose next use moved closer is protected (keys may shrink too).
  const RowWithKey sooner{blocks_ - 1, 1};
  const RowWithKey absent{4 * blocks_, 1};  // not present: skipped
  ASSERT_TRUE(cache_->UpdateKeys(ds_, {&sooner, 1}).ok());
  ASSERT_TRUE(cache_->UpdateKeys(ds_, {&absent, 1}).ok());
  ASSERT_EQ(ClaimRange(blocks_ + 1, 1, 900).size(), 1u);
  EXPECT_TRUE(cache_->Contains(ds_, blocks_ - 1));
  EXPECT_FALSE(cache_->Contains(ds_, blocks_ - 2));
  // Out-of-range rows and unknown slots are errors, not crashes.
  const RowWithKey bad{100000, 1};
  EXPECT_FALSE(cache_->ClaimForPrefetch(ds_, {&bad, 1}).ok());
  EXPECT_FALSE(cache_->ClaimForPrefetch(999, {&bad, 1}).ok());
  std::vector<std::byte> out(kRow);
  const std::uint64_t r = 5;
  ASSERT_TRUE(
      cache_->ReadRows(ds_, {&r, 1}, out.data(), PatternLoader{3, kRow, nullptr}, nullptr).ok());
  EXPECT_EQ(FirstBadByte(3, {&r, 1}, out.data(), kRow), -1);
}

}  // namespace
}  // namespace prescient::cache
