// Several threads and several processes hammering the same rows: every byte
// checked, and with room for everything each row is loaded exactly once.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::FirstBadByte;
using testing::ForkChild;
using testing::PatternLoader;
using testing::ScopedSegmentName;
using testing::SharedObject;
using testing::WaitExitCode;

struct Dataset {
  DatasetSlot slot;
  std::uint64_t bytes;
  std::uint64_t salt;
};

// Random selections (with repeats) over the datasets; returns wrong reads.
int Hammer(NodeCache& cache, const std::vector<Dataset>& sets, std::uint64_t rows_per_set,
           int iterations, std::uint64_t seed, std::atomic<std::uint64_t>* loaded) {
  std::mt19937_64 rng(seed);
  int bad = 0;
  std::vector<std::byte> out;
  std::vector<std::uint64_t> rows;
  for (int it = 0; it < iterations; ++it) {
    const Dataset& d = sets[rng() % sets.size()];
    rows.resize(1 + rng() % 8);
    for (auto& r : rows) r = rng() % rows_per_set;
    out.assign(rows.size() * d.bytes, std::byte{0});
    Status s =
        cache.ReadRows(d.slot, rows, out.data(), PatternLoader{d.salt, d.bytes, loaded}, nullptr);
    if (!s.ok() || FirstBadByte(d.salt, rows, out.data(), d.bytes) != -1) ++bad;
  }
  return bad;
}

std::vector<Dataset> Register(NodeCache& cache, std::uint64_t rows) {
  // 8 KiB rows are copied under the lock; 20 KiB rows take the pin path.
  return {{cache.RegisterDataset({1, 1}, 8 << 10, rows).value(), 8 << 10, 11},
          {cache.RegisterDataset({2, 2}, 20 << 10, rows).value(), 20 << 10, 22},
          {cache.RegisterDataset({3, 3}, 700, rows).value(), 700, 33}};
}

TEST(Concurrency, ThreadsWithEvictions) {
  ScopedSegmentName name;
  name.options().capacity_bytes = 1 << 20;  // far less than the data: constant eviction
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  const auto sets = Register(*cache.value(), 200);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { bad += Hammer(*cache.value(), sets, 200, 400, t, nullptr); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(cache.value()->Stats().evictions, 0u);
}

TEST(Concurrency, ProcessesWithEvictions) {
  ScopedSegmentName name;
  name.options().capacity_bytes = 1 << 20;
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  const auto sets = Register(*cache.value(), 200);
  std::vector<pid_t> children;
  for (int c = 0; c < 3; ++c) {
    children.push_back(ForkChild([&, c] {
      if (c == 0) {  // a DataLoader-style worker: uses the inherited handle
        return Hammer(*cache.value(), sets, 200, 300, 100 + c, nullptr) == 0 ? 0 : 1;
      }
      auto own = NodeCache::Open(name.options());  // an independent rank
      if (!own.ok()) return 2;
      const auto mine = Register(*own.value(), 200);
      return Hammer(*own.value(), mine, 200, 300, 100 + c, nullptr) == 0 ? 0 : 1;
    }));
  }
  EXPECT_EQ(Hammer(*cache.value(), sets, 200, 300, 99, nullptr), 0);
  for (pid_t pid : children) EXPECT_EQ(WaitExitCode(pid), 0);
  EXPECT_GT(cache.value()->Stats().evictions, 0u);
}

// Seven readers (four processes, two threads in three of them) read the same
// rows in their own orders, with a slow loader so that claims overlap in
// time. Returns the node's counters, the rows loaded in all and those loaded
// by readers that stopped waiting for them (ReadRowsStats::not_awaited).
struct SharedReads {
  CacheStats node;
  std::uint64_t loaded = 0;
  std::uint64_t not_awaited = 0;
};
constexpr std::uint64_t kSharedRows = 150;

SharedReads ReadTheSameRowsEverywhere(std::uint32_t wait_patience_loads) {
  ScopedSegmentName name;
  name.options().wait_patience_loads = wait_patience_loads;
  auto cache = NodeCache::Open(name.options());  // 8 MiB: everything fits
  EXPECT_TRUE(cache.ok()) << cache.status().message();
  if (!cache.ok()) return {};
  constexpr std::uint64_t kRows = kSharedRows;
  constexpr std::uint64_t kBytes = 20 << 10;
  const DatasetSlot ds = cache.value()->RegisterDataset({7, 7}, kBytes, kRows).value();
  auto* loaded = SharedObject<std::atomic<std::uint64_t>>();
  auto* not_awaited = SharedObject<std::atomic<std::uint64_t>>();
  auto* bad = SharedObject<std::atomic<int>>();
  // Every reader reads every row, in its own order, in batches of 3, with a
  // slow loader so claims overlap in time.
  auto reader = [&](std::uint64_t seed) {
    std::vector<std::uint64_t> order(kRows);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
    std::vector<std::byte> out(3 * kBytes);
    for (std::size_t i = 0; i < kRows; i += 3) {
      std::span<const std::uint64_t> batch(order.data() + i, std::min<std::size_t>(3, kRows - i));
      auto slow = [&](std::span<const std::uint64_t> rows, std::span<std::byte* const> dest) {
        std::this_thread::sleep_for(std::chrono::microseconds(300));
        return PatternLoader{5, kBytes, loaded}(rows, dest);
      };
      ReadRowsStats st;
      Status s = cache.value()->ReadRows(ds, batch, out.data(), slow, nullptr, &st);
      if (!s.ok() || FirstBadByte(5, batch, out.data(), kBytes) != -1) bad->fetch_add(1);
      not_awaited->fetch_add(st.not_awaited);
    }
  };
  std::vector<pid_t> children;
  for (int c = 0; c < 3; ++c)
    children.push_back(ForkChild([&, c] {
      std::thread helper(reader, 1000 + c);  // a second thread in each child
      reader(c);
      helper.join();
      return 0;
    }));
  reader(77);
  for (pid_t pid : children) EXPECT_EQ(WaitExitCode(pid), 0);
  EXPECT_EQ(bad->load(), 0);
  return {cache.value()->Stats(), loaded->load(), not_awaited->load()};
}

TEST(Concurrency, EachRowLoadedOnceAcrossProcessesAndThreads) {
  // Readers that wait for every row in flight until it is published.
  const SharedReads reads = ReadTheSameRowsEverywhere(/*wait_patience_loads=*/0);
  EXPECT_EQ(reads.loaded, kSharedRows);  // nobody loaded a row somebody else loaded
  EXPECT_EQ(reads.not_awaited, 0u);
  EXPECT_EQ(reads.node.misses, kSharedRows);
  EXPECT_EQ(reads.node.hits + reads.node.waits, 7 * kSharedRows - kSharedRows);
}

TEST(Concurrency, ImpatientReadersLoadOnlyWhatTheyStoppedWaitingFor) {
  // Readers with the default patience: a row another reader still loads
  // after twice a reader's own loads' time is loaded again, privately. Each
  // row is still claimed (and cached) once, and every other load is counted.
  const SharedReads reads = ReadTheSameRowsEverywhere(/*wait_patience_loads=*/2);
  EXPECT_EQ(reads.node.misses, kSharedRows);
  EXPECT_EQ(reads.loaded, kSharedRows + reads.not_awaited);
  EXPECT_EQ(reads.node.hits + reads.node.waits + reads.not_awaited, 7 * kSharedRows - kSharedRows);
  EXPECT_EQ(reads.node.rows_resident, kSharedRows);
}

}  // namespace
}  // namespace prescient::cache
