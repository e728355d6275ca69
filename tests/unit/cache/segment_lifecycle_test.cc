// Segment lifetime: permissions, unlink by the last process, keep_after_exit,
// stale segments of crashed jobs, and the failure paths of Open.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cache/core/segment_layout.h"
#include "cache/core/segment_place.h"
#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::FirstBadByte;
using testing::ForkChild;
using testing::PatternLoader;
using testing::ScopedSegmentName;
using testing::SmallTmpfs;
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

TEST(Segment, UnnamedMode0600AndSharedThroughTheRegistry) {
  ScopedSegmentName name;
  auto a = NodeCache::Open(name.options());
  ASSERT_TRUE(a.ok()) << a.status().message();
  struct stat st{};
  ASSERT_EQ(stat(a.value()->segment_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_EQ(st.st_nlink, 0u);  // no name: freed with its last holder
  EXPECT_TRUE(Exists(name.path() + ".lock"));
  EXPECT_FALSE(Exists(name.path() + ".kept"));
  auto b = NodeCache::Open(name.options());  // an independent process would do the same
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value()->segment_identity(), a.value()->segment_identity());
  a.value().reset();
  auto c = NodeCache::Open(name.options());  // found through b, the holder left
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value()->segment_identity(), b.value()->segment_identity());
}

// A file the cache's users keep beside the segment (the connector's memo of
// resolved datasets) is removed with the registry by the last holder.
TEST(Segment, TheMemoBesideTheSegmentGoesWithTheRegistry) {
  ScopedSegmentName name;
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  const std::string memo = cache.value()->memo_path();
  EXPECT_EQ(memo, name.path() + ".resolved");
  const int fd = open(memo.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  close(fd);
  cache.value().reset();
  EXPECT_FALSE(Exists(name.path() + ".lock"));
  EXPECT_FALSE(Exists(memo));
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
  const DatasetSlot ds = cache.value()->RegisterDataset({1, 1}, 100, 10).value();
  EXPECT_TRUE(cache.value()->Contains(ds, 3));  // the parent's segment, with the child's row
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
  ASSERT_TRUE(Exists(name.path() + ".kept"));
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
    EXPECT_FALSE(Exists(name.path() + ".kept"));  // unnamed at once: gone with this job
  }
}

TEST(Segment, ACrashedJobLeavesNothingTheNextJobStartsFresh) {
  ScopedSegmentName name;
  ASSERT_EQ(WaitExitCode(ForkChild([&] { return FillTenRows(name.options(), true); })),
            128 + SIGKILL);
  EXPECT_FALSE(Exists(name.path() + ".kept"));  // nothing named; the registry names a dead holder
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  const DatasetSlot ds = cache.value()->RegisterDataset({9, 9}, 1000, 10).value();
  EXPECT_FALSE(cache.value()->Contains(ds, 0));  // a fresh segment
}

TEST(Segment, KeptSegmentOfAKilledJobIsRepairedAndReused) {
  ScopedSegmentName name;
  name.options().keep_after_exit = true;
  ASSERT_EQ(WaitExitCode(ForkChild([&] { return FillTenRows(name.options()); })), 0);
  const ino_t kept = Inode(name.path() + ".kept");
  ASSERT_NE(kept, 0u);
  name.options().keep_after_exit = false;
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  EXPECT_EQ(cache.value()->segment_identity().second, kept);
  const DatasetSlot ds = cache.value()->RegisterDataset({9, 9}, 1000, 10).value();
  for (std::uint64_t r = 0; r < 10; ++r) EXPECT_TRUE(cache.value()->Contains(ds, r));
}

TEST(Segment, GarbageAtTheSegmentPathIsReplacedWithOneNotice) {
  ScopedSegmentName name;
  {
    std::ofstream f(name.path() + ".kept");
    f << std::string(8192, 'x');
  }
  chmod((name.path() + ".kept").c_str(), 0600);
  const ino_t garbage = Inode(name.path() + ".kept");
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  ASSERT_EQ(cache.value()->notices().size(), 1u);
  EXPECT_NE(cache.value()->notices()[0].find("not a Prescient cache segment"), std::string::npos)
      << cache.value()->notices()[0];
  EXPECT_NE(cache.value()->segment_identity().second, garbage);  // a fresh segment
  EXPECT_FALSE(Exists(name.path() + ".kept"));                   // the garbage removed
  // A kept segment whose table offsets were overwritten, likewise.
  cache.value().reset();
  name.options().keep_after_exit = true;
  ASSERT_TRUE(NodeCache::Open(name.options()).ok());  // opened and closed: kept
  name.options().keep_after_exit = false;
  const std::string path = name.path() + ".kept";
  {
    const int fd = open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    const std::uint64_t bogus = 12345;  // off_datasets
    ASSERT_EQ(pwrite(fd, &bogus, sizeof(bogus), offsetof(detail::SegmentHeader, off_datasets)),
              static_cast<ssize_t>(sizeof(bogus)));
    close(fd);
  }
  auto again = NodeCache::Open(name.options());
  ASSERT_TRUE(again.ok()) << again.status().message();
  ASSERT_EQ(again.value()->notices().size(), 1u);
  EXPECT_NE(again.value()->notices()[0].find("table offsets"), std::string::npos)
      << again.value()->notices()[0];
}

TEST(Segment, RefusesSegmentsOthersCanRead) {
  ScopedSegmentName name;
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok());
  ASSERT_EQ(chmod(cache.value()->segment_file().c_str(), 0644), 0);
  auto second = NodeCache::Open(name.options());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("0600"), std::string::npos);
  chmod(cache.value()->segment_file().c_str(), 0600);
}

TEST(Segment, NeverFollowsASymbolicLinkInPlaceOfTheKeptSegment) {
  // A link planted under the kept segment's name must not redirect the
  // mapping, even to a valid segment of the same user: it is removed.
  ScopedSegmentName real;
  real.options().keep_after_exit = true;
  auto cache = NodeCache::Open(real.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  ScopedSegmentName name;
  ASSERT_EQ(symlink((real.path() + ".kept").c_str(), (name.path() + ".kept").c_str()), 0)
      << std::strerror(errno);
  auto second = NodeCache::Open(name.options());
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_NE(second.value()->segment_identity(), cache.value()->segment_identity());
  ASSERT_EQ(second.value()->notices().size(), 1u);
  EXPECT_NE(second.value()->notices()[0].find("symbolic link"), std::string::npos)
      << second.value()->notices()[0];
  struct stat st{};
  EXPECT_NE(lstat((name.path() + ".kept").c_str(), &st), 0);  // the link is gone
  EXPECT_TRUE(Exists(real.path() + ".kept"));                 // its target untouched
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

TEST(Segment, OpenReservesOnlyMetadataAndBacksTheDataAreaAsItFills) {
  SmallTmpfs fs("64m");
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a small tmpfs here (" << fs.error() << ")";
  ScopedSegmentName name;
  name.options().shm_dir = fs.dir();
  name.options().capacity_bytes = 48 << 20;
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  CacheStats st = cache.value()->Stats();
  EXPECT_LT(fs.used_bytes(), 4u << 20);  // a 48 MiB segment costs its metadata only
  EXPECT_LT(st.backed_bytes, 4u << 20);
  EXPECT_EQ(st.bytes_resident, 0u);
  constexpr std::uint64_t kBytes = 64 << 10;
  const DatasetSlot ds = cache.value()->RegisterDataset({3, 3}, kBytes, 1000).value();
  std::vector<std::uint64_t> rows(64);
  for (std::uint64_t i = 0; i < rows.size(); ++i) rows[i] = i;
  std::vector<std::byte> out(rows.size() * kBytes);
  ASSERT_TRUE(cache.value()
                  ->ReadRows(ds, rows, out.data(), PatternLoader{1, kBytes, nullptr}, nullptr)
                  .ok());
  st = cache.value()->Stats();
  EXPECT_EQ(st.bytes_resident, 64 * kBytes);
  // Backed: what the 4 MiB of rows needed, in 2 MiB extents, plus metadata.
  EXPECT_GE(st.backed_bytes, 4u << 20);
  EXPECT_LT(st.backed_bytes, 10u << 20);
  EXPECT_LT(fs.used_bytes(), 10u << 20);
  EXPECT_EQ(st.backing_failures, 0u);
}

TEST(Segment, FullTmpfsMakesTheCacheBehaveAsFullNeverSigbus) {
  SmallTmpfs fs("3m");
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a small tmpfs here (" << fs.error() << ")";
  ScopedSegmentName name;
  name.options().shm_dir = fs.dir();
  // Metadata that cannot be reserved: a clear error at Open, nothing left behind.
  name.options().capacity_bytes = 512 << 20;
  auto huge = NodeCache::Open(name.options());
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("No space left"), std::string::npos)
      << huge.status().message();
  EXPECT_NE(huge.status().message().find("MiB free"), std::string::npos);
  EXPECT_EQ(huge.status().code(), Status::Code::kResourceExhausted);
  EXPECT_LT(fs.used_bytes(), 64u << 10);  // nothing left behind but the small registry
  // A segment 5x larger than the filesystem opens (its data area is a hole)...
  name.options().capacity_bytes = 16 << 20;
  auto cache = NodeCache::Open(name.options());
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  // ...and reads more rows than the filesystem holds: every row delivered
  // exact, the cache keeping what fits and evicting (LRU) as it would when full.
  constexpr std::uint64_t kBytes = 64 << 10;
  const DatasetSlot ds = cache.value()->RegisterDataset({4, 4}, kBytes, 1000).value();
  std::vector<std::byte> out(8 * kBytes);
  for (std::uint64_t first = 0; first < 256; first += 8) {
    std::vector<std::uint64_t> rows;
    for (std::uint64_t r = first; r < first + 8; ++r) rows.push_back(r);
    ASSERT_TRUE(cache.value()
                    ->ReadRows(ds, rows, out.data(), PatternLoader{2, kBytes, nullptr}, nullptr)
                    .ok());
    ASSERT_EQ(FirstBadByte(2, rows, out.data(), kBytes), -1) << first;
  }
  const CacheStats st = cache.value()->Stats();
  EXPECT_GE(st.backing_failures, 1u);
  EXPECT_GT(st.rows_resident, 0u);
  EXPECT_LT(st.bytes_resident, 3u << 20);
  EXPECT_GT(st.evictions, 0u);
  // A forked worker hits the resident rows (the mapping is sound).
  const std::uint64_t last = 255;
  const pid_t child = ForkChild([&] {
    ReadRowsStats rs;
    std::vector<std::byte> one(kBytes);
    if (!cache.value()
             ->ReadRows(ds, {&last, 1}, one.data(), PatternLoader{2, kBytes, nullptr}, nullptr, &rs)
             .ok()) {
      return 1;
    }
    return FirstBadByte(2, {&last, 1}, one.data(), kBytes) == -1 && rs.hits == 1 ? 0 : 2;
  });
  EXPECT_EQ(WaitExitCode(child), 0);
  cache = Status::Unavailable("closed");
}

TEST(Segment, ShmDirOnDiskIsAcceptedWithANoticeNetworkFilesystemsAreRefused) {
  // The build tree is on a disk filesystem here (ext4 on the VM).
  char exe[4096] = {};
  ASSERT_GT(readlink("/proc/self/exe", exe, sizeof(exe) - 1), 0);
  const std::string dir = std::string(exe).substr(0, std::string(exe).rfind('/')) +
                          "/shm-on-disk-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  struct statfs fs{};
  ASSERT_EQ(statfs(dir.c_str(), &fs), 0);
  if (detail::ClassifyFilesystem(fs.f_type).kind != detail::FilesystemKind::kDisk) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "the build tree is not on a disk filesystem here";
  }
  {
    ScopedSegmentName name;
    name.options().shm_dir = dir;
    auto cache = NodeCache::Open(name.options());
    ASSERT_TRUE(cache.ok()) << cache.status().message();
    ASSERT_EQ(cache.value()->notices().size(), 1u);
    EXPECT_NE(cache.value()->notices()[0].find("disk filesystem"), std::string::npos)
        << cache.value()->notices()[0];
    const DatasetSlot ds = cache.value()->RegisterDataset({61, 1}, 8192, 10).value();
    std::vector<std::uint64_t> rows = {1, 2};
    std::vector<std::byte> out(2 * 8192);
    ASSERT_TRUE(cache.value()
                    ->ReadRows(ds, rows, out.data(), PatternLoader{2, 8192, nullptr}, nullptr)
                    .ok());
    EXPECT_EQ(FirstBadByte(2, rows, out.data(), 8192), -1);
  }
  std::filesystem::remove_all(dir);
  // /dev/shm: silent. The kinds the check knows:
  EXPECT_EQ(detail::ClassifyFilesystem(0x01021994).kind, detail::FilesystemKind::kMemory);
  EXPECT_EQ(detail::ClassifyFilesystem(0x6969).kind, detail::FilesystemKind::kNetwork);  // nfs
  EXPECT_EQ(detail::ClassifyFilesystem(0x0bd00bd0).kind, detail::FilesystemKind::kNetwork);
  EXPECT_EQ(detail::ClassifyFilesystem(0x47504653).kind, detail::FilesystemKind::kNetwork);
  EXPECT_EQ(detail::ClassifyFilesystem(0xef53).kind, detail::FilesystemKind::kDisk);
  EXPECT_STREQ(detail::ClassifyFilesystem(0x12345678).name, "unknown");
  ScopedSegmentName shm;
  auto cache = NodeCache::Open(shm.options());
  ASSERT_TRUE(cache.ok());
  EXPECT_TRUE(cache.value()->notices().empty());
}

}  // namespace
}  // namespace prescient::cache
