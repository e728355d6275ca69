// Segment lifetime: permissions, unlink by the last process, keep_after_exit,
// stale segments of crashed jobs, and the failure paths of Open.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::FirstBadByte;
using testing::ForkChild;
using testing::PatternLoader;
using testing::ScopedSegmentName;
using testing::WaitExitCode;

bool Exists(const std::string& path) {
  struct stat st{};
  return stat(path.c_str(), &st) == 0;
}

ino_t Inode(const std::string& path) {
  struct stat st{};
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// Opens, registers dataset {9,9} (1000-byte rows) and loads rows 0..9, then
// dies without detaching: by _exit (like a DataLoader worker) or, with
// `kill_self`, by SIGKILL.
int FillTenRows(const CacheOptions& options, bool kill_self = false) {
  auto cache = NodeCache::Open(options);
  if (!cache.ok()) return 1;
  const DatasetSlot ds = cache.value()->RegisterDataset({9, 9}, 1000, 10).value();
  std::vector<std::uint64_t> rows = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<std::byte> out(10 * 1000);
  if (!cache.value()
           ->ReadRows(ds, rows, out.data(), PatternLoader{6, 1000, nullptr}, nullptr)
           .ok()) {
    return 2;
  }
  if (kill_self) raise(SIGKILL);
  _exit(0);  // like a DataLoader worker: no destructor, no detach
}

TEST(Segment, Mode0600AndRemovedByTheLastProcess) {
  ScopedSegmentName name;
  auto a = NodeCache::Open(name.options());
  ASSERT_TRUE(a.ok()) << a.status().message();
  struct stat st{};
  ASSERT_EQ(stat(name.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
  auto b = NodeCache::Open(name.options());
  ASSERT_TRUE(b.ok());
  a.value().reset();
  EXPECT_TRUE(Exists(name.path()));  // b still attached
  b.value().reset();
  EXPECT_FALSE(Exists(name.path()));
}

TEST(Segment, ForkedWorkerAttachesItselfAndDetachesCleanly) {
  ScopedSegmentName name;
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok());
  const pid_t child = ForkChild([&] {
    const DatasetSlot ds = cache.value()->RegisterDataset({1, 1}, 100, 10).value();
    std::uint64_t row = 3;
    std::vector<std::byte> out(100);
    if (!cache.value()
             ->ReadRows(ds, {&row, 1}, out.data(), PatternLoader{1, 100, nullptr}, nullptr)
             .ok()) {
      return 1;
    }
    cache.value().reset();  // a worker exiting normally: detaches its own record only
    return 0;
  });
  ASSERT_EQ(WaitExitCode(child), 0);
  EXPECT_TRUE(Exists(name.path()));  // the parent is still attached
  const DatasetSlot ds = cache.value()->RegisterDataset({1, 1}, 100, 10).value();
  EXPECT_TRUE(cache.value()->Contains(ds, 3));
  cache.value().reset();
  EXPECT_FALSE(Exists(name.path()));
}

TEST(Segment, KeepAfterExitKeepsRowsForTheNextJob) {
  ScopedSegmentName name;
  name.options().keep_after_exit = true;
  {
    auto cache = NodeCache::Open(name.options());
    ASSERT_TRUE(cache.ok());
    const DatasetSlot ds = cache.value()->RegisterDataset({9, 9}, 1000, 10).value();
    std::uint64_t row = 5;
    std::vector<std::byte> out(1000);
    ASSERT_TRUE(cache.value()
                    ->ReadRows(ds, {&row, 1}, out.data(), PatternLoader{6, 1000, nullptr}, nullptr)
                    .ok());
  }
  ASSERT_TRUE(Exists(name.path()));
  name.options().keep_after_exit = false;  // the next job does not keep it
  {
    auto cache = NodeCache::Open(name.options());
    ASSERT_TRUE(cache.ok());
    const DatasetSlot ds = cache.value()->RegisterDataset({9, 9}, 1000, 10).value();
    EXPECT_TRUE(cache.value()->Contains(ds, 5));
    std::uint64_t row = 5;
    std::vector<std::byte> out(1000);
    ReadRowsStats st;
    ASSERT_TRUE(
        cache.value()
            ->ReadRows(ds, {&row, 1}, out.data(), PatternLoader{6, 1000, nullptr}, nullptr, &st)
            .ok());
    EXPECT_EQ(st.hits, 1u);
    EXPECT_EQ(FirstBadByte(6, {&row, 1}, out.data(), 1000), -1);
  }
  EXPECT_FALSE(Exists(name.path()));
}

TEST(Segment, StaleSegmentOfACrashedJobIsReclaimed) {
  ScopedSegmentName name;
  ASSERT_EQ(WaitExitCode(ForkChild([&] { return FillTenRows(name.options(), true); })),
            128 + SIGKILL);
  ASSERT_TRUE(Exists(name.path()));  // the crashed job left it behind
  const ino_t stale = Inode(name.path());
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  EXPECT_NE(Inode(name.path()), stale);  // replaced by a fresh segment
  const DatasetSlot ds = cache.value()->RegisterDataset({9, 9}, 1000, 10).value();
  EXPECT_FALSE(cache.value()->Contains(ds, 0));
  cache.value().reset();
  EXPECT_FALSE(Exists(name.path()));
}

TEST(Segment, KeptSegmentOfAKilledJobIsRepairedAndReused) {
  ScopedSegmentName name;
  name.options().keep_after_exit = true;
  ASSERT_EQ(WaitExitCode(ForkChild([&] { return FillTenRows(name.options()); })), 0);
  const ino_t kept = Inode(name.path());
  name.options().keep_after_exit = false;
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  EXPECT_EQ(Inode(name.path()), kept);
  const DatasetSlot ds = cache.value()->RegisterDataset({9, 9}, 1000, 10).value();
  for (std::uint64_t r = 0; r < 10; ++r) EXPECT_TRUE(cache.value()->Contains(ds, r));
}

TEST(Segment, StaleTemporaryOfADeadCreatorIsSwept) {
  ScopedSegmentName name;
  // A creator killed before publishing leaves <path>.init.<pid>.
  const pid_t dead = ForkChild([] { return 0; });
  ASSERT_EQ(WaitExitCode(dead), 0);
  const std::string temp = name.path() + ".init." + std::to_string(dead);
  {
    std::ofstream(temp) << "partial";
  }
  ASSERT_TRUE(Exists(temp));
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok());
  EXPECT_FALSE(Exists(temp));
}

TEST(Segment, GarbageAtTheSegmentPathIsAClearError) {
  ScopedSegmentName name;
  {
    std::ofstream f(name.path());
    f << std::string(8192, 'x');
  }
  chmod(name.path().c_str(), 0600);
  auto cache = NodeCache::Open(name.options());
  ASSERT_FALSE(cache.ok());
  EXPECT_NE(cache.status().message().find("not a Prescient cache segment"), std::string::npos)
      << cache.status().message();
}

TEST(Segment, RefusesSegmentsOthersCanRead) {
  ScopedSegmentName name;
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok());
  ASSERT_EQ(chmod(name.path().c_str(), 0644), 0);
  auto second = NodeCache::Open(name.options());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("0600"), std::string::npos);
  chmod(name.path().c_str(), 0600);
}

TEST(Segment, RefusesASymbolicLinkInPlaceOfTheSegment) {
  // A link planted under the segment's name must not redirect the mapping,
  // even to a valid segment of the same user.
  ScopedSegmentName real;
  auto cache = NodeCache::Open(real.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  ScopedSegmentName name;
  ASSERT_EQ(symlink(real.path().c_str(), name.path().c_str()), 0) << std::strerror(errno);
  auto second = NodeCache::Open(name.options());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("not a regular file"), std::string::npos)
      << second.status().message();
  unlink(name.path().c_str());
}

TEST(Segment, ClearErrorsForBadOptionsAndPaths) {
  ScopedSegmentName name;
  name.options().capacity_bytes = 64 << 10;
  auto tiny = NodeCache::Open(name.options());
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("too small"), std::string::npos);
  name.options().capacity_bytes = 8 << 20;
  name.options().block_bytes = 3000;
  auto odd = NodeCache::Open(name.options());
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("power of two"), std::string::npos);
  name.options().block_bytes = 4096;
  name.options().shm_dir = "/nonexistent-prescient-dir";
  auto nodir = NodeCache::Open(name.options());
  ASSERT_FALSE(nodir.ok());
  EXPECT_NE(nodir.status().message().find("No such file"), std::string::npos);
}

// A genuinely full filesystem: a 1 MiB tmpfs mounted for the test. Mounting
// needs CAP_SYS_ADMIN, which tests get inside env/run (root in a private
// mount namespace); elsewhere the test is skipped, and the ENOSPC path is
// then covered only by code review of posix_fallocate's error handling.
TEST(Segment, FullShmIsReportedAtOpenNotAsSigbusLater) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("prescient-full-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  if (mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=1m,mode=0700") != 0) {
    const int err = errno;
    std::filesystem::remove(dir);
    GTEST_SKIP() << "cannot mount a small tmpfs here (" << std::strerror(err) << ")";
  }
  ScopedSegmentName name;
  name.options().shm_dir = dir;
  name.options().capacity_bytes = 4 << 20;
  auto cache = NodeCache::Open(name.options());
  ASSERT_FALSE(cache.ok());
  EXPECT_NE(cache.status().message().find("No space left"), std::string::npos)
      << cache.status().message();
  EXPECT_NE(cache.status().message().find("MiB free"), std::string::npos);
  EXPECT_TRUE(std::filesystem::is_empty(dir));  // no temporary left behind
  name.options().capacity_bytes = 512 << 10;    // fits: works
  auto small = NodeCache::Open(name.options());
  EXPECT_TRUE(small.ok()) << small.status().message();
  small = Status::Unavailable("closed");
  umount(dir.c_str());
  std::filesystem::remove(dir);
}

}  // namespace
}  // namespace prescient::cache
