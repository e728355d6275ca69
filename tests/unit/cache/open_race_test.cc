// Processes that start together (40 ranks and workers of a job launched at
// once) must all end up attached to one segment, also on a small tmpfs that
// holds one segment but not one per racer.
#include <gtest/gtest.h>

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
using testing::SmallTmpfs;
using testing::WaitExitCode;

constexpr int kProcesses = 40;

struct Race {
  std::atomic<int> go{0};
  std::atomic<int> opened{0};
  std::atomic<int> done{0};
  std::atomic<std::uint64_t> device[kProcesses];
  std::atomic<std::uint64_t> inode[kProcesses];
};

TEST(OpenRace, FortyProcessesStartingTogetherShareOneSegmentOnASmallTmpfs) {
  // Room for one 16 MiB segment, not for two.
  SmallTmpfs fs("20m");
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a small tmpfs here (" << fs.error() << ")";
  ScopedSegmentName name;
  name.options().shm_dir = fs.dir();
  name.options().capacity_bytes = 16 << 20;
  auto* race = SharedObject<Race>();
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    children.push_back(ForkChild([&, i] {
      while (race->go.load() == 0) {  // all released at once
      }
      auto cache = NodeCache::Open(name.options());
      if (!cache.ok()) {
        std::fprintf(stderr, "process %d: %s\n", i, cache.status().ToString().c_str());
        race->done.fetch_add(1);  // do not keep the others waiting
        return 1;
      }
      const auto id = cache.value()->segment_identity();
      race->device[i] = id.first;
      race->inode[i] = id.second;
      race->opened.fetch_add(1);
      // Every process reads rows through the shared segment.
      const DatasetSlot ds = cache.value()->RegisterDataset({41, 1}, 4096, 100).value();
      std::vector<std::uint64_t> rows = {static_cast<std::uint64_t>(i), 99};
      std::vector<std::byte> out(2 * 4096);
      if (!cache.value()
               ->ReadRows(ds, rows, out.data(), PatternLoader{3, 4096, nullptr}, nullptr)
               .ok() ||
          FirstBadByte(3, rows, out.data(), 4096) != -1) {
        race->done.fetch_add(1);
        return 2;
      }
      race->done.fetch_add(1);
      // Stay attached until everyone has opened: a segment that outlived its
      // users would hide a process that made its own.
      while (race->done.load() < kProcesses) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      return 0;
    }));
  }
  race->go.store(1);
  int failed = 0;
  for (pid_t child : children) failed += WaitExitCode(child) != 0;
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(race->opened.load(), kProcesses);
  int others = 0;
  for (int i = 1; i < kProcesses; ++i) {
    others += race->device[i] != race->device[0] || race->inode[i] != race->inode[0];
  }
  EXPECT_EQ(others, 0) << "processes attached to a segment of their own";
}

}  // namespace
}  // namespace prescient::cache
