// NodeCache::ReadRows and the claim/publish interface in one process.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <thread>
#include <vector>

#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::FirstBadByte;
using testing::PatternLoader;
using testing::ScopedSegmentName;

std::unique_ptr<NodeCache> OpenOrDie(const CacheOptions& options) {
  auto cache = NodeCache::Open(options);
  EXPECT_TRUE(cache.ok()) << cache.status().message();
  return cache.ok() ? std::move(cache.value()) : nullptr;
}

// Reads rows [from, to) of `ds` one at a time, as h5py's dset[i] does, and
// checks every row's bytes (PatternLoader with `salt`).
void ReadOneByOne(NodeCache& cache, DatasetSlot ds, std::uint64_t row_bytes, std::uint64_t salt,
                  std::uint64_t from, std::uint64_t to, ReadRowsStats* stats) {
  PatternLoader loader{salt, row_bytes, nullptr};
  std::vector<std::byte> out(row_bytes);
  for (std::uint64_t r = from; r < to; ++r) {
    const std::vector<std::uint64_t> one = {r};
    ASSERT_TRUE(cache.ReadRows(ds, one, out.data(), loader, nullptr, stats).ok());
    ASSERT_EQ(FirstBadByte(salt, one, out.data(), row_bytes), -1) << r;
  }
}

TEST(ReadRows, MissThenHitWithDuplicatesAndAnyOrder) {
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  constexpr std::uint64_t kBytes = 1000;
  const DatasetSlot ds = cache->RegisterDataset({1, 2}, kBytes, 100).value();
  std::atomic<std::uint64_t> loaded{0};
  PatternLoader loader{1, kBytes, &loaded};
  const std::vector<std::uint64_t> rows = {9, 3, 9, 50, 3, 0};
  std::vector<std::byte> out(rows.size() * kBytes);
  ReadRowsStats st;
  ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), loader, nullptr, &st).ok());
  EXPECT_EQ(FirstBadByte(1, rows, out.data(), kBytes), -1);
  EXPECT_EQ(loaded.load(), 4u);  // distinct rows, one loader call
  EXPECT_EQ(st.loaded, 4u);
  EXPECT_EQ(st.hits, 0u);
  EXPECT_GT(st.admit_time.count(), 0);  // keeping the four rows took time

  const std::vector<std::uint64_t> again = {50, 0, 3, 3, 7};
  std::vector<std::byte> out2(again.size() * kBytes);
  ReadRowsStats st2;
  ASSERT_TRUE(cache->ReadRows(ds, again, out2.data(), loader, nullptr, &st2).ok());
  EXPECT_EQ(FirstBadByte(1, again, out2.data(), kBytes), -1);
  EXPECT_EQ(st2.hits, 3u);
  EXPECT_EQ(st2.loaded, 1u);  // row 7
  EXPECT_EQ(loaded.load(), 5u);
  EXPECT_TRUE(cache->Contains(ds, 7));
  EXPECT_FALSE(cache->Contains(ds, 8));
  const CacheStats s = cache->Stats();
  EXPECT_EQ(s.hits, 3u);
  EXPECT_EQ(s.misses, 5u);
  EXPECT_EQ(s.rows_resident, 5u);
  EXPECT_EQ(s.bytes_resident, 5 * kBytes);

  // All hits: nothing loaded, nothing kept, no time spent keeping.
  ReadRowsStats st3;
  ASSERT_TRUE(cache->ReadRows(ds, again, out2.data(), loader, nullptr, &st3).ok());
  EXPECT_EQ(st3.hits, 4u);
  EXPECT_EQ(st3.admit_time.count(), 0);
}

// Whether position k of `out` (rows of `bytes`) holds row `row`'s pattern in
// `parts` and the filler byte everywhere else.
::testing::AssertionResult PartsOnly(const std::vector<std::byte>& out, std::size_t k,
                                     std::uint64_t bytes, std::uint64_t salt, std::uint64_t row,
                                     std::vector<RowPart> parts) {
  constexpr std::byte kFiller{0xa5};
  for (std::uint64_t i = 0; i < bytes; ++i) {
    const bool inside = std::any_of(parts.begin(), parts.end(), [&](const RowPart& p) {
      return i >= p.offset && i < p.offset + p.bytes;
    });
    const std::byte want = inside ? testing::PatternByte(salt, row, i) : kFiller;
    if (out[k * bytes + i] != want) {
      return ::testing::AssertionFailure() << "position " << k << " byte " << i;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(ReadRows, AHitCopiesOnlyThePartsAsked) {
  // Rows of 16 blocks and a bit (a grouped entry of 64 KiB of small rows):
  // a part inside a block, several parts of one row, a part across blocks
  // (pinned, above the under-lock size), a repeated row whose positions ask
  // for different parts, a miss (written whole) and a one-row hit.
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  constexpr std::uint64_t kBytes = (64 << 10) + 100;
  constexpr std::byte kFiller{0xa5};
  const DatasetSlot ds = cache->RegisterDataset({4, 4}, kBytes, 10).value();
  const PatternLoader loader{4, kBytes, nullptr};
  std::vector<std::byte> out(4 * kBytes, kFiller);
  const std::vector<std::uint64_t> first = {2, 5};
  const std::vector<RowPart> first_ranges = {{10, 20}, {0, 8}};
  const std::vector<std::uint32_t> first_of = {0, 1, 2};
  ASSERT_TRUE(
      cache->ReadRows(ds, first, out.data(), loader, nullptr, nullptr, {first_ranges, first_of})
          .ok());
  EXPECT_EQ(FirstBadByte(4, first, out.data(), kBytes), -1);  // misses: whole rows

  std::fill(out.begin(), out.end(), kFiller);
  const std::vector<std::uint64_t> rows = {5, 2, 5, 7};
  const std::vector<RowPart> ranges = {{100, 10},
                                       {5000, 8},              // row 5, first position
                                       {3 * 4096 + 5, 20000},  // row 2
                                       {60000, 5000},          // row 5 again
                                       {0, 1}};                // row 7 (a miss)
  const std::vector<std::uint32_t> of = {0, 2, 3, 4, 5};
  ReadRowsStats st;
  ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), loader, nullptr, &st, {ranges, of}).ok());
  EXPECT_EQ(st.hits, 2u);
  EXPECT_EQ(st.loaded, 1u);
  EXPECT_TRUE(PartsOnly(out, 0, kBytes, 4, 5, {{100, 10}, {5000, 8}, {60000, 5000}}));
  EXPECT_TRUE(PartsOnly(out, 1, kBytes, 4, 2, {{3 * 4096 + 5, 20000}}));
  EXPECT_TRUE(PartsOnly(out, 2, kBytes, 4, 5, {{60000, 5000}}));
  EXPECT_TRUE(PartsOnly(out, 3, kBytes, 4, 7, {{0, kBytes}}));  // loaded: whole

  std::fill(out.begin(), out.end(), kFiller);
  const std::vector<std::uint64_t> one = {7};
  const std::vector<RowPart> tail = {{kBytes - 300, 300}, {7, 3}};
  const std::vector<std::uint32_t> one_of = {0, 2};
  ReadRowsStats one_st;
  ASSERT_TRUE(cache->ReadRows(ds, one, out.data(), loader, nullptr, &one_st, {tail, one_of}).ok());
  EXPECT_EQ(one_st.hits, 1u);
  EXPECT_TRUE(PartsOnly(out, 0, kBytes, 4, 7, {{7, 3}, {kBytes - 300, 300}}));

  const std::vector<RowPart> past_end = {{kBytes - 300, 301}};
  const std::vector<std::uint32_t> past_of = {0, 1};
  EXPECT_EQ(
      cache->ReadRows(ds, one, out.data(), loader, nullptr, nullptr, {past_end, past_of}).code(),
      Status::Code::kInvalidArgument);
  EXPECT_EQ(cache->ReadRows(ds, rows, out.data(), loader, nullptr, nullptr, {tail, one_of}).code(),
            Status::Code::kInvalidArgument);
  const std::vector<std::uint32_t> backwards = {1, 0};
  EXPECT_EQ(
      cache->ReadRows(ds, one, out.data(), loader, nullptr, nullptr, {tail, backwards}).code(),
      Status::Code::kInvalidArgument);
}

// A 3-D patch's part of a z-plane: 128 pieces of 512 bytes, 1,536 apart,
// crossing blocks within pieces and between them, copied in one walk of the
// row's chain (SegmentTables::CopyOutPinnedParts); and the same pieces in
// descending order, which walk it again from its head.
TEST(ReadRows, ManyAscendingPiecesOfARowAreCopiedExactly) {
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  constexpr std::uint64_t kBytes = 384 * 512 + 1000;  // 49 blocks and a bit
  constexpr std::byte kFiller{0xa5};
  const DatasetSlot ds = cache->RegisterDataset({5, 5}, kBytes, 4).value();
  const PatternLoader loader{5, kBytes, nullptr};
  std::vector<std::byte> out(2 * kBytes, kFiller);
  const std::vector<std::uint64_t> rows = {1, 3};
  ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), loader, nullptr, nullptr).ok());

  std::vector<RowPart> pieces;
  for (std::uint64_t k = 0; k < 128; ++k) pieces.push_back({1000 + 333 + k * 1536, 512});
  std::vector<RowPart> ranges = pieces;
  ranges.insert(ranges.end(), pieces.rbegin(), pieces.rend());
  const std::vector<std::uint32_t> of = {0, 128, 256};
  std::fill(out.begin(), out.end(), kFiller);
  ReadRowsStats st;
  ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), loader, nullptr, &st, {ranges, of}).ok());
  EXPECT_EQ(st.hits, 2u);
  EXPECT_TRUE(PartsOnly(out, 0, kBytes, 5, 1, pieces));
  EXPECT_TRUE(PartsOnly(out, 1, kBytes, 5, 3, pieces));
}

// A read's misses are written into the segment together (SegmentTables::
// CopyInOwnedRows): rows of 4.5 blocks, whose chains follow each other with
// the unused tail of a block between them, and chains that are not adjacent
// (blocks freed between resident rows). Every byte read back is right.
TEST(ReadRows, RowsOfPartBlocksLoadedTogetherReadBackExactly) {
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  const std::uint64_t kBytes = name.options().block_bytes * 9 / 2;  // DeepCAM's 18 KiB rows
  constexpr std::uint64_t kRows = 192;
  const DatasetSlot a = cache->RegisterDataset({7, 7}, kBytes, kRows).value();
  const DatasetSlot b = cache->RegisterDataset({7, 8}, kBytes, kRows).value();
  PatternLoader loader_a{7, kBytes, nullptr}, loader_b{8, kBytes, nullptr};
  std::vector<std::byte> out(kRows * kBytes);
  // One row at a time, the two datasets in turn: their chains interleave.
  for (std::uint64_t r = 0; r < kRows / 4; ++r) {
    const std::vector<std::uint64_t> ra = {2 * r}, rb = {r};
    ASSERT_TRUE(cache->ReadRows(a, ra, out.data(), loader_a, nullptr, nullptr).ok());
    ASSERT_TRUE(cache->ReadRows(b, rb, out.data(), loader_b, nullptr, nullptr).ok());
  }
  ASSERT_TRUE(cache->DropDataset(b).ok());  // holes between a's rows
  std::vector<std::uint64_t> all(kRows);
  std::iota(all.begin(), all.end(), 0);
  ReadRowsStats mixed;
  ASSERT_TRUE(cache->ReadRows(a, all, out.data(), loader_a, nullptr, &mixed).ok());
  EXPECT_EQ(mixed.hits, kRows / 4);
  EXPECT_EQ(mixed.loaded, kRows - kRows / 4);  // into the holes, then into fresh blocks
  EXPECT_EQ(FirstBadByte(7, all, out.data(), kBytes), -1);
  std::fill(out.begin(), out.end(), std::byte{0});
  ReadRowsStats hits;
  ASSERT_TRUE(cache->ReadRows(a, all, out.data(), loader_a, nullptr, &hits).ok());
  EXPECT_EQ(hits.hits, kRows);
  EXPECT_EQ(FirstBadByte(7, all, out.data(), kBytes), -1);
}

TEST(ReadRows, WithoutANextUseOrderAFullCacheKeepsOneMissInEight) {
  // An 8 MiB cache and 16 MiB of rows read in the same order twice (a loader
  // without shuffling). LRU admitting every miss would evict each row just
  // before its next use and hit nothing in the second pass.
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  constexpr std::uint64_t kBytes = 64 << 10, kRows = 256;
  const DatasetSlot ds = cache->RegisterDataset({4, 4}, kBytes, kRows).value();
  ReadRowsStats first, second;
  ASSERT_NO_FATAL_FAILURE(ReadOneByOne(*cache, ds, kBytes, 4, 0, kRows, &first));
  ASSERT_NO_FATAL_FAILURE(ReadOneByOne(*cache, ds, kBytes, 4, 0, kRows, &second));
  const std::uint64_t resident = cache->Stats().rows_resident;
  EXPECT_GT(resident, 64u);
  EXPECT_LT(resident, kRows / 2);
  // First pass: the rows that fit, then one in eight of the rest.
  EXPECT_EQ(first.loaded + first.uncached, kRows);
  EXPECT_GT(first.not_admitted, (kRows - resident) / 2);
  EXPECT_EQ(first.not_admitted, first.uncached);
  // Second pass: most of what was kept is still there when read again.
  EXPECT_GT(second.hits, resident / 2);
}

TEST(ReadRows, AFullCacheKeepsOrDeclinesAReadsMissesTogether) {
  // Samples of 16 rows each (a dataset per sample stored as 4 KiB entries),
  // read whole into a full 8 MiB cache: one read in eight keeps all its rows,
  // the others none. Kept row by row, each sample would keep about two of its
  // rows and leave the rest as scattered misses.
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  constexpr std::uint64_t kBytes = 4096, kPerSample = 16, kSamples = 512;  // 32 MiB
  const DatasetSlot ds = cache->RegisterDataset({9, 9}, kBytes, kPerSample * kSamples).value();
  const PatternLoader loader{9, kBytes, nullptr};
  std::vector<std::byte> out(kPerSample * kBytes);
  std::uint64_t kept_whole = 0, declined_whole = 0, mixed = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (std::uint64_t s = 0; s < kSamples; ++s) {
      std::vector<std::uint64_t> rows(kPerSample);
      std::iota(rows.begin(), rows.end(), s * kPerSample);
      ReadRowsStats st;
      ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), loader, nullptr, &st).ok());
      ASSERT_EQ(FirstBadByte(9, rows, out.data(), kBytes), -1) << s;
      if (pass == 0) continue;
      // Second pass: a sample is all hits or all misses, but for the one that
      // filled the cache and the few that lost rows to LRU eviction since.
      if (st.hits != 0 && st.hits != kPerSample) ++mixed;
      if (st.hits == 0 && st.not_admitted == kPerSample) ++declined_whole;
      if (st.not_admitted == 0 && st.hits == 0) ++kept_whole;
    }
  }
  EXPECT_LE(mixed, kSamples / 32);
  EXPECT_GT(declined_whole, kSamples / 2);
  EXPECT_GT(kept_whole, 0u);
}

TEST(ReadRows, AReaderCloseBehindAnotherGetsTheRowsAdmittedAtTheirSecondMiss) {
  // The cache is full of rows 0..255's survivors; readers A, B and C then read rows 300..339 in
  // the same order, one after the other. A's misses are mostly declined; B misses them again
  // soon after, so they are admitted; C finds them.
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  constexpr std::uint64_t kBytes = 64 << 10, kRows = 512;
  const DatasetSlot ds = cache->RegisterDataset({5, 5}, kBytes, kRows).value();
  ReadRowsStats fill, a, b, c;
  ASSERT_NO_FATAL_FAILURE(ReadOneByOne(*cache, ds, kBytes, 5, 0, 256, &fill));
  ASSERT_GT(fill.not_admitted, 0u);  // full
  ASSERT_NO_FATAL_FAILURE(ReadOneByOne(*cache, ds, kBytes, 5, 300, 340, &a));
  ASSERT_NO_FATAL_FAILURE(ReadOneByOne(*cache, ds, kBytes, 5, 300, 340, &b));
  ASSERT_NO_FATAL_FAILURE(ReadOneByOne(*cache, ds, kBytes, 5, 300, 340, &c));
  EXPECT_GT(a.not_admitted, 30u);
  EXPECT_LT(b.not_admitted, 5u);  // declined again within the window: admitted
  EXPECT_GE(c.hits, 35u);
}

TEST(ReadRows, SeveralRowSizesShareTheSegment) {
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  const std::uint64_t sizes[] = {1, 4096, 4097, 64 << 10, 100000, 300};
  std::vector<DatasetSlot> slots;
  for (std::uint64_t i = 0; i < std::size(sizes); ++i) {
    slots.push_back(cache->RegisterDataset({i, 77}, sizes[i], 40).value());
  }
  for (int round = 0; round < 2; ++round) {
    for (std::uint64_t i = 0; i < std::size(sizes); ++i) {
      const std::vector<std::uint64_t> rows = {39, 0, 17, 18};
      std::vector<std::byte> out(rows.size() * sizes[i]);
      ReadRowsStats st;
      ASSERT_TRUE(cache
                      ->ReadRows(slots[i], rows, out.data(),
                                 PatternLoader{i + 10, sizes[i], nullptr}, nullptr, &st)
                      .ok());
      EXPECT_EQ(FirstBadByte(i + 10, rows, out.data(), sizes[i]), -1) << sizes[i];
      EXPECT_EQ(round == 0 ? st.loaded : st.hits, 4u) << sizes[i];
    }
  }
  EXPECT_EQ(cache->RowBytes(slots[3]), 64u << 10);
}

TEST(ReadRows, ErrorsAreReportedAndClaimsReleased) {
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  const DatasetSlot ds = cache->RegisterDataset({4, 4}, 64, 10).value();
  EXPECT_FALSE(cache->RegisterDataset({4, 4}, 65, 10).ok());  // row size differs
  std::vector<std::byte> out(64);
  const std::uint64_t row = 3;
  auto failing = [](std::span<const std::uint64_t>, std::span<std::byte* const>) {
    return Status::IoError("disk on fire");
  };
  Status s = cache->ReadRows(ds, {&row, 1}, out.data(), failing, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "disk on fire");
  auto throwing = [](std::span<const std::uint64_t>, std::span<std::byte* const>) -> Status {
    throw std::runtime_error("boom");
  };
  s = cache->ReadRows(ds, {&row, 1}, out.data(), throwing, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("boom"), std::string::npos);
  EXPECT_FALSE(cache->Contains(ds, 3));
  // The claim was released: a later read loads it.
  ASSERT_TRUE(
      cache->ReadRows(ds, {&row, 1}, out.data(), PatternLoader{5, 64, nullptr}, nullptr).ok());
  EXPECT_EQ(FirstBadByte(5, {&row, 1}, out.data(), 64), -1);
  const std::uint64_t bad_row = 10;
  EXPECT_FALSE(
      cache->ReadRows(ds, {&bad_row, 1}, out.data(), PatternLoader{5, 64, nullptr}, nullptr).ok());
  EXPECT_FALSE(
      cache->ReadRows(12345, {&row, 1}, out.data(), PatternLoader{5, 64, nullptr}, nullptr).ok());
}

TEST(ClaimPublish, PrefetcherProtocol) {
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  constexpr std::uint64_t kBytes = 5000;
  const DatasetSlot ds = cache->RegisterDataset({8, 8}, kBytes, 100).value();
  const std::vector<std::uint64_t> want = {5, 1, 5, 2, 3};
  auto claimed = cache->Claim(ds, want, nullptr);
  ASSERT_TRUE(claimed.ok());
  EXPECT_EQ(claimed.value(), (std::vector<std::uint64_t>{1, 2, 3, 5}));
  // Already claimed: nothing more to claim.
  EXPECT_TRUE(cache->Claim(ds, want, nullptr).value().empty());
  std::vector<std::byte> row(kBytes);
  for (std::uint64_t r : {1, 2, 5}) {
    testing::FillRow(9, r, row.data(), kBytes);
    auto p = cache->Publish(ds, r, row.data(), nullptr);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p.value(), PublishOutcome::kStored);
  }
  EXPECT_TRUE(cache->Abandon(ds, 3).ok());
  EXPECT_FALSE(cache->Abandon(ds, 3).ok());
  EXPECT_EQ(cache->Publish(ds, 3, row.data(), nullptr).value(), PublishOutcome::kNotClaimed);
  EXPECT_EQ(cache->Publish(ds, 40, row.data(), nullptr).value(), PublishOutcome::kNotClaimed);
  const std::vector<std::uint64_t> read = {5, 3, 1, 2};
  std::vector<std::byte> out(read.size() * kBytes);
  ReadRowsStats st;
  ASSERT_TRUE(
      cache->ReadRows(ds, read, out.data(), PatternLoader{9, kBytes, nullptr}, nullptr, &st).ok());
  EXPECT_EQ(FirstBadByte(9, read, out.data(), kBytes), -1);
  EXPECT_EQ(st.hits, 3u);
  EXPECT_EQ(st.loaded, 1u);
}

TEST(ReadRows, ReportsTimeInItsOwnLoaderApartFromWaits) {
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  const DatasetSlot ds = cache->RegisterDataset({1, 5}, 100, 100).value();
  auto slow = [](std::span<const std::uint64_t> rows, std::span<std::byte* const> dest) {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    return PatternLoader{1, 100, nullptr}(rows, dest);
  };
  const std::vector<std::uint64_t> rows = {1, 2};
  std::vector<std::byte> out(rows.size() * 100);
  ReadRowsStats st;
  ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), slow, nullptr, &st).ok());
  EXPECT_GE(st.load_time, std::chrono::milliseconds(60));
  EXPECT_EQ(st.wait_time, std::chrono::nanoseconds(0));
  ReadRowsStats hit;
  ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), slow, nullptr, &hit).ok());
  EXPECT_EQ(hit.hits, 2u);
  EXPECT_EQ(hit.load_time, std::chrono::nanoseconds(0));
  // A failing loader's time counts too.
  auto failing = [](std::span<const std::uint64_t>, std::span<std::byte* const>) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return Status::IoError("gone");
  };
  const std::uint64_t row = 9;
  ReadRowsStats failed;
  EXPECT_FALSE(cache->ReadRows(ds, {&row, 1}, out.data(), failing, nullptr, &failed).ok());
  EXPECT_GE(failed.load_time, std::chrono::milliseconds(20));
}

TEST(NodeStep, OnlyIncreases) {
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(cache->NodeStep(), 0u);
  cache->AdvanceNodeStep(10);
  cache->AdvanceNodeStep(4);
  EXPECT_EQ(cache->NodeStep(), 10u);
}

}  // namespace
}  // namespace prescient::cache
