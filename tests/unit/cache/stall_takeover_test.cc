// Live but stuck peers, stopped for real with SIGSTOP: a reader waiting for a
// stopped loader's rows takes them over after stall_timeout; a stopped prefetch
// leader loses its claims and its leadership; the resumed process finds its
// claims gone and corrupts nothing. A loader that is busy (burning CPU) is not
// overtaken: the decision rests on progress, not on time alone. A process
// stopped holding the segment lock makes calls fail fast (each process waits
// to see it stopped once), and the claims a reader could not publish
// meanwhile are let go at its next call.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "cache/core/segment_file.h"
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

constexpr std::uint64_t kRow = 64 << 10;  // copied outside the lock: the riskiest case

class StallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_.options().stall_timeout = std::chrono::milliseconds(400);
    name_.options().wait_timeout = std::chrono::seconds(30);
    // Readers that wait for a loader until it publishes (as for the node
    // agent's claims): a patient reader would load a stopped loader's rows
    // itself instead (impatient_wait_test.cc), leaving the stall unseen.
    name_.options().wait_patience_loads = 0;
    auto cache = NodeCache::Open(name_.options());
    ASSERT_TRUE(cache.ok()) << cache.status().message();
    cache_ = std::move(cache.value());
    ds_ = cache_->RegisterDataset({21, 1}, kRow, 1000).value();
  }
  // Reads `rows` (salt 4) and checks every byte; returns the call's figures.
  ReadRowsStats ReadChecked(const std::vector<std::uint64_t>& rows) {
    std::vector<std::byte> out(rows.size() * kRow);
    ReadRowsStats st;
    const Status s =
        cache_->ReadRows(ds_, rows, out.data(), PatternLoader{4, kRow, nullptr}, nullptr, &st);
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(FirstBadByte(4, rows, out.data(), kRow), -1);
    return st;
  }
  // A child that claims rows [first, first + count) for prefetching (as the
  // node agent does), sets *state to 1 and idles until it reads 2.
  pid_t ForkClaimingPrefetcher(std::atomic<int>* state, std::uint64_t first, std::uint64_t count) {
    return ForkChild([this, state, first, count] {
      auto own = NodeCache::Open(name_.options());
      if (!own.ok()) return 1;
      const DatasetSlot ds = own.value()->RegisterDataset({21, 1}, kRow, 1000).value();
      std::vector<RowWithKey> want;
      for (std::uint64_t r = first; r < first + count; ++r) want.push_back({r, r});
      auto claimed = own.value()->ClaimForPrefetch(ds, want);
      if (!claimed.ok() || claimed.value().size() != count) return 2;
      state->store(1);
      while (state->load() != 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return 0;
    });
  }
  // A process that takes the segment lock once *state reads `after` (at
  // once for 0), sets *state to `after` + 1 and keeps the lock: stopped
  // inside it until SIGCONT (`running_for` empty), or running for that long.
  pid_t ForkLockHolder(std::atomic<int>* state, int after,
                       std::optional<std::chrono::milliseconds> running_for) {
    const NodeCache* cache_ptr = cache_.get();
    return ForkChild([=] {
      detail::MappedSegment seg;
      if (!testing::MapSegmentOf(*cache_ptr, &seg)) return 1;
      detail::SegmentTables t(seg.base(), seg.geometry);
      if (after != 0 && !WaitFor(*state, after, std::chrono::seconds(10))) return 2;
      if (detail::AcquireSharedLock(&t.raw_header().lock, std::chrono::seconds(5)) !=
          detail::LockOutcome::kLocked) {
        return 3;
      }
      state->store(after + 1);
      if (running_for) {
        std::this_thread::sleep_for(*running_for);
      } else {
        raise(SIGSTOP);  // stopped inside the critical section
      }
      detail::ReleaseSharedLock(&t.raw_header().lock);
      return 0;
    });
  }
  // Loads `row` while another process is stopped holding the segment lock:
  // the load's claim can be neither published nor released, and the call
  // fails ("stopped"; the connector then reads the row natively). Returns
  // once that process has resumed and left, the claim still ours.
  void LoadWhileTheLockHolderIsStopped(std::uint64_t row) {
    auto* state = SharedObject<std::atomic<int>>();
    // Takes the lock and stops while we load.
    const pid_t holder = ForkLockHolder(state, 1, std::nullopt);
    std::vector<std::byte> out(kRow);
    auto loader = [&](std::span<const std::uint64_t> r, std::span<std::byte* const> d) {
      state->store(1);  // our claim is made: let the holder take the lock and stop
      if (!WaitFor(*state, 2, std::chrono::seconds(10))) return Status::Internal("no holder");
      return PatternLoader{4, kRow, nullptr}(r, d);
    };
    const Status s = cache_->ReadRows(ds_, {&row, 1}, out.data(), loader, nullptr);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("stopped"), std::string::npos) << s.message();
    ASSERT_EQ(kill(holder, SIGCONT), 0);
    ASSERT_EQ(WaitExitCode(holder), 0);
    EXPECT_EQ(cache_->Stats().claims_released_late, 0u);
  }
  ScopedSegmentName name_;
  std::unique_ptr<NodeCache> cache_;
  DatasetSlot ds_ = kInvalidDatasetSlot;
};

TEST_F(StallTest, StoppedLoaderIsOvertakenAndItsLateWorkIsDiscarded) {
  auto* state = SharedObject<std::atomic<int>>();
  // An independent rank loads rows 10..12; its loader is stopped half-way.
  const pid_t loader = ForkChild([&] {
    auto own = NodeCache::Open(name_.options());
    if (!own.ok()) return 1;
    const DatasetSlot ds = own.value()->RegisterDataset({21, 1}, kRow, 1000).value();
    const std::vector<std::uint64_t> rows = {10, 11, 12};
    std::vector<std::byte> out(rows.size() * kRow);
    auto slow = [&](std::span<const std::uint64_t> r, std::span<std::byte* const> d) {
      state->store(1);
      while (state->load() != 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      // Resumed: it produces other bytes (salt 99); they must never be served.
      return PatternLoader{99, kRow, nullptr}(r, d);
    };
    ReadRowsStats st;
    if (!own.value()->ReadRows(ds, rows, out.data(), slow, nullptr, &st).ok()) return 2;
    // Its own caller gets its own bytes; its claims were taken: nothing published.
    if (FirstBadByte(99, rows, out.data(), kRow) != -1) return 3;
    return st.loaded == 3 ? 0 : 4;
  });
  ASSERT_TRUE(WaitFor(*state, 1, std::chrono::seconds(10)));
  ASSERT_EQ(kill(loader, SIGSTOP), 0);
  const auto t0 = Clock::now();
  const ReadRowsStats st = ReadChecked({11, 40, 10, 12});
  const auto elapsed = Clock::now() - t0;
  EXPECT_EQ(st.taken_over, 3u);
  EXPECT_EQ(st.loaded, 4u);                             // 40 at once; 10, 11, 12 after the takeover
  EXPECT_GE(elapsed, std::chrono::milliseconds(400));   // it waited for a stall...
  EXPECT_LT(elapsed, std::chrono::milliseconds(2000));  // ...not for wait_timeout (30 s)
  EXPECT_EQ(cache_->Stats().stall_takeovers, 3u);
  // Resume it: it finishes, finds its claims gone, publishes nothing.
  state->store(2);
  ASSERT_EQ(kill(loader, SIGCONT), 0);
  EXPECT_EQ(WaitExitCode(loader), 0);
  // The cached rows are ours (salt 4), and nothing leaked.
  EXPECT_EQ(ReadChecked({10, 11, 12, 40}).hits, 4u);
  EXPECT_EQ(cache_->Stats().rows_resident, 4u);
  EXPECT_EQ(cache_->Stats().bytes_resident, 4 * kRow);
}

TEST_F(StallTest, StoppedPrefetchLeaderLosesItsClaimsAndItsLeadership) {
  auto* state = SharedObject<std::atomic<int>>();
  const pid_t leader = ForkChild([&] {
    auto own = NodeCache::Open(name_.options());
    if (!own.ok() || !own.value()->TryBecomeLeader()) return 1;
    const DatasetSlot ds = own.value()->RegisterDataset({21, 1}, kRow, 1000).value();
    std::vector<RowWithKey> want;
    for (std::uint64_t r = 100; r < 110; ++r) want.push_back({r, r});
    auto claimed = own.value()->ClaimForPrefetch(ds, want);  // blocks reserved
    if (!claimed.ok() || claimed.value().size() != 10) return 2;
    state->store(1);
    while (state->load() != 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    // Resumed (SIGCONT): it publishes what it loaded, with other bytes.
    std::vector<std::byte> bytes(kRow);
    int not_claimed = 0;
    for (std::uint64_t r : claimed.value()) {
      testing::FillRow(99, r, bytes.data(), kRow);
      auto outcome = own.value()->Publish(ds, r, bytes.data(), nullptr);
      if (outcome.ok() && outcome.value() == PublishOutcome::kNotClaimed) ++not_claimed;
    }
    if (own.value()->IsLeader()) return 3;  // leadership moved on while it was stopped
    return not_claimed == 10 ? 0 : 4;
  });
  ASSERT_TRUE(WaitFor(*state, 1, std::chrono::seconds(10)));
  ASSERT_EQ(kill(leader, SIGSTOP), 0);
  // Another process becomes the leader within the stall timeout (retries
  // every 100 ms, as the prefetcher's thread does).
  const auto t0 = Clock::now();
  while (!cache_->TryBecomeLeader() && Clock::now() - t0 < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(cache_->IsLeader());
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(1500));
  EXPECT_EQ(cache_->Stats().leader_takeovers, 1u);
  // Readers needing its rows take them over.
  std::vector<std::uint64_t> rows;
  for (std::uint64_t r = 100; r < 110; ++r) rows.push_back(r);
  EXPECT_EQ(ReadChecked(rows).taken_over, 10u);
  state->store(2);
  ASSERT_EQ(kill(leader, SIGCONT), 0);
  EXPECT_EQ(WaitExitCode(leader), 0);
  // Its late publishes did not overwrite anything, and its reserved blocks
  // came back: exactly our 10 rows are resident, with our bytes.
  EXPECT_EQ(ReadChecked(rows).hits, 10u);
  EXPECT_EQ(cache_->Stats().rows_resident, 10u);
  const CacheStats st = cache_->Stats();
  EXPECT_EQ(st.bytes_resident, 10 * kRow);
}

TEST_F(StallTest, AReaderPaysTheStallOncePerStoppedLoaderNotOncePerRow) {
  // A prefetcher (the node agent) stopped with many rows claimed: a reader
  // that needs them one read at a time watches it for stall_timeout once;
  // its later reads take the stopped loader's rows over at once.
  auto* state = SharedObject<std::atomic<int>>();
  const pid_t prefetcher = ForkClaimingPrefetcher(state, 200, 10);
  ASSERT_TRUE(WaitFor(*state, 1, std::chrono::seconds(10)));
  ASSERT_EQ(kill(prefetcher, SIGSTOP), 0);
  const auto t0 = Clock::now();
  EXPECT_EQ(ReadChecked({200}).taken_over, 1u);
  const auto first = Clock::now() - t0;
  EXPECT_GE(first, std::chrono::milliseconds(400));  // watched for stall_timeout
  const auto t1 = Clock::now();
  for (std::uint64_t r = 201; r < 210; ++r) EXPECT_EQ(ReadChecked({r}).taken_over, 1u);
  // Nine more stalls would take 3.6 s; known stuck, they take none.
  EXPECT_LT(Clock::now() - t1, std::chrono::milliseconds(1000));
  state->store(2);
  ASSERT_EQ(kill(prefetcher, SIGCONT), 0);
  EXPECT_EQ(WaitExitCode(prefetcher), 0);
  EXPECT_EQ(cache_->Stats().stall_takeovers, 10u);
}

TEST_F(StallTest, AStoppedLoaderFoundStuckByOneProcessCostsTheOthersNoStall) {
  // The node remembers the stuck loader: DataLoader workers forked after one
  // process found the node agent stopped do not each watch it again.
  auto* state = SharedObject<std::atomic<int>>();
  const pid_t prefetcher = ForkClaimingPrefetcher(state, 300, 4);
  ASSERT_TRUE(WaitFor(*state, 1, std::chrono::seconds(10)));
  ASSERT_EQ(kill(prefetcher, SIGSTOP), 0);
  const auto t0 = Clock::now();
  EXPECT_EQ(ReadChecked({300}).taken_over, 1u);
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(400));  // watched for stall_timeout
  // Another process (its own attachment, its own wait) reads a row the
  // stopped loader still holds.
  const pid_t reader = ForkChild([&] {
    auto own = NodeCache::Open(name_.options());
    if (!own.ok()) return 1;
    const DatasetSlot ds = own.value()->RegisterDataset({21, 1}, kRow, 1000).value();
    std::vector<std::byte> out(kRow);
    ReadRowsStats st;
    const std::vector<std::uint64_t> rows = {301};
    const auto start = Clock::now();
    const Status s =
        own.value()->ReadRows(ds, rows, out.data(), PatternLoader{4, kRow, nullptr}, nullptr, &st);
    const auto took = Clock::now() - start;
    if (!s.ok() || FirstBadByte(4, rows, out.data(), kRow) != -1) return 3;
    if (st.taken_over != 1) return 4;
    return took < std::chrono::milliseconds(300) ? 0 : 5;  // no stall_timeout of its own
  });
  EXPECT_EQ(WaitExitCode(reader), 0);
  state->store(2);
  ASSERT_EQ(kill(prefetcher, SIGCONT), 0);
  EXPECT_EQ(WaitExitCode(prefetcher), 0);
}

TEST_F(StallTest, BusyLoaderIsWaitedForNotOvertaken) {
  auto* state = SharedObject<std::atomic<int>>();
  // A loader that takes 1.2 s of CPU (decoding, say): longer than
  // stall_timeout, but making progress all along.
  const pid_t loader = ForkChild([&] {
    auto own = NodeCache::Open(name_.options());
    if (!own.ok()) return 1;
    const DatasetSlot ds = own.value()->RegisterDataset({21, 1}, kRow, 1000).value();
    const std::uint64_t row = 7;
    std::vector<std::byte> out(kRow);
    auto busy = [&](std::span<const std::uint64_t> r, std::span<std::byte* const> d) {
      state->store(1);
      volatile std::uint64_t sink = 0;
      const auto end = Clock::now() + std::chrono::milliseconds(1200);
      while (Clock::now() < end) sink = sink + 1;
      return PatternLoader{4, kRow, nullptr}(r, d);
    };
    return own.value()->ReadRows(ds, {&row, 1}, out.data(), busy, nullptr).ok() ? 0 : 2;
  });
  ASSERT_TRUE(WaitFor(*state, 1, std::chrono::seconds(10)));
  const ReadRowsStats st = ReadChecked({7});
  EXPECT_EQ(st.taken_over, 0u);
  EXPECT_EQ(st.waited, 1u);  // it got the busy loader's row
  EXPECT_EQ(st.loaded, 0u);
  EXPECT_EQ(WaitExitCode(loader), 0);
  EXPECT_EQ(cache_->Stats().stall_takeovers, 0u);
}

TEST_F(StallTest, ProcessStoppedHoldingTheLockMakesCallsFailFastNotHang) {
  auto* state = SharedObject<std::atomic<int>>();
  const pid_t holder = ForkLockHolder(state, 0, std::nullopt);
  ASSERT_TRUE(WaitFor(*state, 1, std::chrono::seconds(10)));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto t0 = Clock::now();
  const std::uint64_t row = 3;
  std::vector<std::byte> out(kRow);
  const Status s =
      cache_->ReadRows(ds_, {&row, 1}, out.data(), PatternLoader{4, kRow, nullptr}, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("stopped"), std::string::npos) << s.message();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));  // not lock_timeout (10 s)
  ASSERT_EQ(kill(holder, SIGCONT), 0);
  EXPECT_EQ(WaitExitCode(holder), 0);
  EXPECT_EQ(ReadChecked({3}).loaded, 1u);  // resumed and released: all well again
}

// The node agent stopped with SIGSTOP inside the lock (agents test, one CI
// run): every later call of every process of the node waited the 200 ms
// that tell a stopped holder from a busy one, and a batch of 32 reads took
// 13 s. A process that found the holder stopped gives up at once while that
// same holder is still stopped; it waits normally again once it runs.
TEST_F(StallTest, AProcessPaysTheStoppedLockHolderOnceNotOncePerCall) {
  auto* state = SharedObject<std::atomic<int>>();
  const pid_t holder = ForkLockHolder(state, 0, std::nullopt);
  ASSERT_TRUE(WaitFor(*state, 1, std::chrono::seconds(10)));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::vector<std::byte> out(kRow);
  auto read_row = [&](std::uint64_t row) {
    return cache_->ReadRows(ds_, {&row, 1}, out.data(), PatternLoader{4, kRow, nullptr}, nullptr);
  };
  EXPECT_FALSE(read_row(3).ok());  // the one wait: the holder is found stopped
  constexpr int kCalls = 20;
  const auto t0 = Clock::now();
  for (int i = 0; i < kCalls; ++i) {
    const Status s = read_row(10 + static_cast<std::uint64_t>(i));
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("stopped"), std::string::npos) << s.message();
  }
  // Without the memo: kCalls times kStoppedHolderLimit (4 s) at least.
  EXPECT_LT(Clock::now() - t0, detail::kStoppedHolderLimit * kCalls / 4);
  ASSERT_EQ(kill(holder, SIGCONT), 0);
  EXPECT_EQ(WaitExitCode(holder), 0);
  EXPECT_EQ(ReadChecked({3}).loaded, 1u);  // resumed and released: all well again
}

// The soak test's 10 s wait: a reader loads rows while another process is
// stopped holding the segment lock, so it can neither publish its claims
// nor release them. It goes on working (a training loop does), so nobody
// takes its claims over as stuck; waiting for them until wait_timeout was
// the old outcome. Its next call lets them go, and a reader already waiting
// for one of them loads it at once.
TEST_F(StallTest, ClaimsLeftByAStoppedLockHolderAreLetGoAtTheNextCall) {
  const std::uint64_t row = 5;
  LoadWhileTheLockHolderIsStopped(row);

  // Another process wants the row; our claim is still there, and we are alive.
  struct Seen {
    std::atomic<int> started{0};
    std::uint64_t loaded = 0, waited = 0, taken_over = 0;
  };
  auto* seen = SharedObject<Seen>();
  const pid_t reader = ForkChild([&] {
    auto own = NodeCache::Open(name_.options());
    if (!own.ok()) return 1;
    const DatasetSlot ds = own.value()->RegisterDataset({21, 1}, kRow, 1000).value();
    std::vector<std::byte> bytes(kRow);
    ReadRowsStats st;
    seen->started.store(1);
    const Status read = own.value()->ReadRows(ds, {&row, 1}, bytes.data(),
                                              PatternLoader{4, kRow, nullptr}, nullptr, &st);
    seen->loaded = st.loaded;
    seen->waited = st.waited;
    seen->taken_over = st.taken_over;
    if (!read.ok()) return 2;
    return FirstBadByte(4, {&row, 1}, bytes.data(), kRow) == -1 ? 0 : 3;
  });
  ASSERT_TRUE(WaitFor(seen->started, 1, std::chrono::seconds(10)));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // it waits for our claim
  EXPECT_EQ(ReadChecked({6}).loaded, 1u);                      // our next call, on another row
  EXPECT_EQ(WaitExitCode(reader), 0);
  EXPECT_EQ(seen->loaded, 1u);      // released to it...
  EXPECT_EQ(seen->taken_over, 0u);  // ...not taken from a loader found stuck
  EXPECT_EQ(cache_->Stats().claims_released_late, 1u);
  EXPECT_EQ(cache_->Stats().stall_takeovers, 0u);
  EXPECT_EQ(ReadChecked({5, 6}).hits, 2u);
}

// The same claim, and this time our next call cannot settle it at once: a
// running process holds the lock a little longer than a settlement waits
// for it. The call then finds the row in flight under its own name; it lets
// its claims go before waiting, instead of waiting for itself until it takes
// its own claim over as stuck.
TEST_F(StallTest, AReaderNeverWaitsForItsOwnUnsettledClaim) {
  const std::uint64_t row = 5;
  LoadWhileTheLockHolderIsStopped(row);
  auto* state = SharedObject<std::atomic<int>>();
  const pid_t busy = ForkLockHolder(state, 0, std::chrono::milliseconds(150));
  ASSERT_TRUE(WaitFor(*state, 1, std::chrono::seconds(10)));
  const ReadRowsStats st = ReadChecked({row});
  EXPECT_EQ(WaitExitCode(busy), 0);
  EXPECT_EQ(st.loaded, 1u);
  EXPECT_EQ(st.taken_over, 0u);
  EXPECT_EQ(cache_->Stats().claims_released_late, 1u);
  EXPECT_EQ(cache_->Stats().stall_takeovers, 0u);
}

}  // namespace
}  // namespace prescient::cache
