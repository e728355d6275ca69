// Eviction through the public API: LRU without a schedule, furthest next use
// with one, the no-admit rule, and next uses that move as steps advance.
#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::FirstBadByte;
using testing::PatternLoader;
using testing::ScopedSegmentName;
using testing::TableOracle;

constexpr std::uint64_t kRow = 4096;  // one block per row

class EvictionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_.options().capacity_bytes = 1 << 20;
    auto cache = NodeCache::Open(name_.options());
    ASSERT_TRUE(cache.ok()) << cache.status().message();
    cache_ = std::move(cache.value());
    ds_ = cache_->RegisterDataset({42, 42}, kRow, 100000).value();
    blocks_ = cache_->Stats().capacity_bytes / kRow;
    ASSERT_GT(blocks_, 100u);
  }
  ReadRowsStats Read(std::uint64_t row, const NextUseOracle* oracle) {
    std::vector<std::byte> out(kRow);
    ReadRowsStats st;
    EXPECT_TRUE(
        cache_->ReadRows(ds_, {&row, 1}, out.data(), PatternLoader{3, kRow, nullptr}, oracle, &st)
            .ok());
    EXPECT_EQ(FirstBadByte(3, {&row, 1}, out.data(), kRow), -1);
    return st;
  }
  ScopedSegmentName name_;
  std::unique_ptr<NodeCache> cache_;
  DatasetSlot ds_ = kInvalidDatasetSlot;
  std::uint64_t blocks_ = 0;
};

TEST_F(EvictionTest, LruWithoutSchedule) {
  for (std::uint64_t r = 0; r < blocks_; ++r) Read(r, nullptr);
  EXPECT_EQ(cache_->Stats().evictions, 0u);
  EXPECT_EQ(Read(0, nullptr).hits, 1u);  // row 0 is now the most recent
  Read(blocks_, nullptr);                // evicts the least recent: row 1
  EXPECT_TRUE(cache_->Contains(ds_, 0));
  EXPECT_FALSE(cache_->Contains(ds_, 1));
  EXPECT_TRUE(cache_->Contains(ds_, 2));
  EXPECT_TRUE(cache_->Contains(ds_, blocks_));
  EXPECT_EQ(cache_->Stats().evictions, 1u);
  EXPECT_EQ(cache_->Stats().rows_resident, blocks_);
}

TEST_F(EvictionTest, FurthestNextUseNeverUsedFirstAndNoAdmit) {
  TableOracle oracle;
  // Rows 0..B-2 are next used at step 1000 + r; row B-1 never again.
  for (std::uint64_t r = 0; r + 1 < blocks_; ++r) oracle.Set(r, {1000 + r});
  for (std::uint64_t r = 0; r < blocks_; ++r) Read(r, &oracle);
  const std::uint64_t x = blocks_ + 1, y = blocks_ + 2, z = blocks_ + 3;
  oracle.Set(x, {50});
  oracle.Set(y, {60});
  oracle.Set(z, {1000000});
  Read(x, &oracle);  // displaces the never-used row
  EXPECT_FALSE(cache_->Contains(ds_, blocks_ - 1));
  Read(y, &oracle);  // displaces the furthest: row B-2 (step 1000 + B-2)
  EXPECT_FALSE(cache_->Contains(ds_, blocks_ - 2));
  EXPECT_TRUE(cache_->Contains(ds_, blocks_ - 3));
  // z is needed after everything resident: delivered, not admitted, nothing
  // evicted; decided before it was loaded, so it is loaded for the read only
  // (never copied into the segment to be declined there).
  const std::uint64_t evictions = cache_->Stats().evictions;
  const ReadRowsStats st = Read(z, &oracle);
  EXPECT_EQ(st.loaded, 0u);
  EXPECT_EQ(st.uncached, 1u);
  EXPECT_EQ(st.not_admitted, 1u);
  EXPECT_FALSE(cache_->Contains(ds_, z));
  EXPECT_EQ(cache_->Stats().evictions, evictions);
  EXPECT_EQ(cache_->Stats().rejections, 1u);
  EXPECT_TRUE(cache_->Contains(ds_, x));
  EXPECT_TRUE(cache_->Contains(ds_, y));
}

TEST_F(EvictionTest, ReadingARowMovesItsNextUse) {
  TableOracle oracle;
  for (std::uint64_t r = 0; r < blocks_; ++r) oracle.Set(r, {100 + r, 100000 + r});
  for (std::uint64_t r = 0; r < blocks_; ++r) Read(r, &oracle);
  // Row 0 is read at its step 100; its next use is now 100000, the furthest.
  cache_->AdvanceNodeStep(100);
  EXPECT_EQ(Read(0, &oracle).hits, 1u);
  oracle.Set(blocks_, {150});
  Read(blocks_, &oracle);
  EXPECT_FALSE(cache_->Contains(ds_, 0));
  EXPECT_TRUE(cache_->Contains(ds_, 1));
}

TEST_F(EvictionTest, ScheduledRowsOutliveUnknownOnes) {
  TableOracle oracle;
  for (std::uint64_t r = 0; r < blocks_ / 2; ++r) oracle.Set(r, {10 + r});
  for (std::uint64_t r = 0; r < blocks_ / 2; ++r) Read(r, &oracle);        // scheduled
  for (std::uint64_t r = blocks_ / 2; r < blocks_; ++r) Read(r, nullptr);  // unknown (LRU)
  // Unknown rows go first, oldest first.
  Read(blocks_, nullptr);
  EXPECT_FALSE(cache_->Contains(ds_, blocks_ / 2));
  EXPECT_TRUE(cache_->Contains(ds_, 0));
  // Unknown rows keep replacing older unknown rows, never scheduled ones.
  for (std::uint64_t r = blocks_ + 1; r < 2 * blocks_; ++r) Read(r, nullptr);
  for (std::uint64_t r = 0; r < blocks_ / 2; ++r) EXPECT_TRUE(cache_->Contains(ds_, r)) << r;
  EXPECT_EQ(cache_->Stats().rejections, 0u);
}

TEST_F(EvictionTest, UnknownRowIsNotAdmittedAmongScheduledOnes) {
  TableOracle oracle;
  for (std::uint64_t r = 0; r < blocks_; ++r) oracle.Set(r, {10 + r});
  for (std::uint64_t r = 0; r < blocks_; ++r) Read(r, &oracle);
  const ReadRowsStats st = Read(blocks_, nullptr);
  EXPECT_EQ(st.not_admitted, 1u);
  EXPECT_FALSE(cache_->Contains(ds_, blocks_));
  EXPECT_EQ(cache_->Stats().rows_resident, blocks_);
  EXPECT_EQ(cache_->Stats().evictions, 0u);
}

TEST_F(EvictionTest, PredictedUsePassedUnreadBecomesStale) {
  TableOracle oracle;
  for (std::uint64_t r = 0; r < blocks_; ++r) oracle.Set(r, {10 + r});
  for (std::uint64_t r = 0; r < blocks_; ++r) Read(r, &oracle);
  // Steps pass without row 0 (due at 10) being read; the sweep (2 entries per
  // read) must notice before we need the space.
  cache_->AdvanceNodeStep(20);
  for (std::uint64_t i = 0; i < 2 * blocks_; ++i) EXPECT_EQ(Read(11 + i % 5, &oracle).hits, 1u);
  oracle.Set(blocks_, {5000});  // later than every live use
  Read(blocks_, &oracle);
  EXPECT_TRUE(cache_->Contains(ds_, blocks_));
  // The victim was one of the stale rows (their uses 10..19 passed unread).
  int stale_gone = 0;
  for (std::uint64_t r = 0; r < 10; ++r) stale_gone += cache_->Contains(ds_, r) ? 0 : 1;
  EXPECT_EQ(stale_gone, 1);
}

}  // namespace
}  // namespace prescient::cache
