// SegmentTables on a private in-memory segment: index, heap, allocator,
// admission and repair, without processes or locks.
#include "cache/core/segment_tables.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "cache/core/cache_options.h"
#include "cache/core/eviction_keys.h"
#include "cache/core/process_identity.h"

namespace prescient::cache::detail {
namespace {

class TablesTest : public ::testing::Test {
 protected:
  void Build(std::uint64_t bytes, std::uint32_t block) {
    auto plan = PlanLayout(bytes, block, 64, 0);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    memory_.reset(
        static_cast<unsigned char*>(std::aligned_alloc(4096, plan.value().segment_bytes)));
    std::fill_n(memory_.get(), plan.value().segment_bytes, 0);
    InitializeSegment(memory_.get(), plan.value(), false);
    tables_ = std::make_unique<SegmentTables>(memory_.get());
    tables_->AssumeExclusive();
    auto slot = tables_->Attach(SelfIdentity(), 0);
    ASSERT_TRUE(slot.ok());
    slot_ = slot.value();
  }
  // Adds a Ready row with `key`; returns its entry.
  std::uint32_t AddReady(DatasetSlot ds, std::uint64_t row, std::uint64_t key) {
    SegmentTables& t = *tables_;
    t.AssumeExclusive();  // white-box: no other user
    const std::uint32_t e = t.Claim(ds, row, slot_);
    EXPECT_NE(e, kNone);
    EXPECT_TRUE(t.MakeRoom(t.dataset(ds).blocks_per_row, key));
    t.entry(e).first_block = t.AllocChain(t.dataset(ds).blocks_per_row);
    t.MarkReady(e, key);
    return e;
  }
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::unique_ptr<unsigned char, Free> memory_;
  std::unique_ptr<SegmentTables> tables_;
  std::uint16_t slot_ = 0;
};

TEST_F(TablesTest, IndexFindsEverythingAfterRandomInsertsAndErases) {
  Build(4 << 20, 256);
  SegmentTables& t = *tables_;
  t.AssumeExclusive();  // white-box: no other user
  auto ds = t.FindOrAddDataset({1, 2}, 100, 1 << 20);
  ASSERT_TRUE(ds.ok());
  std::mt19937_64 rng(7);
  std::set<std::uint64_t> present;
  std::vector<std::uint32_t> entry_of(1 << 20, kNone);
  for (int step = 0; step < 20000; ++step) {
    const std::uint64_t row = rng() % 5000;
    if (present.count(row) != 0) {
      t.Release(entry_of[row]);
      present.erase(row);
    } else {
      const std::uint32_t e = t.Claim(ds.value(), row, slot_);
      ASSERT_NE(e, kNone);
      entry_of[row] = e;
      present.insert(row);
    }
  }
  for (std::uint64_t row = 0; row < 5000; ++row) {
    const std::uint32_t e = t.Find(ds.value(), row);
    if (present.count(row) != 0) {
      ASSERT_EQ(e, entry_of[row]) << row;
    } else {
      ASSERT_EQ(e, kNone) << row;
    }
  }
  EXPECT_EQ(t.header().used_entries, present.size());
}

TEST_F(TablesTest, DatasetRowSizeMismatchIsRejected) {
  Build(1 << 20, 4096);
  SegmentTables& t = *tables_;
  t.AssumeExclusive();  // white-box: no other user
  auto a = t.FindOrAddDataset({5, 6}, 1000, 10);
  auto b = t.FindOrAddDataset({5, 6}, 1000, 10);
  auto c = t.FindOrAddDataset({5, 6}, 1001, 10);
  auto d = t.FindOrAddDataset({5, 7}, 1001, 10);
  ASSERT_TRUE(a.ok() && b.ok() && d.ok());
  EXPECT_EQ(a.value(), b.value());
  EXPECT_NE(a.value(), d.value());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("1000-byte rows"), std::string::npos);
}

TEST_F(TablesTest, ANewSegmentHandsOutItsZeroedEntriesInOrderThenReusesFreedOnes) {
  Build(1 << 20, 4096);
  SegmentTables& t = *tables_;
  t.AssumeExclusive();                      // white-box: no other user
  EXPECT_EQ(t.header().fresh_entries, 0u);  // nothing written at creation
  EXPECT_EQ(t.header().free_entry_head, kNone);
  auto ds = t.FindOrAddDataset({1, 1}, 100, 100);
  ASSERT_TRUE(ds.ok());
  const std::uint32_t a = t.Claim(ds.value(), 10, slot_);
  const std::uint32_t b = t.Claim(ds.value(), 11, slot_);
  const std::uint32_t c = t.Claim(ds.value(), 12, slot_);
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 1u);
  EXPECT_EQ(c, 2u);
  EXPECT_EQ(t.header().fresh_entries, 3u);
  EXPECT_EQ(t.Find(ds.value(), 11), b);  // an empty bucket is zero, an entry is found
  t.Release(b);
  EXPECT_EQ(t.Find(ds.value(), 11), kNone);
  EXPECT_EQ(t.Find(ds.value(), 12), c);          // backward-shift delete kept the rest
  EXPECT_EQ(t.Claim(ds.value(), 13, slot_), b);  // the freed entry first
  EXPECT_EQ(t.header().fresh_entries, 3u);
  // Every entry can be handed out, then none.
  std::uint64_t claimed = 3;
  while (t.Claim(ds.value(), 100 + claimed, slot_) != kNone) ++claimed;
  EXPECT_EQ(claimed, t.geometry().num_entries);
  EXPECT_EQ(t.header().fresh_entries, t.geometry().num_entries);
}

TEST_F(TablesTest, DatasetTableStopsAtSevenEighthsAndStillFindsEveryKey) {
  Build(1 << 20, 4096);  // a table of 64 records
  SegmentTables& t = *tables_;
  t.AssumeExclusive();  // white-box: no other user
  std::vector<DatasetSlot> slots;
  for (std::uint64_t k = 0; k < 56; ++k) {
    auto ds = t.FindOrAddDataset({k, k * 7 + 1}, 100, 10);
    ASSERT_TRUE(ds.ok()) << k << ": " << ds.status().message();
    slots.push_back(ds.value());
  }
  auto refused = t.FindOrAddDataset({999, 1}, 100, 10);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("dataset table full"), std::string::npos);
  // Every key registered before the table filled is still found.
  for (std::uint64_t k = 0; k < 56; ++k) {
    auto again = t.FindOrAddDataset({k, k * 7 + 1}, 100, 10);
    ASSERT_TRUE(again.ok()) << k;
    EXPECT_EQ(again.value(), slots[k]);
  }
}

TEST(DatasetTableSize, OneRecordPer2KiBBetween4096And262144) {
  EXPECT_EQ(DatasetTableSize(8ull << 20), 4096u);
  EXPECT_EQ(DatasetTableSize(64ull << 20), 32768u);
  EXPECT_EQ(DatasetTableSize(512ull << 20), 262144u);
  EXPECT_EQ(DatasetTableSize(64ull << 30), 262144u);
}

TEST_F(TablesTest, HeapEvictsLargestKeyAndRespectsAdmission) {
  Build(1 << 20, 4096);
  SegmentTables& t = *tables_;
  t.AssumeExclusive();  // white-box: no other user
  const DatasetSlot ds = t.FindOrAddDataset({1, 1}, 4096, 100000).value();
  const std::uint64_t blocks = t.header().num_blocks;
  // Fill with keys 1000 + row (row 0 needed soonest).
  for (std::uint64_t row = 0; row < blocks; ++row) AddReady(ds, row, 1000 + row);
  EXPECT_EQ(t.header().free_blocks, 0u);
  // A row needed at 500 displaces the furthest (row blocks-1).
  EXPECT_TRUE(t.MakeRoom(1, 500));
  EXPECT_EQ(t.Find(ds, blocks - 1), kNone);
  EXPECT_NE(t.Find(ds, blocks - 2), kNone);
  t.FreeChain(t.AllocChain(1), 1);  // (space was freed: allocate and give back)
  AddReady(ds, 99999, 500);
  // A row needed later than everything resident is not admitted, and nothing is evicted.
  EXPECT_FALSE(t.MakeRoom(1, 1000 + blocks + 5));
  EXPECT_EQ(SegmentTables::Load(t.header().counters.rows_resident), blocks);
  EXPECT_EQ(t.header().free_blocks, 0u);
}

TEST_F(TablesTest, PinnedRowIsNeverEvicted) {
  Build(1 << 20, 4096);
  SegmentTables& t = *tables_;
  t.AssumeExclusive();  // white-box: no other user
  const DatasetSlot ds = t.FindOrAddDataset({1, 1}, 4096, 100000).value();
  const std::uint64_t blocks = t.header().num_blocks;
  for (std::uint64_t row = 0; row < blocks; ++row) AddReady(ds, row, 1000 + row);
  const std::uint32_t best_victim = t.Find(ds, blocks - 1);
  ASSERT_EQ(t.HeapTop(), best_victim);
  ASSERT_GE(t.Pin(slot_, best_victim), 0);
  EXPECT_TRUE(t.MakeRoom(1, 5));
  EXPECT_EQ(t.Find(ds, blocks - 1), best_victim);  // pinned: kept
  EXPECT_EQ(t.Find(ds, blocks - 2), kNone);        // the next best went instead
  t.Unpin(slot_, best_victim);
  EXPECT_EQ(t.HeapTop(), best_victim);
}

TEST_F(TablesTest, FinishedPinsAreDroppedLazilyByWhoeverNeedsThemGone) {
  Build(1 << 20, 4096);
  SegmentTables& t = *tables_;
  t.AssumeExclusive();  // white-box: no other user
  const DatasetSlot ds = t.FindOrAddDataset({1, 1}, 4096, 100000).value();
  const std::uint64_t blocks = t.header().num_blocks;
  for (std::uint64_t row = 0; row < blocks; ++row) AddReady(ds, row, 1000 + row);
  const std::uint32_t best_victim = t.Find(ds, blocks - 1);
  const int pin = t.Pin(slot_, best_victim);
  ASSERT_GE(pin, 0);
  t.PinDone(slot_, pin);  // the reader's copy-out ended; no second lock round
  EXPECT_EQ(t.entry(best_victim).pins, 1u);
  EXPECT_TRUE(t.MakeRoom(1, 5));  // needs that row gone: drops the finished pin first
  EXPECT_EQ(t.Find(ds, blocks - 1), kNone);
  EXPECT_NE(t.Find(ds, blocks - 2), kNone);
  EXPECT_EQ(t.attach(slot_).pins_used, 0u);
  // A full pin table makes room from its finished pins.
  std::vector<int> pins;
  for (std::uint32_t i = 0; i < kPinsPerAttach; ++i) {
    pins.push_back(t.Pin(slot_, t.Find(ds, i)));
    ASSERT_GE(pins.back(), 0);
  }
  EXPECT_LT(t.Pin(slot_, t.Find(ds, 100)), 0);
  t.PinDone(slot_, pins[3]);
  EXPECT_EQ(t.Pin(slot_, t.Find(ds, 100)), pins[3]);
  EXPECT_EQ(t.entry(t.Find(ds, 3)).pins, 0u);
}

TEST_F(TablesTest, KeyOrderNeverStaleUnknownScheduled) {
  EXPECT_GT(kNeverKey, kStaleKey);
  EXPECT_GT(kStaleKey, LruKey(0));
  EXPECT_GT(LruKey(1), LruKey(2));  // older access is evicted first
  EXPECT_GT(LruKey(1u << 30), ScheduledKey(NextUseOracle::kMaxStep));
  EXPECT_EQ(ScheduledKey(NextUseOracle::kNever), kNeverKey);
  Build(1 << 20, 4096);
  SegmentTables& t = *tables_;
  t.AssumeExclusive();  // white-box: no other user
  const DatasetSlot ds = t.FindOrAddDataset({1, 1}, 4096, 1000).value();
  const std::uint32_t soon = AddReady(ds, 1, 50);
  const std::uint32_t late = AddReady(ds, 2, 80);
  EXPECT_EQ(t.HeapTop(), late);
  // Row 1's use at step 50 passed unread: the sweep makes it the first victim.
  for (std::uint64_t i = 0; i < t.header().num_entries; ++i) t.SweepStale(60, 1);
  EXPECT_EQ(t.entry(soon).key, kStaleKey);
  EXPECT_EQ(t.HeapTop(), soon);
}

TEST_F(TablesTest, RepairRebuildsDerivedStateAndDropsBrokenEntries) {
  Build(2 << 20, 4096);
  SegmentTables& t = *tables_;
  t.AssumeExclusive();  // white-box: no other user
  const DatasetSlot ds = t.FindOrAddDataset({3, 3}, 3 * 4096 + 10, 1000).value();  // 4 blocks
  for (std::uint64_t row = 0; row < 20; ++row) AddReady(ds, row, 100 + row);
  const std::uint64_t free_before = t.header().free_blocks;
  // Simulate a process that died mid-way: blocks popped off the free list but
  // never recorded, the index wiped, the heap truncated, a bogus pin count,
  // and one entry with a broken chain.
  t.AllocChain(3);
  t.header().heap_size = 3;
  const std::uint32_t broken = t.Find(ds, 7);
  const std::uint32_t other = t.Find(ds, 8);
  std::fill_n(reinterpret_cast<std::uint32_t*>(reinterpret_cast<unsigned char*>(&t.header()) +
                                               t.header().off_buckets),
              t.header().hash_buckets, kNone);
  t.entry(broken).first_block = kNone - 1;
  t.entry(other).pins = 9;
  t.Repair();
  std::uint64_t resident = 0;
  for (std::uint64_t row = 0; row < 20; ++row) {
    const std::uint32_t e = t.Find(ds, row);
    if (e == kNone) continue;
    ++resident;
    EXPECT_EQ(t.entry(e).pins, 0u);
    EXPECT_NE(t.entry(e).heap_pos, kNone);
  }
  EXPECT_EQ(resident, 19u);
  EXPECT_EQ(t.Find(ds, 7), kNone);
  EXPECT_EQ(t.entry(broken).state, kEntryFree);
  EXPECT_EQ(t.header().heap_size, 19u);
  // The 3 leaked blocks are free again, and so are the dropped row's 4.
  EXPECT_EQ(t.header().free_blocks, free_before + 4);
  EXPECT_EQ(SegmentTables::Load(t.header().counters.rows_resident), 19u);
  EXPECT_EQ(t.entry(t.HeapTop()).key, 119u);
  // Everything still works: evict all, the free list is whole.
  EXPECT_TRUE(t.MakeRoom(static_cast<std::uint32_t>(t.header().num_blocks), 0));
  EXPECT_EQ(t.header().free_blocks, t.header().num_blocks);
}

TEST_F(TablesTest, RevokedEntriesKeepTheirBlocksWhileOwnedOrPinned) {
  Build(1 << 20, 4096);
  SegmentTables& t = *tables_;
  t.AssumeExclusive();  // white-box: no other user
  const DatasetSlot ds = t.FindOrAddDataset({5, 5}, 4096, 1000).value();
  const std::uint32_t pinned = AddReady(ds, 1, 10);
  const std::uint32_t plain = AddReady(ds, 2, 10);
  ASSERT_GE(t.Pin(slot_, pinned), 0);
  // A claim with reserved blocks, being written by its owner.
  const std::uint32_t claim = t.Claim(ds, 3, slot_);
  t.entry(claim).first_block = t.AllocChain(1);
  const std::uint64_t free_before = t.header().free_blocks;
  EXPECT_EQ(t.DropDataset(ds), 3u);
  EXPECT_EQ(t.entry(plain).state, kEntryFree);  // nobody held it: freed at once
  EXPECT_EQ(t.header().free_blocks, free_before + 1);
  EXPECT_EQ(t.entry(pinned).state, kEntryRevoked);
  EXPECT_EQ(t.entry(claim).state, kEntryRevoked);
  EXPECT_EQ(t.Find(ds, 1), kNone);              // invisible to lookups...
  EXPECT_EQ(t.FindClaim(ds, 3, slot_), claim);  // ...but its owner finds it
  EXPECT_EQ(SegmentTables::Load(t.header().counters.rows_resident), 0u);
  // Repair keeps both (owner alive, pin recorded) with their blocks.
  t.Repair();
  EXPECT_EQ(t.entry(pinned).state, kEntryRevoked);
  EXPECT_EQ(t.entry(claim).state, kEntryRevoked);
  EXPECT_EQ(t.header().free_blocks, free_before + 1);
  // The last copy-out ends: freed. The owner lets go: freed.
  t.Unpin(slot_, pinned);
  EXPECT_EQ(t.entry(pinned).state, kEntryFree);
  t.DisownRevoked(claim);
  EXPECT_EQ(t.entry(claim).state, kEntryFree);
  EXPECT_EQ(t.header().free_blocks, free_before + 3);
  // A revoked claim whose owner died is freed by repair.
  const DatasetSlot ds2 = t.FindOrAddDataset({5, 6}, 4096, 1000).value();
  const std::uint32_t orphan = t.Claim(ds2, 9, slot_);
  t.entry(orphan).first_block = t.AllocChain(1);
  t.Revoke(orphan);
  t.entry(orphan).owner = 999;  // an attach slot nobody holds
  t.Repair();
  EXPECT_EQ(t.entry(orphan).state, kEntryFree);
  EXPECT_EQ(t.header().free_blocks, free_before + 3);
}

}  // namespace
}  // namespace prescient::cache::detail
