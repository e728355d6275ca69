// DropDataset (a file rewritten under an open handle): resident rows freed at
// once, rows in flight unpublishable, the slot retired everywhere.
#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::FirstBadByte;
using testing::ForkChild;
using testing::PatternLoader;
using testing::ScopedSegmentName;
using testing::WaitExitCode;

constexpr std::uint64_t kRow = 8192;  // two blocks

std::unique_ptr<NodeCache> OpenOrDie(const CacheOptions& options) {
  auto cache = NodeCache::Open(options);
  EXPECT_TRUE(cache.ok()) << cache.status().message();
  return cache.ok() ? std::move(cache.value()) : nullptr;
}

// Rows [0, n) of `ds` through ReadRows with the pattern of `salt`.
Status ReadRange(NodeCache& cache, DatasetSlot ds, std::uint64_t n, std::uint64_t salt,
                 ReadRowsStats* st = nullptr) {
  std::vector<std::uint64_t> rows(n);
  for (std::uint64_t i = 0; i < n; ++i) rows[i] = i;
  std::vector<std::byte> out(n * kRow);
  Status s = cache.ReadRows(ds, rows, out.data(), PatternLoader{salt, kRow, nullptr}, nullptr, st);
  if (s.ok() && FirstBadByte(salt, rows, out.data(), kRow) != -1) {
    return Status::Internal("wrong bytes");
  }
  return s;
}

TEST(DropDataset, FreesResidentRowsAndRetiresTheSlotEverywhere) {
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  const DatasetKey key{11, 1};
  const DatasetSlot old_slot = cache->RegisterDataset(key, kRow, 1000).value();
  const DatasetSlot other = cache->RegisterDataset({11, 2}, kRow, 1000).value();
  ASSERT_TRUE(ReadRange(*cache, old_slot, 100, 1).ok());
  ASSERT_TRUE(ReadRange(*cache, other, 10, 2).ok());
  ASSERT_EQ(cache->Stats().rows_resident, 110u);
  ASSERT_TRUE(cache->DropDataset(old_slot).ok());
  EXPECT_EQ(cache->Stats().rows_resident, 10u);  // freed now, not aged out
  EXPECT_EQ(cache->Stats().bytes_resident, 10 * kRow);
  EXPECT_EQ(cache->Stats().dropped_rows, 100u);
  EXPECT_TRUE(cache->Contains(other, 3));
  // The old slot is dead for every process, also one attached elsewhere.
  EXPECT_FALSE(ReadRange(*cache, old_slot, 1, 1).ok());
  EXPECT_FALSE(cache->DropDataset(old_slot).ok());
  const pid_t child = ForkChild([&] { return ReadRange(*cache, old_slot, 1, 1).ok() ? 1 : 0; });
  EXPECT_EQ(WaitExitCode(child), 0);
  // The changed file registers anew (here even under the same key): new slot,
  // nothing stale served, the bytes of now.
  const DatasetSlot fresh = cache->RegisterDataset(key, kRow, 1000).value();
  EXPECT_NE(fresh, old_slot);
  ReadRowsStats st;
  ASSERT_TRUE(ReadRange(*cache, fresh, 100, 3, &st).ok());
  EXPECT_EQ(st.hits, 0u);
  EXPECT_EQ(st.loaded, 100u);
}

TEST(DropDataset, RowsInFlightBecomeUnpublishableAndTheirBlocksFree) {
  ScopedSegmentName name;
  name.options().capacity_bytes = 1 << 20;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  const DatasetSlot ds = cache->RegisterDataset({12, 1}, kRow, 100000).value();
  const std::uint64_t capacity_rows = cache->Stats().capacity_bytes / kRow;
  // The prefetcher reserved the whole cache for rows in flight.
  std::vector<RowWithKey> want;
  for (std::uint64_t r = 0; r < capacity_rows; ++r) want.push_back({r, r});
  auto claimed = cache->ClaimForPrefetch(ds, want);
  ASSERT_TRUE(claimed.ok());
  ASSERT_EQ(claimed.value().size(), capacity_rows);
  ASSERT_TRUE(cache->DropDataset(ds).ok());
  EXPECT_EQ(cache->Stats().dropped_rows, capacity_rows);
  // Publishing half of them: declined (their claim was revoked)...
  std::vector<std::byte> data(kRow);
  for (std::uint64_t r = 0; r < capacity_rows / 2; ++r) {
    auto p = cache->Publish(ds, r, data.data(), nullptr);
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(p.value(), PublishOutcome::kNotClaimed);
  }
  // ...and their blocks, like those of the rows never published, are free: a
  // new dataset fills the whole cache again without evicting anything.
  const DatasetSlot next = cache->RegisterDataset({12, 2}, kRow, 100000).value();
  auto again = cache->ClaimForPrefetch(next, want);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value().size(), capacity_rows / 2);  // the unpublished half still holds theirs
  EXPECT_EQ(cache->Stats().evictions, 0u);
  for (std::uint64_t r = capacity_rows / 2; r < capacity_rows; ++r) {
    EXPECT_TRUE(cache->Abandon(ds, r).ok());  // the owner lets go of revoked claims
  }
  auto rest = cache->ClaimForPrefetch(next, want);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest.value().size(), capacity_rows - capacity_rows / 2);
}

TEST(DropDataset, ARowLoadedWhileItsDatasetIsDroppedIsDeliveredNotCached) {
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  const DatasetSlot ds = cache->RegisterDataset({13, 1}, kRow, 1000).value();
  // The file changes while a reader loads its missing rows: the loader (our
  // thread, no cache lock held) sees the change and drops the dataset.
  std::vector<std::uint64_t> rows = {4, 5, 6};
  std::vector<std::byte> out(rows.size() * kRow);
  auto loader = [&](std::span<const std::uint64_t> missing, std::span<std::byte* const> dest) {
    EXPECT_TRUE(cache->DropDataset(ds).ok());
    return PatternLoader{7, kRow, nullptr}(missing, dest);
  };
  ReadRowsStats st;
  ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), loader, nullptr, &st).ok());
  EXPECT_EQ(FirstBadByte(7, rows, out.data(), kRow), -1);  // delivered
  EXPECT_EQ(cache->Stats().rows_resident, 0u);             // not cached
  EXPECT_EQ(cache->Stats().bytes_resident, 0u);
  // No block or descriptor leaked: a new dataset can fill the cache.
  const DatasetSlot next = cache->RegisterDataset({13, 2}, kRow, 100000).value();
  const std::uint64_t capacity_rows = cache->Stats().capacity_bytes / kRow;
  std::vector<RowWithKey> want;
  for (std::uint64_t r = 0; r < capacity_rows; ++r) want.push_back({r, r});
  auto claimed = cache->ClaimForPrefetch(next, want);
  ASSERT_TRUE(claimed.ok());
  EXPECT_EQ(claimed.value().size(), capacity_rows);
}

}  // namespace
}  // namespace prescient::cache
