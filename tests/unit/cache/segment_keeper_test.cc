// The segment keeper (cache/core/segment_keeper.h): DataLoader workers that
// exit every epoch, forked from a training process that never opens the
// cache, leave their rows to the next epoch's workers; the segment still goes
// when the training process does, however it ends, and a keeper whose segment
// was replaced lets it go. Real processes, a real SIGKILL, measured on a
// private tmpfs.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::ForkChild;
using testing::PatternLoader;
using testing::ScopedSegmentName;
using testing::SmallTmpfs;
using testing::WaitExitCode;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kRow = 64 << 10;
constexpr std::uint64_t kRegistryOnly = 64 << 10;
constexpr int kRows = 48;

bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// The training process: forks nothing itself here, opens nothing, waits.
pid_t StartAnchor() {
  return ForkChild([] {
    for (;;) pause();
    return 0;
  });
}

// One epoch's worker: opens the cache for `anchor`, reads rows 0..kRows-1,
// exits with os._exit (no destructor, no detach). Exit code: 10 + how many
// rows were already resident when it opened (capped), 1 on failure.
int RunWorker(CacheOptions options, const ProcessIdentity& anchor, bool expect_keeper_notice) {
  const pid_t pid = ForkChild([&]() -> int {
    options.anchor = anchor;
    auto cache = NodeCache::Open(options);
    if (!cache.ok()) return 1;
    const bool noticed = !cache.value()->notices().empty();
    if (noticed != expect_keeper_notice) return 2;
    const std::uint64_t resident = cache.value()->Stats().rows_resident;
    auto ds = cache.value()->RegisterDataset({77, 1}, kRow, 1000);
    if (!ds.ok()) return 3;
    std::vector<std::uint64_t> rows(kRows);
    for (int i = 0; i < kRows; ++i) rows[i] = static_cast<std::uint64_t>(i);
    std::vector<std::byte> out(rows.size() * kRow);
    if (!cache.value()
             ->ReadRows(ds.value(), rows, out.data(), PatternLoader{5, kRow, nullptr}, nullptr)
             .ok()) {
      return 4;
    }
    _exit(10 + static_cast<int>(std::min<std::uint64_t>(resident, 100)));
  });
  return WaitExitCode(pid);
}

// The user's directory of the cache files in `fs`.
std::string UserDir(const SmallTmpfs& fs) {
  return fs.dir() + "/prescient-u" + std::to_string(geteuid());
}

// The files in the user's directory of the cache (the node's registry, and
// nothing else while the segment has no name).
std::vector<std::string> FilesOfTheUser(const SmallTmpfs& fs) {
  std::vector<std::string> names;
  if (DIR* d = opendir(UserDir(fs).c_str())) {
    while (const dirent* e = readdir(d)) {
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
        names.push_back(e->d_name);
    }
    closedir(d);
  }
  return names;
}

// Each test: a private 96 MiB tmpfs for the cache files, a segment name of
// its own, options that start the keeper, and a training process (the anchor)
// that the test ends with SIGKILL, or the fixture does.
class SegmentKeeper : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs_.mounted()) GTEST_SKIP() << "cannot mount a small tmpfs here (" << fs_.error() << ")";
    name_.options().shm_dir = fs_.dir();
    name_.options().capacity_bytes = 16 << 20;
    name_.options().keeper_executable = PRESCIENT_KEEPER_PATH;
    options_ = name_.options();
    anchor_pid_ = StartAnchor();
    anchor_ = IdentityOf(anchor_pid_);
    ASSERT_NE(anchor_.pid, 0);
  }
  void TearDown() override {
    if (anchor_pid_ > 0) EndAnchor();
  }

  // The training process ends (any way: SIGKILL); returns its exit code.
  int EndAnchor() {
    kill(anchor_pid_, SIGKILL);
    const int code = WaitExitCode(anchor_pid_);
    anchor_pid_ = 0;
    return code;
  }
  bool SegmentGoesWithin(std::chrono::milliseconds limit) const {
    return WaitUntil([&] { return fs_.used_bytes() <= kRegistryOnly; }, limit);
  }

  SmallTmpfs fs_{"96m"};
  ScopedSegmentName name_;
  CacheOptions options_;
  pid_t anchor_pid_ = 0;
  ProcessIdentity anchor_;
};

TEST_F(SegmentKeeper, NextEpochsWorkersFindTheRowsAndTheSegmentGoesWithTheAnchor) {
  EXPECT_EQ(RunWorker(options_, anchor_, false), 10);  // epoch 1: cold
  // Nobody uses the segment now, and its rows are still there.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GT(fs_.used_bytes(), std::uint64_t{kRows} * kRow);
  EXPECT_EQ(RunWorker(options_, anchor_, false), 10 + kRows);  // epoch 2: warm
  EXPECT_EQ(RunWorker(options_, anchor_, false), 10 + kRows);  // one keeper serves every epoch
  EXPECT_EQ(FilesOfTheUser(fs_).size(), 1u);                   // the registry
  ASSERT_EQ(EndAnchor(), 128 + SIGKILL);
  EXPECT_TRUE(SegmentGoesWithin(std::chrono::seconds(5)))
      << fs_.used_bytes() << " bytes still used after the anchor died";
  // No file is left either: nobody closed the cache (the workers ended with
  // _exit), so the keeper removed the registry on its way out.
  EXPECT_TRUE(WaitUntil([&] { return FilesOfTheUser(fs_).empty(); }, std::chrono::seconds(5)))
      << FilesOfTheUser(fs_).front() << " is left";
}

TEST_F(SegmentKeeper, ARegistryRemovedBeforeTheAnchorGoesIsNotMadeAgain) {
  EXPECT_EQ(RunWorker(options_, anchor_, false), 10);
  const std::vector<std::string> files = FilesOfTheUser(fs_);
  ASSERT_EQ(files.size(), 1u);
  ASSERT_EQ(unlink((UserDir(fs_) + "/" + files[0]).c_str()), 0);  // e.g. a job's own clean-up
  ASSERT_EQ(EndAnchor(), 128 + SIGKILL);
  EXPECT_TRUE(SegmentGoesWithin(std::chrono::seconds(5)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(FilesOfTheUser(fs_).empty()) << FilesOfTheUser(fs_).front() << " was made again";
}

TEST_F(SegmentKeeper, ARegistryOthersStillHoldStaysWhenTheAnchorGoes) {
  // Another rank of the node holds the segment open (it reads in its own
  // process); one rank's training process ends: its keeper goes, the registry
  // and the rows stay for the other rank's next workers.
  const pid_t other_rank = ForkChild([&] {
    CacheOptions own = options_;
    own.anchor = SelfIdentity();
    auto cache = NodeCache::Open(own);
    if (!cache.ok()) return 1;
    for (;;) pause();
    return 0;
  });
  EXPECT_EQ(RunWorker(options_, anchor_, false), 10);
  ASSERT_EQ(EndAnchor(), 128 + SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the keeper has gone
  EXPECT_EQ(FilesOfTheUser(fs_).size(), 1u);
  EXPECT_EQ(RunWorker(options_, IdentityOf(other_rank), false), 10 + kRows);
  kill(other_rank, SIGKILL);
  WaitExitCode(other_rank);
}

TEST_F(SegmentKeeper, NoKeeperForTheAnchorItselfOrWithoutAnAnchor) {
  EXPECT_EQ(RunWorker(options_, ProcessIdentity{}, false), 10);
  EXPECT_TRUE(SegmentGoesWithin(std::chrono::seconds(2)));
  // A process working for itself (the anchor opens the cache: main-opens loaders).
  const pid_t pid = ForkChild([&]() -> int {
    CacheOptions own = options_;
    own.anchor = SelfIdentity();
    auto cache = NodeCache::Open(own);
    _exit(cache.ok() ? 0 : 1);
  });
  EXPECT_EQ(WaitExitCode(pid), 0);
  EXPECT_TRUE(SegmentGoesWithin(std::chrono::seconds(2)));
}

TEST_F(SegmentKeeper, MissingKeeperIsANoticeAndEachEpochStartsCold) {
  options_.keeper_executable = fs_.dir() + "/no-such-keeper";
  EXPECT_EQ(RunWorker(options_, anchor_, true), 10);
  EXPECT_EQ(RunWorker(options_, anchor_, true), 10);
}

TEST_F(SegmentKeeper, OthersHoldTheSegmentWhileAKeeperKeepsItForALiveProcess) {
  // The node agent's view (NodeCache::OthersHold): this process holds the
  // segment for itself, as the agent does; the training process never
  // attaches, its workers come and go.
  CacheOptions own = options_;
  own.anchor = SelfIdentity();
  auto agent = NodeCache::Open(own);
  ASSERT_TRUE(agent.ok()) << agent.status().message();
  EXPECT_FALSE(agent.value()->OthersHold());
  EXPECT_EQ(RunWorker(options_, anchor_, false), 10);
  // Between two generations of workers nobody is attached, and the job is
  // still there: the keeper holds the segment for the training process.
  EXPECT_TRUE(agent.value()->OthersHold());
  ASSERT_EQ(EndAnchor(), 128 + SIGKILL);
  EXPECT_TRUE(WaitUntil([&] { return !agent.value()->OthersHold(); }, std::chrono::seconds(5)))
      << "the keeper outlived the training process";
  // A process attached to the segment holds it too.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t reader = ForkChild([&]() -> int {
    CacheOptions mine = options_;
    mine.anchor = SelfIdentity();  // no keeper for the test process
    auto cache = NodeCache::Open(mine);
    if (!cache.ok()) return 1;
    if (!cache.value()->RegisterDataset({77, 1}, kRow, 1000).ok()) return 2;
    const char byte = 1;
    if (write(ready[1], &byte, 1) != 1) return 3;
    for (;;) pause();
    return 0;
  });
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  close(ready[1]);
  EXPECT_TRUE(agent.value()->OthersHold());
  kill(reader, SIGKILL);
  WaitExitCode(reader);
  EXPECT_FALSE(agent.value()->OthersHold());
}

TEST_F(SegmentKeeper, KeeperOfAReplacedSegmentLetsItGo) {
  EXPECT_EQ(RunWorker(options_, anchor_, false), 10);
  const std::uint64_t first = fs_.used_bytes();
  // The next job asks for another size while the old keeper still holds its
  // segment: a new segment replaces it in the registry, and the old keeper
  // (which now holds memory nobody can reach) exits.
  options_.capacity_bytes = 24 << 20;
  EXPECT_EQ(RunWorker(options_, anchor_, false), 10);
  EXPECT_TRUE(WaitUntil([&] { return fs_.used_bytes() < first + (kRows / 2) * kRow; },
                        std::chrono::seconds(10)))
      << "the replaced segment is still held: " << fs_.used_bytes() << " bytes used";
  EndAnchor();
  EXPECT_TRUE(SegmentGoesWithin(std::chrono::seconds(5)));
}

}  // namespace
}  // namespace prescient::cache
