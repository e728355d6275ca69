// The segment is reclaimed when its last holder is gone, however the holders
// end: a DataLoader's main process SIGKILLed (the OOM killer) while its
// workers then leave with os._exit (no destructor runs anywhere), or every
// process SIGKILLed. Measured on a private tmpfs: its used bytes return to
// what the small registry file takes.
#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <functional>
#include <thread>
#include <vector>

#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::ForkChild;
using testing::PatternLoader;
using testing::ScopedSegmentName;
using testing::SharedObject;
using testing::SmallTmpfs;
using testing::WaitExitCode;
using testing::WaitFor;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kRow = 64 << 10;
constexpr std::uint64_t kRegistryOnly = 64 << 10;  // what may stay: the registry file

struct Job {
  std::atomic<int> ready{0};    // workers that read their rows
  std::atomic<int> release{0};  // 1: workers leave with _exit
  std::atomic<pid_t> workers[2];
};

// SIGKILL to a worker of the job: never to pid 0 or -1 (the whole group).
void KillWorker(pid_t pid) {
  ASSERT_GT(pid, 0);
  kill(pid, SIGKILL);
}

// Exited: all its threads are gone (IdentityOf; a zombie still waiting for its
// reaper counts). Under TSan, whose runtime starts a thread in every forked
// child, a SIGKILLed process once looked gone while its second thread still
// held the mappings; checks of the used bytes still wait a little for the
// pages rather than trust the order of the kernel's teardown.
bool Gone(pid_t pid) { return IdentityOf(pid).pid == 0; }

bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// A DataLoader-like job: the main process opens the cache, reads 4 MiB of
// rows and forks two workers that read more, then everyone waits.
pid_t StartJob(const CacheOptions& options, Job* job) {
  return ForkChild([options, job] {
    auto cache = NodeCache::Open(options);
    if (!cache.ok()) return 1;
    const DatasetSlot ds = cache.value()->RegisterDataset({31, 1}, kRow, 1000).value();
    std::vector<std::uint64_t> rows(64);
    for (std::uint64_t i = 0; i < rows.size(); ++i) rows[i] = i;
    std::vector<std::byte> out(rows.size() * kRow);
    if (!cache.value()
             ->ReadRows(ds, rows, out.data(), PatternLoader{1, kRow, nullptr}, nullptr)
             .ok()) {
      return 2;
    }
    for (int w = 0; w < 2; ++w) {
      job->workers[w] = ForkChild([&, w] {
        std::vector<std::uint64_t> mine = {100u + static_cast<std::uint64_t>(w), 5};
        if (!cache.value()
                 ->ReadRows(ds, mine, out.data(), PatternLoader{1, kRow, nullptr}, nullptr)
                 .ok()) {
          return 1;
        }
        // Its own pid first: the parent's store of ForkChild's result may come
        // after `ready`, and kill(0, SIGKILL) would kill the test's whole
        // process group (ctest and the CI script with it).
        job->workers[w].store(::getpid());
        job->ready.fetch_add(1);
        while (job->release.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        _exit(0);  // os._exit: no destructor, no detach
      });
    }
    for (;;) pause();
  });
}

TEST(Reclaim, MainKilledWorkersExitWithoutDetaching) {
  SmallTmpfs fs("64m");
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a small tmpfs here (" << fs.error() << ")";
  ScopedSegmentName name;
  name.options().shm_dir = fs.dir();
  name.options().capacity_bytes = 16 << 20;
  auto* job = SharedObject<Job>();
  const pid_t main = StartJob(name.options(), job);
  ASSERT_TRUE(WaitFor(job->ready, 2, std::chrono::seconds(10)));
  EXPECT_GT(fs.used_bytes(), 4u << 20);  // the segment holds the rows
  ASSERT_EQ(kill(main, SIGKILL), 0);     // the OOM killer takes the main process
  ASSERT_EQ(WaitExitCode(main), 128 + SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GT(fs.used_bytes(), 4u << 20);  // the workers still hold it
  job->release.store(1);                 // the workers leave with os._exit
  ASSERT_TRUE(WaitUntil([&] { return Gone(job->workers[0]) && Gone(job->workers[1]); },
                        std::chrono::seconds(10)));
  EXPECT_TRUE(WaitUntil([&] { return fs.used_bytes() <= kRegistryOnly; }, std::chrono::seconds(2)))
      << fs.used_bytes() << " bytes still used";
}

TEST(Reclaim, EveryProcessSigkilled) {
  SmallTmpfs fs("64m");
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a small tmpfs here (" << fs.error() << ")";
  ScopedSegmentName name;
  name.options().shm_dir = fs.dir();
  name.options().capacity_bytes = 16 << 20;
  auto* job = SharedObject<Job>();
  const pid_t main = StartJob(name.options(), job);
  ASSERT_TRUE(WaitFor(job->ready, 2, std::chrono::seconds(10)));
  // Workers first, then the main process: all SIGKILL.
  KillWorker(job->workers[0]);
  KillWorker(job->workers[1]);
  ASSERT_EQ(kill(main, SIGKILL), 0);
  ASSERT_EQ(WaitExitCode(main), 128 + SIGKILL);
  ASSERT_TRUE(WaitUntil([&] { return Gone(job->workers[0]) && Gone(job->workers[1]); },
                        std::chrono::seconds(10)));
  EXPECT_TRUE(WaitUntil([&] { return fs.used_bytes() <= kRegistryOnly; }, std::chrono::seconds(2)))
      << fs.used_bytes() << " bytes still used";
  // The next job on the node starts cleanly.
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  EXPECT_EQ(cache.value()->Stats().rows_resident, 0u);
}

TEST(Reclaim, KeptSegmentStaysForTheNextJobEvenWhenKilled) {
  SmallTmpfs fs("64m");
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a small tmpfs here (" << fs.error() << ")";
  ScopedSegmentName name;
  name.options().shm_dir = fs.dir();
  name.options().capacity_bytes = 16 << 20;
  name.options().keep_after_exit = true;  // PRESCIENT_KEEP_CACHE: leaving it is the point
  auto* job = SharedObject<Job>();
  const pid_t main = StartJob(name.options(), job);
  ASSERT_TRUE(WaitFor(job->ready, 2, std::chrono::seconds(10)));
  KillWorker(job->workers[0]);
  KillWorker(job->workers[1]);
  kill(main, SIGKILL);
  ASSERT_EQ(WaitExitCode(main), 128 + SIGKILL);
  ASSERT_TRUE(WaitUntil([&] { return Gone(job->workers[0]) && Gone(job->workers[1]); },
                        std::chrono::seconds(10)));
  EXPECT_GT(fs.used_bytes(), 4u << 20);
  name.options().keep_after_exit = false;
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  EXPECT_EQ(cache.value()->Stats().rows_resident, 66u);  // reused: 64 + the workers' 2
  cache.value().reset();                                 // not kept by this job: gone with it
  EXPECT_TRUE(WaitUntil([&] { return fs.used_bytes() <= kRegistryOnly; }, std::chrono::seconds(2)))
      << fs.used_bytes() << " bytes still used";
}

}  // namespace
}  // namespace prescient::cache
