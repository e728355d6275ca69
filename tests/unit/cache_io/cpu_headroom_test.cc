// CpuHeadroom: the machine's runnable threads against the process's CPUs,
// read for real from /proc (with threads that really spin), and the spare-CPU
// rule and its refresh with an injected load.
#include "cache/io/cpu_headroom.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace prescient::cache::io {
namespace {

using std::chrono::milliseconds;

TEST(CpuHeadroom, ReadsTheCallerAmongTheRunnableAndTheAllowedCpus) {
  const std::optional<CpuLoad> load = ReadCpuLoad();
  ASSERT_TRUE(load.has_value());
  EXPECT_GE(load->runnable, 1u);  // the caller runs
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(load->cpus, static_cast<std::uint32_t>(CPU_COUNT(&set)));
}

TEST(CpuHeadroom, SpinningThreadsAreCountedAndLeaveNoSpareCpu) {
  const std::uint32_t cpus = ReadCpuLoad().value().cpus;
  std::atomic<bool> stop{false};
  std::atomic<std::uint32_t> started{0};
  std::vector<std::thread> spinners;
  for (std::uint32_t i = 0; i < cpus + 1; ++i) {
    spinners.emplace_back([&] {
      started.fetch_add(1);
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  while (started.load() < cpus + 1) std::this_thread::yield();
  // A spinning thread is runnable whether it is on a CPU or waiting for one,
  // but the kernel's count is a sum over the CPUs' queues taken without a
  // lock: a thread moving between queues can be missed (a TSan build's CI run
  // saw 3 of 4 once). The most of a few samples counts them all.
  std::uint32_t most_runnable = 0;
  for (int sample = 0; sample < 50 && most_runnable < cpus + 2; ++sample) {
    const std::optional<CpuLoad> load = ReadCpuLoad();
    ASSERT_TRUE(load.has_value());
    most_runnable = std::max(most_runnable, load->runnable);
    if (most_runnable < cpus + 2) std::this_thread::sleep_for(milliseconds(2));
  }
  CpuHeadroom headroom;
  const bool spare = headroom.SpareCpu(0);
  stop = true;
  for (std::thread& t : spinners) t.join();
  EXPECT_GE(most_runnable, cpus + 2);  // the spinners and the caller
  EXPECT_FALSE(spare);
}

// A headroom whose every call samples `load` (refresh 0).
bool SpareAt(CpuLoad load, std::uint32_t own_helpers) {
  CpuHeadroom headroom(milliseconds(0), [load]() -> std::optional<CpuLoad> { return load; });
  return headroom.SpareCpu(own_helpers);
}

TEST(CpuHeadroom, SparesACpuWhenTheOthersLeaveOneFree) {
  EXPECT_TRUE(SpareAt({.runnable = 1, .cpus = 2}, 0));   // the caller alone on two CPUs
  EXPECT_FALSE(SpareAt({.runnable = 2, .cpus = 2}, 0));  // the caller and another reader
  EXPECT_TRUE(SpareAt({.runnable = 2, .cpus = 2}, 1));   // ... of which one is the helper itself
  EXPECT_FALSE(SpareAt({.runnable = 3, .cpus = 2}, 1));
  EXPECT_TRUE(SpareAt({.runnable = 7, .cpus = 8}, 0));
  EXPECT_FALSE(SpareAt({.runnable = 8, .cpus = 8}, 0));
}

TEST(CpuHeadroom, OneBusySampleDoesNotFlipTheAnswerASustainedLoadDoes) {
  std::atomic<std::uint32_t> runnable{1};
  int samples = 0;
  CpuHeadroom headroom(milliseconds(0), [&]() -> std::optional<CpuLoad> {
    ++samples;
    return CpuLoad{.runnable = runnable.load(), .cpus = 2};
  });
  EXPECT_TRUE(headroom.SpareCpu(0));
  runnable = 2;  // a kernel worker, runnable for one sample
  EXPECT_TRUE(headroom.SpareCpu(0));
  runnable = 1;
  EXPECT_TRUE(headroom.SpareCpu(0));
  runnable = 2;  // another reader, from now on
  int until_busy = 0;
  while (headroom.SpareCpu(0) && until_busy < 100) ++until_busy;
  EXPECT_GE(until_busy, 1);
  EXPECT_LE(until_busy, 4);
  runnable = 1;  // it left
  int until_spare = 0;
  while (!headroom.SpareCpu(0) && until_spare < 100) ++until_spare;
  EXPECT_LE(until_spare, 4);
  EXPECT_EQ(samples, 3 + until_busy + 1 + until_spare + 1);
}

TEST(CpuHeadroom, SamplesAtMostOncePerRefresh) {
  std::atomic<int> samples{0};
  CpuHeadroom headroom(milliseconds(200), [&]() -> std::optional<CpuLoad> {
    samples.fetch_add(1);
    return CpuLoad{.runnable = 1, .cpus = 4};
  });
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(headroom.SpareCpu(0));
  EXPECT_EQ(samples.load(), 1);
  std::this_thread::sleep_for(milliseconds(250));
  EXPECT_TRUE(headroom.SpareCpu(0));
  EXPECT_EQ(samples.load(), 2);
}

TEST(CpuHeadroom, AnUnreadableLoadMeansNoSpareCpu) {
  CpuHeadroom headroom(milliseconds(0), []() -> std::optional<CpuLoad> { return std::nullopt; });
  EXPECT_FALSE(headroom.SpareCpu(0));
  CpuHeadroom throwing(milliseconds(0), []() -> std::optional<CpuLoad> { throw 1; });
  EXPECT_FALSE(throwing.SpareCpu(0));
}

}  // namespace
}  // namespace prescient::cache::io
