// How long a reader waits for a row another live process is loading: about
// twice as long as its own loads take (CacheOptions::wait_patience_loads),
// then it loads the row itself without taking the claim, which the loader
// still publishes. The node agent's claims (claims_awaited_in_full), a
// reader that has not loaded anything yet and a patience of 0 wait until
// the row is published. The loaders here are real processes holding real
// claims, alive and not stopped (a stopped one: stall_takeover_test.cc).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::FillRow;
using testing::FirstBadByte;
using testing::ForkChild;
using testing::PatternLoader;
using testing::ScopedSegmentName;
using testing::SharedObject;
using testing::WaitExitCode;
using testing::WaitFor;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kRow = 16 << 10;
constexpr std::uint64_t kSalt = 6;
constexpr DatasetKey kKey{31, 1};
// The loader's state in shared memory: 1 = its claim is made, 2 = publish
// now (the test says so), 3 = published.
enum LoaderState : int { kClaimed = 1, kPublishNow = 2, kPublished = 3 };

class ImpatientWait : public ::testing::Test {
 protected:
  void SetUp() override {
    // Neither a stall nor the wait limit may end a wait here: only patience.
    name_.options().stall_timeout = std::chrono::seconds(30);
    name_.options().wait_timeout = std::chrono::seconds(30);
  }
  void Open() {
    cache_ = testing::OpenOrDie(name_.options());
    ASSERT_NE(cache_, nullptr);
    ds_ = cache_->RegisterDataset(kKey, kRow, 1000).value();
  }
  // A process that claims `row` as a prefetcher does (awaited in full if
  // `node_agent`), reports kClaimed, and publishes the row once told to, or
  // after `publish_after` if that comes first. It keeps running meanwhile.
  pid_t ForkLoader(std::uint64_t row, bool node_agent, std::chrono::milliseconds publish_after) {
    state_ = SharedObject<std::atomic<int>>();
    std::atomic<int>* state = state_;
    CacheOptions options = name_.options();
    options.claims_awaited_in_full = node_agent;
    return ForkChild([=] {
      auto own = NodeCache::Open(options);
      if (!own.ok()) return 1;
      const DatasetSlot ds = own.value()->RegisterDataset(kKey, kRow, 1000).value();
      const RowWithKey want{row, row};
      auto claimed = own.value()->ClaimForPrefetch(ds, {&want, 1});
      if (!claimed.ok() || claimed.value().size() != 1) return 2;
      state->store(kClaimed);
      (void)WaitFor(*state, kPublishNow, publish_after);
      std::vector<std::byte> bytes(kRow);
      FillRow(kSalt, row, bytes.data(), kRow);
      auto published = own.value()->Publish(ds, row, bytes.data(), nullptr);
      if (!published.ok() || published.value() != PublishOutcome::kStored) return 3;
      state->store(kPublished);
      return 0;
    });
  }
  // Reads `row` and checks its bytes; *took is the call's duration.
  ReadRowsStats ReadChecked(std::uint64_t row, Clock::duration* took = nullptr) {
    std::vector<std::byte> out(kRow);
    ReadRowsStats st;
    const auto t0 = Clock::now();
    const Status s = cache_->ReadRows(ds_, {&row, 1}, out.data(),
                                      PatternLoader{kSalt, kRow, nullptr}, nullptr, &st);
    if (took != nullptr) *took = Clock::now() - t0;
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(FirstBadByte(kSalt, std::vector<std::uint64_t>{row}, out.data(), kRow), -1);
    return st;
  }

  // Reads `row` while a loader holds it and publishes it after 300 ms: the
  // reader waits for that, loading nothing itself.
  void ExpectToWaitForPublication(std::uint64_t row, bool node_agent) {
    const pid_t loader = ForkLoader(row, node_agent, std::chrono::milliseconds(300));
    ASSERT_TRUE(WaitFor(*state_, kClaimed, std::chrono::seconds(10)));
    Clock::duration took{};
    const ReadRowsStats st = ReadChecked(row, &took);
    EXPECT_EQ(st.waited, 1u);
    EXPECT_EQ(st.not_awaited, 0u);
    EXPECT_EQ(st.loaded + st.uncached, 0u);  // the loader's read was the node's only one
    EXPECT_GE(took, std::chrono::milliseconds(250));
    EXPECT_EQ(WaitExitCode(loader), 0);
  }

  ScopedSegmentName name_;
  std::unique_ptr<NodeCache> cache_;
  DatasetSlot ds_ = kInvalidDatasetSlot;
  std::atomic<int>* state_ = nullptr;
};

TEST_F(ImpatientWait, AReaderLoadsALiveLoadersRowItselfAfterItsPatience) {
  Open();
  ASSERT_EQ(ReadChecked(5).loaded, 1u);  // the reader's own load: its measure of patience
  const pid_t loader = ForkLoader(200, /*node_agent=*/false, std::chrono::seconds(20));
  ASSERT_TRUE(WaitFor(*state_, kClaimed, std::chrono::seconds(10)));

  Clock::duration took{};
  const ReadRowsStats st = ReadChecked(200, &took);
  EXPECT_EQ(st.not_awaited, 1u);
  EXPECT_EQ(st.uncached, 1u);
  EXPECT_EQ(st.waited, 0u);
  EXPECT_EQ(st.taken_over, 0u);
  EXPECT_GT(st.wait_time.count(), 0);  // it did wait first...
  // ...about 0.1 ms (the floor: the pattern loader takes microseconds), far
  // from the 20 s the loader would have taken; generous for sanitizers.
  EXPECT_LT(took, std::chrono::seconds(2));
  EXPECT_FALSE(cache_->Contains(ds_, 200));  // the claim is still the loader's

  // The loader publishes as it would have: the row is a hit from now on.
  state_->store(kPublishNow);
  ASSERT_TRUE(WaitFor(*state_, kPublished, std::chrono::seconds(10)));
  EXPECT_EQ(WaitExitCode(loader), 0);
  EXPECT_EQ(ReadChecked(200).hits, 1u);
  EXPECT_EQ(cache_->Stats().rows_resident, 2u);
}

TEST_F(ImpatientWait, TheNodeAgentsClaimsAreAwaitedUntilPublished) {
  Open();
  ASSERT_EQ(ReadChecked(5).loaded, 1u);
  ExpectToWaitForPublication(300, /*node_agent=*/true);
}

TEST_F(ImpatientWait, AReaderThatHasNotLoadedYetWaitsUntilPublished) {
  Open();  // no own load: no measure of patience
  ExpectToWaitForPublication(400, /*node_agent=*/false);
}

TEST_F(ImpatientWait, PatienceZeroWaitsUntilPublished) {
  name_.options().wait_patience_loads = 0;
  Open();
  ASSERT_EQ(ReadChecked(5).loaded, 1u);
  ExpectToWaitForPublication(500, /*node_agent=*/false);
}

TEST_F(ImpatientWait, ForkedWorkersInheritTheMeasureAndStopWaitingToo) {
  // A DataLoader worker forked after the training process loaded: its first
  // read of a row a live loader holds does not wait for it.
  Open();
  ASSERT_EQ(ReadChecked(5).loaded, 1u);
  const pid_t loader = ForkLoader(600, /*node_agent=*/false, std::chrono::seconds(20));
  ASSERT_TRUE(WaitFor(*state_, kClaimed, std::chrono::seconds(10)));
  NodeCache* cache = cache_.get();
  const DatasetSlot ds = ds_;
  const pid_t worker = ForkChild([cache, ds] {
    std::vector<std::byte> out(kRow);
    const std::uint64_t row = 600;
    ReadRowsStats st;
    const auto t0 = Clock::now();
    if (!cache
             ->ReadRows(ds, {&row, 1}, out.data(), PatternLoader{kSalt, kRow, nullptr}, nullptr,
                        &st)
             .ok()) {
      return 1;
    }
    if (FirstBadByte(kSalt, std::vector<std::uint64_t>{row}, out.data(), kRow) != -1) return 2;
    if (st.not_awaited != 1) return 3;
    return Clock::now() - t0 < std::chrono::seconds(2) ? 0 : 4;
  });
  EXPECT_EQ(WaitExitCode(worker), 0);
  state_->store(kPublishNow);
  EXPECT_EQ(WaitExitCode(loader), 0);
}

}  // namespace
}  // namespace prescient::cache
