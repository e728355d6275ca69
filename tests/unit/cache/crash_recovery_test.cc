// SIGKILL in the middle of things: a process holding the segment lock with
// half-done updates, a process loading rows others wait for, a leader.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "cache/core/segment_file.h"
#include "cache/core/segment_tables.h"
#include "cache/core/shm_sync.h"
#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::FirstBadByte;
using testing::ForkChild;
using testing::PatternLoader;
using testing::ScopedSegmentName;
using testing::SharedObject;
using testing::WaitExitCode;
using testing::WaitFor;
using Clock = std::chrono::steady_clock;

TEST(CrashRecovery, KilledWhileHoldingTheLockWithHalfDoneUpdates) {
  ScopedSegmentName name;
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  constexpr std::uint64_t kBytes = 10000;  // 3 blocks
  const DatasetSlot ds = cache.value()->RegisterDataset({1, 9}, kBytes, 100).value();
  std::vector<std::uint64_t> rows = {1, 2, 3, 4, 5, 6};
  std::vector<std::byte> out(rows.size() * kBytes);
  ASSERT_TRUE(cache.value()
                  ->ReadRows(ds, rows, out.data(), PatternLoader{2, kBytes, nullptr}, nullptr)
                  .ok());

  auto* state = SharedObject<std::atomic<int>>();
  const NodeCache* cache_ptr = cache.value().get();
  const pid_t child = ForkChild([&] {
    detail::MappedSegment seg;
    if (!testing::MapSegmentOf(*cache_ptr, &seg)) return 1;
    detail::SegmentTables t(seg.base());
    if (detail::AcquireSharedLock(&t.raw_header().lock, std::chrono::seconds(5)) !=
        detail::LockOutcome::kLocked) {
      return 2;
    }
    t.AssumeExclusive();  // locked above, and never released: this process dies holding it
    // Half-done work: blocks popped but never owned, the heap cut short, a
    // row's index slot lost.
    t.AllocChain(7);
    t.header().heap_size = 1;
    t.IndexErase(t.Find(ds, 4));
    state->store(1);
    for (;;) pause();
  });
  ASSERT_TRUE(WaitFor(*state, 1, std::chrono::seconds(10)));
  kill(child, SIGKILL);  // not reaped yet: the lock's owner death is what matters

  const auto t0 = Clock::now();
  rows = {4, 2, 7};
  ReadRowsStats st;
  ASSERT_TRUE(cache.value()
                  ->ReadRows(ds, rows, out.data(), PatternLoader{2, kBytes, nullptr}, nullptr, &st)
                  .ok());
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));
  EXPECT_EQ(FirstBadByte(2, rows, out.data(), kBytes), -1);
  EXPECT_EQ(st.hits, 2u);  // rows 2 and 4 survived; the index was rebuilt
  EXPECT_EQ(cache.value()->Stats().recoveries, 1u);
  EXPECT_EQ(WaitExitCode(child), 128 + SIGKILL);

  // Nothing leaked: resident blocks + free blocks = all blocks.
  detail::MappedSegment seg;
  ASSERT_TRUE(testing::MapSegmentOf(*cache.value(), &seg));
  detail::SegmentTables t(seg.base());
  t.AssumeExclusive();  // everyone else is idle: a snapshot for the check
  EXPECT_EQ(t.header().free_blocks + 7 * 3, t.header().backed_blocks);
  EXPECT_EQ(t.header().heap_size, 7u);
}

// A corrupt extent (a backed-block count or an offset rewritten past the
// segment) must never grow the segment file: fallocate would fill the node's
// memory before it failed. Found by the live-corruption fuzz test, where the
// header changed between repair's check and its backing loop.
TEST(CrashRecovery, BackingNeverGrowsTheSegmentPastItsMapping) {
  ScopedSegmentName name;
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  detail::MappedSegment seg;
  ASSERT_TRUE(testing::MapSegmentOf(*cache.value(), &seg));
  const detail::FileBacking backing(seg);
  EXPECT_TRUE(backing.Back(seg.geometry.off_data, 4096).ok());
  EXPECT_FALSE(backing.Back(seg.size(), 4096).ok());
  EXPECT_FALSE(backing.Back(seg.geometry.off_data, std::uint64_t{1} << 40).ok());
  EXPECT_FALSE(backing.Back(~std::uint64_t{0} - 100, 4096).ok());  // offset + length wraps
  struct stat st{};
  ASSERT_EQ(fstat(seg.fd.get(), &st), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), seg.size());

  // Repair with a recorded extent far past the data area backs at most the data area.
  detail::SegmentTables t(seg.base(), seg.geometry, &backing);
  ASSERT_EQ(detail::AcquireSharedLock(&t.raw_header().lock, std::chrono::seconds(5)),
            detail::LockOutcome::kLocked);
  t.AssumeExclusive();
  t.header().backed_blocks = ~std::uint64_t{0} >> 1;
  t.Repair(/*verify_backing=*/true);
  EXPECT_LE(t.header().backed_blocks, seg.geometry.num_blocks);
  detail::ReleaseSharedLock(&t.raw_header().lock);
  ASSERT_EQ(fstat(seg.fd.get(), &st), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), seg.size());
}

// A node cache's segment mapped once more, and its file backing, for writing
// through the segment's descriptor.
class WriteThroughTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = NodeCache::Open(name_.options());
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    cache_ = std::move(opened.value());
    ASSERT_TRUE(testing::MapSegmentOf(*cache_, &seg_));
    backing_.emplace(seg_);
  }
  const std::byte* At(std::uint64_t offset) const {
    return static_cast<const std::byte*>(seg_.base()) + offset;
  }

  ScopedSegmentName name_;
  std::unique_ptr<NodeCache> cache_;
  detail::MappedSegment seg_;
  std::optional<detail::FileBacking> backing_;
};

// Rows are written through the segment's descriptor (no page fault per fresh
// page), but only while that descriptor still names the segment: a host
// program that closed it and opened another file under the same number must
// never find the cache's bytes in that file.
TEST_F(WriteThroughTest, RowsAreWrittenThroughOnlyTheSegmentsOwnFile) {
  const std::uint64_t at = seg_.geometry.off_data;
  ASSERT_TRUE(backing_->Back(at, 8192).ok());
  std::vector<std::byte> row(8192, std::byte{0x5a});
  ASSERT_TRUE(backing_->WriteThrough(at, row.data(), row.size()));
  EXPECT_EQ(std::memcmp(At(at), row.data(), row.size()), 0);
  EXPECT_FALSE(backing_->WriteThrough(seg_.size() - 100, row.data(), row.size()));  // past the end

  char path[] = "/tmp/prescient-write-through-XXXXXX";
  const int other = mkstemp(path);
  ASSERT_GE(other, 0);
  unlink(path);
  ASSERT_EQ(dup2(other, seg_.fd.get()), seg_.fd.get());  // our number, another file
  close(other);
  EXPECT_FALSE(backing_->WriteThrough(at, row.data(), row.size()));
  struct stat st{};
  ASSERT_EQ(fstat(seg_.fd.get(), &st), 0);
  EXPECT_EQ(st.st_size, 0);  // nothing written into the other file
}

// Many pieces in one vectored write (more than IOV_MAX: written in turns),
// each where the one before ended.
TEST_F(WriteThroughTest, PiecesAreWrittenThroughOneAfterAnother) {
  const std::uint64_t at = seg_.geometry.off_data;
  constexpr std::size_t kPieces = 3000;
  std::vector<std::byte> bytes(kPieces * 7);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 31 + 5);
  ASSERT_TRUE(backing_->Back(at, (bytes.size() + 4095) / 4096 * 4096).ok());
  std::vector<struct iovec> pieces;
  for (std::size_t i = 0; i < kPieces; ++i) pieces.push_back({bytes.data() + 7 * i, 7});
  ASSERT_TRUE(backing_->WriteThrough(at, pieces));
  EXPECT_EQ(std::memcmp(At(at), bytes.data(), bytes.size()), 0);
  EXPECT_FALSE(backing_->WriteThrough(seg_.size() - 100, pieces));  // past the end: nothing
}

TEST(CrashRecovery, KilledWhileLoadingOthersTakeOver) {
  ScopedSegmentName name;
  // Waits for the loader until it publishes or dies (an impatient reader
  // would load the rows itself before it died).
  name.options().wait_patience_loads = 0;
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  constexpr std::uint64_t kBytes = 64 << 10;
  const DatasetSlot ds = cache.value()->RegisterDataset({5, 5}, kBytes, 100).value();
  auto* state = SharedObject<std::atomic<int>>();
  const pid_t child = ForkChild([&] {
    auto own = NodeCache::Open(name.options());  // an independent rank
    if (!own.ok()) return 1;
    const DatasetSlot mine = own.value()->RegisterDataset({5, 5}, kBytes, 100).value();
    const std::vector<std::uint64_t> rows = {10, 11, 12};
    std::vector<std::byte> out(rows.size() * kBytes);
    auto stuck = [&](std::span<const std::uint64_t>, std::span<std::byte* const> dest) {
      std::memset(dest[0], 0xee, kBytes / 2);  // garbage half-way through
      state->store(1);
      for (;;) pause();
      return Status::Ok();
    };
    (void)own.value()->ReadRows(mine, rows, out.data(), stuck, nullptr);
    return 3;
  });
  ASSERT_TRUE(WaitFor(*state, 1, std::chrono::seconds(10)));
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    kill(child, SIGKILL);
  });
  const auto t0 = Clock::now();
  const std::vector<std::uint64_t> rows = {11, 40, 10};
  std::vector<std::byte> out(rows.size() * kBytes);
  ReadRowsStats st;
  Status s = cache.value()->ReadRows(ds, rows, out.data(), PatternLoader{4, kBytes, nullptr},
                                     nullptr, &st);
  const auto elapsed = Clock::now() - t0;
  killer.join();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(FirstBadByte(4, rows, out.data(), kBytes), -1);
  EXPECT_GE(elapsed, std::chrono::milliseconds(150));   // it did wait for the loader...
  EXPECT_LT(elapsed, std::chrono::milliseconds(1200));  // ...and noticed its death quickly
  EXPECT_EQ(st.loaded, 3u);                             // 40 at once, 10 and 11 after the takeover
  EXPECT_GE(st.wait_time, std::chrono::milliseconds(100));
  EXPECT_LT(st.load_time, std::chrono::milliseconds(100));  // loading was quick; waiting was not
  EXPECT_GE(cache.value()->Stats().takeovers, 2u);
  EXPECT_EQ(WaitExitCode(child), 128 + SIGKILL);
  // Row 12 was claimed by the dead process too: it is not stuck.
  const std::uint64_t r12 = 12;
  ASSERT_TRUE(cache.value()
                  ->ReadRows(ds, {&r12, 1}, out.data(), PatternLoader{4, kBytes, nullptr}, nullptr)
                  .ok());
  EXPECT_EQ(FirstBadByte(4, {&r12, 1}, out.data(), kBytes), -1);
}

TEST(CrashRecovery, PrefetchClaimsOfADeadProcessAreReleased) {
  ScopedSegmentName name;
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  const DatasetSlot ds = cache.value()->RegisterDataset({6, 6}, 3000, 100).value();
  const std::vector<std::uint64_t> rows = {1, 2, 3};
  // A forked worker (inherited handle) claims rows for prefetch and _exits
  // without publishing: no destructor runs.
  const pid_t child = ForkChild([&] {
    auto claimed = cache.value()->Claim(ds, rows, nullptr);
    return claimed.ok() && claimed.value().size() == 3 ? 0 : 1;
  });
  ASSERT_EQ(WaitExitCode(child), 0);
  EXPECT_FALSE(cache.value()->Contains(ds, 1));
  std::vector<std::byte> out(rows.size() * 3000);
  const auto t0 = Clock::now();
  ASSERT_TRUE(
      cache.value()->ReadRows(ds, rows, out.data(), PatternLoader{8, 3000, nullptr}, nullptr).ok());
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(500));
  EXPECT_EQ(FirstBadByte(8, rows, out.data(), 3000), -1);
}

TEST(CrashRecovery, LockHeldByALiveProcessTimesOutThenRecoversAfterItsDeath) {
  ScopedSegmentName name;
  name.options().lock_timeout = std::chrono::milliseconds(200);
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  const DatasetSlot ds = cache.value()->RegisterDataset({7, 2}, 100, 10).value();
  auto* state = SharedObject<std::atomic<int>>();
  const NodeCache* cache_ptr = cache.value().get();
  const pid_t child = ForkChild([&] {
    detail::MappedSegment seg;
    if (!testing::MapSegmentOf(*cache_ptr, &seg)) return 1;
    detail::SegmentTables t(seg.base());
    if (detail::AcquireSharedLock(&t.raw_header().lock, std::chrono::seconds(5)) !=
        detail::LockOutcome::kLocked) {
      return 2;
    }
    t.AssumeExclusive();  // locked above, and never released: this process dies holding it
    state->store(1);
    for (;;) pause();
  });
  ASSERT_TRUE(WaitFor(*state, 1, std::chrono::seconds(10)));
  const std::uint64_t row = 4;
  std::vector<std::byte> out(100);
  Status s =
      cache.value()->ReadRows(ds, {&row, 1}, out.data(), PatternLoader{1, 100, nullptr}, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not acquired within 200 ms"), std::string::npos) << s.message();
  kill(child, SIGKILL);
  EXPECT_EQ(WaitExitCode(child), 128 + SIGKILL);
  s = cache.value()->ReadRows(ds, {&row, 1}, out.data(), PatternLoader{1, 100, nullptr}, nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(FirstBadByte(1, {&row, 1}, out.data(), 100), -1);
  EXPECT_EQ(cache.value()->Stats().recoveries, 1u);
}

TEST(Leadership, OneLeaderForkedChildrenDoNotInheritTakeoverWithinASecond) {
  ScopedSegmentName name;
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  NodeCache& c = *cache.value();
  EXPECT_FALSE(c.IsLeader());
  ASSERT_TRUE(c.TryBecomeLeader());
  EXPECT_TRUE(c.IsLeader());
  EXPECT_TRUE(c.TryBecomeLeader());  // idempotent
  // A forked worker is not the leader and cannot become it while we live.
  const pid_t worker = ForkChild([&] { return c.IsLeader() ? 1 : c.TryBecomeLeader() ? 2 : 0; });
  EXPECT_EQ(WaitExitCode(worker), 0);
  c.ResignLeader();
  EXPECT_FALSE(c.IsLeader());

  // Another process leads and is killed: we take over within a second.
  auto* state = SharedObject<std::atomic<int>>();
  const pid_t leader = ForkChild([&] {
    auto own = NodeCache::Open(name.options());
    if (!own.ok() || !own.value()->TryBecomeLeader()) return 1;
    state->store(1);
    for (;;) pause();
  });
  ASSERT_TRUE(WaitFor(*state, 1, std::chrono::seconds(10)));
  EXPECT_FALSE(c.TryBecomeLeader());
  kill(leader, SIGKILL);
  const auto t0 = Clock::now();
  while (!c.TryBecomeLeader() && Clock::now() - t0 < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(c.IsLeader());
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));
  EXPECT_EQ(WaitExitCode(leader), 128 + SIGKILL);
}

// A DataLoader's main process may touch the cache for the first time inside
// the connector's own pthread_atfork prepare handler, while its first workers
// are being forked. The children must still act as themselves (regression:
// a pid cached and refreshed by an at-fork handler registered during that
// very fork stayed the parent's, so a worker led prefetching as the parent and
// its claims looked like the parent's, never to be released).
std::unique_ptr<NodeCache>* opened_in_prepare = nullptr;
CacheOptions* prepare_options = nullptr;

void OpenCacheInPrepare() {
  if (prepare_options == nullptr) return;  // only for the first fork of the test
  auto opened = NodeCache::Open(*prepare_options);
  prepare_options = nullptr;
  if (!opened.ok()) return;
  *opened_in_prepare = std::move(opened.value());
  (void)(*opened_in_prepare)->TryBecomeLeader();
}

TEST(Leadership, ChildrenStayThemselvesWhenTheCacheIsFirstUsedDuringFork) {
  ScopedSegmentName name;
  std::unique_ptr<NodeCache> cache;
  opened_in_prepare = &cache;
  prepare_options = &name.options();
  ASSERT_EQ(pthread_atfork(&OpenCacheInPrepare, nullptr, nullptr), 0);
  const pid_t worker = ForkChild([&] {
    if (cache == nullptr) return 3;
    if (cache->IsLeader()) return 1;         // the parent's leadership, inherited
    if (cache->TryBecomeLeader()) return 2;  // taken from a live leader
    return 0;
  });
  ASSERT_NE(cache, nullptr);
  EXPECT_TRUE(cache->IsLeader());
  EXPECT_EQ(WaitExitCode(worker), 0) << "1: the child acted as the leader; 2: it took over";
}

}  // namespace
}  // namespace prescient::cache
