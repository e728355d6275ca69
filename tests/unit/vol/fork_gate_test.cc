// fork() while the prefetch leader's thread holds a lock the child needs: a
// child forked then would inherit the lock held by a thread it does not have,
// and hang. Two such locks: HDF5's global lock while the thread resolves a
// dataset (vol/schedule/dataset_resolver.h; the child hangs on its first HDF5
// call), and the node segment's leader watch while the thread judges whether
// the leader is stuck (NodeCache::TryBecomeLeader; the child hangs at its
// first look at the leader). The connector's fork handlers
// (vol/serve/cache_client.cc) make fork() wait for both. Real fork(), real
// HDF5, a real segment.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cache/core/node_cache.h"
#include "tests/unit/cache/test_support.h"
#include "tests/unit/vol/int_rows_file.h"
#include "vol/schedule/dataset_resolver.h"
#include "vol/serve/cache_client.h"

namespace prescient::vol {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRows = 64;

// A file with one contiguous int dataset "x" of kRows rows (row i holds i).
class ForkGate : public ::testing::Test {
 protected:
  void SetUp() override {
    CacheClient::Get();  // installs the connector's fork handlers
    ASSERT_TRUE(file_.ok());
    path_ = file_.path();
  }

  testing::IntRowsFile file_{"fork-gate", kRows};
  std::string path_;
};

// The child's work: reads the dataset with HDF5 (its first HDF5 call since
// the fork takes HDF5's lock). Exit 0 when the values are right.
int ReadInChild(const std::string& path) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return 1;
  const hid_t dataset = H5Dopen2(file, "x", H5P_DEFAULT);
  std::vector<int> values(kRows, -1);
  const herr_t read =
      H5Dread(dataset, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  H5Dclose(dataset);
  H5Fclose(file);
  if (read < 0) return 2;
  for (int i = 0; i < kRows; ++i) {
    if (values[i] != i) return 3;
  }
  return 0;
}

// The child's exit code, or -1 if it has not ended within `limit` (then it is
// killed: it hangs).
int WaitBounded(pid_t pid, std::chrono::seconds limit) {
  const auto end = Clock::now() + limit;
  for (;;) {
    int status = 0;
    const pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (got < 0 || Clock::now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

TEST_F(ForkGate, ForkWaitsForTheResolutionUnderWay) {
  std::atomic<bool> held{false};
  Clock::time_point released;
  std::thread resolver([&] {
    DatasetResolver::LockForFork();  // what a resolution holds for its length
    held = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    released = Clock::now();
    DatasetResolver::UnlockAfterFork();
  });
  while (!held) std::this_thread::yield();
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  const Clock::time_point forked = Clock::now();
  resolver.join();
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitBounded(pid, std::chrono::seconds(10)), 0);
  EXPECT_GE(std::chrono::duration_cast<std::chrono::microseconds>(forked - released).count(), 0)
      << "fork() returned before the resolution ended (microseconds)";
}

TEST_F(ForkGate, ForkWaitsForTheLeaderWatchUnderWay) {
  cache::testing::ScopedSegmentName name;
  auto opened = cache::NodeCache::Open(name.options());
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  cache::NodeCache* segment = opened.value().get();
  // This process leads: a child's look at the leader then judges it (under the watch).
  ASSERT_TRUE(segment->TryBecomeLeader());
  (void)CacheClient::Get().ExchangeSegmentForTesting(std::move(opened.value()));

  std::atomic<bool> held{false};
  Clock::time_point released;
  std::thread prefetch([&] {
    segment->LockForFork();  // the watch, as TryBecomeLeader holds it while it judges
    held = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    released = Clock::now();
    segment->UnlockAfterFork();
  });
  while (!held) std::this_thread::yield();
  const pid_t pid = fork();
  // The child: its leader (this process) is alive and beating, so it does not lead.
  if (pid == 0) _exit(segment->TryBecomeLeader() ? 1 : 0);
  const Clock::time_point forked = Clock::now();
  prefetch.join();
  std::unique_ptr<cache::NodeCache> restored =
      CacheClient::Get().ExchangeSegmentForTesting(nullptr);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitBounded(pid, std::chrono::seconds(10)), 0) << "-1: the child hung at the watch";
  EXPECT_GE(std::chrono::duration_cast<std::chrono::microseconds>(forked - released).count(), 0)
      << "fork() returned while the leader watch was held (microseconds)";
  restored.reset();
  ::unlink(name.path().c_str());
}

TEST_F(ForkGate, ChildrenForkedWhileDatasetsAreResolvedUseHdf5) {
  if (!DatasetResolver::Available()) GTEST_SKIP() << "HDF5 is not thread-safe: no resolutions";
  // The prefetch thread's part: resolve the dataset again and again, so that
  // almost every fork() below comes while a resolution holds HDF5's lock.
  std::atomic<bool> stop{false};
  std::atomic<int> resolved{0};
  std::atomic<int> failed{0};
  std::thread prefetch([&] {
    while (!stop) {
      if (DatasetResolver::Resolve(path_, "x").ok()) {
        ++resolved;
      } else {
        ++failed;
      }
    }
  });
  while (resolved == 0 && failed == 0) std::this_thread::yield();
  constexpr int kForks = 30;
  int hung = 0;
  int wrong = 0;
  for (int i = 0; i < kForks; ++i) {
    const pid_t pid = fork();
    if (pid == 0) _exit(ReadInChild(path_));
    ASSERT_GT(pid, 0);
    const int code = WaitBounded(pid, std::chrono::seconds(10));
    if (code > 0) ++wrong;
    if (code == -1 && ++hung == 1) break;  // one hang is enough; each costs 10 s
  }
  stop = true;
  prefetch.join();
  EXPECT_EQ(failed.load(), 0) << "the dataset could not be resolved";
  EXPECT_GT(resolved.load(), kForks / 2);
  EXPECT_EQ(hung, 0) << "a child hung in its first HDF5 call";
  EXPECT_EQ(wrong, 0) << wrong << " of " << kForks << " children read wrong values or failed";
}

}  // namespace
}  // namespace prescient::vol
