// Per-participant progress: the node step is the slowest live, unfinished
// participant's; it goes back only for a participant that registers behind it
// (a rank whose first read came late, or a restarted one); dead owners (real
// processes) and finished participants stop holding it back.
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::ForkChild;
using testing::ScopedSegmentName;
using testing::SharedObject;
using testing::WaitExitCode;
using testing::WaitFor;
using Clock = std::chrono::steady_clock;

std::unique_ptr<NodeCache> OpenOrDie(const CacheOptions& options) {
  auto cache = NodeCache::Open(options);
  EXPECT_TRUE(cache.ok()) << cache.status().message();
  return cache.ok() ? std::move(cache.value()) : nullptr;
}

TEST(Participants, NodeStepIsTheSlowestLiveUnfinishedAndGoesBackOnlyForALateParticipant) {
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  cache->AdvanceNodeStep(3);  // no participant yet: AdvanceNodeStep decides
  EXPECT_EQ(cache->NodeStep(), 3u);
  const std::int32_t me = getpid();
  ASSERT_TRUE(cache->ReportProgress(0, 10, me).ok());
  ASSERT_TRUE(cache->ReportProgress(7, 20, me).ok());
  EXPECT_EQ(cache->NodeStep(), 10u);
  EXPECT_EQ(cache->ParticipantStep(7), 20u);
  EXPECT_FALSE(cache->ParticipantStep(3).has_value());
  ASSERT_TRUE(cache->ReportProgress(0, 30, me).ok());
  ASSERT_TRUE(cache->ReportProgress(0, 25, me).ok());  // atomic max: stays 30
  EXPECT_EQ(cache->ParticipantStep(0), 30u);
  EXPECT_EQ(cache->NodeStep(), 20u);
  cache->AdvanceNodeStep(1000);  // ignored once participants report
  EXPECT_EQ(cache->NodeStep(), 20u);
  ASSERT_TRUE(cache->FinishParticipant(7).ok());
  EXPECT_EQ(cache->NodeStep(), 30u);
  // A late participant starting behind takes the node step back to it: its
  // reads are still to come (rows it needs must not be swept as stale).
  ASSERT_TRUE(cache->ReportProgress(9, 2, me).ok());
  EXPECT_EQ(cache->NodeStep(), 2u);
  ASSERT_TRUE(cache->ReportProgress(9, 12, me).ok());
  EXPECT_EQ(cache->NodeStep(), 12u);
  ASSERT_TRUE(cache->FinishParticipant(0).ok());
  ASSERT_TRUE(cache->FinishParticipant(9).ok());
  EXPECT_EQ(cache->NodeStep(), 30u);  // all finished: the furthest any reached
  EXPECT_EQ(cache->Stats().node_step, 30u);
  EXPECT_FALSE(cache->FinishParticipant(5).ok());
  EXPECT_FALSE(cache->ReportProgress(1, 1, 0).ok());  // no such process
  const auto all = cache->Participants();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_TRUE(all[0].finished);
  EXPECT_TRUE(all[0].owner_alive);
}

TEST(Participants, ADeadOwnerStopsHoldingTheNodeBackWorkersReportForTheirParent) {
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  ASSERT_TRUE(cache->ReportProgress(0, 100, getpid()).ok());
  // Rank 1 is a separate process (an independent rank) whose DataLoader
  // worker reports for it; the rank is then SIGKILLed.
  auto* state = SharedObject<std::atomic<int>>();
  const pid_t rank = ForkChild([&] {
    auto own = NodeCache::Open(name.options());
    if (!own.ok()) return 1;
    const pid_t worker = ForkChild([&] {
      // The worker reports for its parent (the rank) and exits at once.
      return own.value()->ReportProgress(1, 5, getppid()).ok() ? 0 : 1;
    });
    if (WaitExitCode(worker) != 0) return 2;
    state->store(1);
    for (;;) pause();
  });
  ASSERT_TRUE(WaitFor(*state, 1, std::chrono::seconds(10)));
  // The worker is gone but its parent lives: rank 1 still holds the node at 5.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(cache->NodeStep(), 5u);
  EXPECT_EQ(cache->ParticipantStep(1), 5u);
  kill(rank, SIGKILL);
  ASSERT_EQ(WaitExitCode(rank), 128 + SIGKILL);
  const auto t0 = Clock::now();
  while (cache->NodeStep() != 100u && Clock::now() - t0 < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(cache->NodeStep(), 100u);
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(600));  // liveness checked every 250 ms
  bool seen_dead = false;
  for (const auto& p : cache->Participants()) {
    if (p.participant == 1) seen_dead = !p.owner_alive;
  }
  EXPECT_TRUE(seen_dead);
  // A restarted rank 1 (new owner) starts afresh and holds the node again
  // where it restarts: its reads from there on are still to come.
  ASSERT_TRUE(cache->ReportProgress(1, 7, getpid()).ok());
  EXPECT_EQ(cache->ParticipantStep(1), 7u);
  EXPECT_EQ(cache->NodeStep(), 7u);
  ASSERT_TRUE(cache->ReportProgress(1, 150, getpid()).ok());
  ASSERT_TRUE(cache->ReportProgress(0, 200, getpid()).ok());
  EXPECT_EQ(cache->NodeStep(), 150u);
}

TEST(Participants, ReportsFromManyThreadsKeepTheMaximum) {
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::uint64_t s = 0; s < 2000; ++s) {
        EXPECT_TRUE(
            cache->ReportProgress(static_cast<std::uint32_t>(t % 2), s * 4 + t, getpid()).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(cache->ParticipantStep(0), 1999u * 4 + 2);
  EXPECT_EQ(cache->ParticipantStep(1), 1999u * 4 + 3);
  EXPECT_EQ(cache->Participants().size(), 2u);
  EXPECT_EQ(cache->NodeStep(), 1999u * 4 + 2);
}

TEST(Participants, ALateParticipantHoldsTheNodeBackWhileOthersComputeTheNodeStep) {
  // Other threads compute the node step all the time (every read does); one
  // that scanned the table before a participant registered must not raise the
  // node step past it afterwards.
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  const std::int32_t me = getpid();
  ASSERT_TRUE(cache->ReportProgress(0, 1000, me).ok());
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) (void)cache->NodeStep();
    });
  }
  for (std::uint32_t late = 1; late <= 200; ++late) {
    ASSERT_TRUE(cache->ReportProgress(late, late, me).ok());
    EXPECT_EQ(cache->NodeStep(), late) << "participant " << late;
    ASSERT_TRUE(cache->FinishParticipant(late).ok());
    const auto t0 = Clock::now();
    while (cache->NodeStep() != 1000u && Clock::now() - t0 < std::chrono::seconds(2)) {
    }
    EXPECT_EQ(cache->NodeStep(), 1000u);
  }
  stop = true;
  for (auto& th : readers) th.join();
}

TEST(Participants, ALateParticipantAboveTheFloorIsNotPassedByAStaleScan) {
  // The floor lags the slowest participant until someone computes the node
  // step. A participant registering between the floor and the others' steps
  // does not lower the floor, yet a scan that began before it registered must
  // not raise the floor past it.
  ScopedSegmentName name;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  const std::int32_t me = getpid();
  ASSERT_TRUE(cache->ReportProgress(0, 0, me).ok());
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) (void)cache->NodeStep();
    });
  }
  int passed = 0;
  for (std::uint32_t late = 1; late < detail::kMaxParticipants; ++late) {
    const std::uint64_t leader = 1000u * late;
    ASSERT_TRUE(cache->ReportProgress(0, leader, me).ok());
    ASSERT_TRUE(cache->ReportProgress(late, leader - 500, me).ok());
    if (cache->NodeStep() != leader - 500) ++passed;
    ASSERT_TRUE(cache->FinishParticipant(late).ok());
    const auto t0 = Clock::now();
    while (cache->NodeStep() != leader && Clock::now() - t0 < std::chrono::seconds(2)) {
    }
    ASSERT_EQ(cache->NodeStep(), leader);
  }
  stop = true;
  for (auto& th : readers) th.join();
  EXPECT_EQ(passed, 0) << "times a registering participant was passed";
}

}  // namespace
}  // namespace prescient::cache
