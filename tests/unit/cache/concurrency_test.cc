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

TEST(Concurrency, EachRowLoadedOnceAcrossProcessesAndThreads) {
  ScopedSegmentName name;
  auto cache = NodeCache::Open(name.options());  // 8 MiB: everything fits
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  constexpr std::uint64_t kRows = 150;
  constexpr std::uint64_t kBytes = 20 << 10;
  const DatasetSlot ds = cache.value()->RegisterDataset({7, 7}, kBytes, kRows).value();
  auto* loaded = SharedObject<std::atomic<std::uint64_t>>();
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
      Status s = cache.value()->ReadRows(ds, batch, out.data(), slow, nullptr);
      if (!s.ok() || FirstBadByte(5, batch, out.data(), kBytes) != -1) bad->fetch_add(1);
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
  EXPECT_EQ(loaded->load(), kRows);  // nobody loaded a row somebody else loaded
  const CacheStats st = cache.value()->Stats();
  EXPECT_EQ(st.misses, kRows);
  EXPECT_EQ(st.hits + st.waits, 7 * kRows - kRows);
}

}  // namespace
}  // namespace prescient::cache
