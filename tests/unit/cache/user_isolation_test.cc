// Another local user cannot deny a user the cache by planting something at
// the predictable name (issue 10 item 11), nor read the user's cache. Run for
// real with two unprivileged users (uids switched with setresuid in forked
// children; needs root, which tests have inside env/run; skipped elsewhere).
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include <cstring>
#include <string>
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

constexpr uid_t kVictim = 61001;
constexpr uid_t kAttacker = 61002;

// Becomes `uid` for good (the rest of this forked child). Dumpable again, as
// an ordinary process of that user started by a shell would be.
bool BecomeUser(uid_t uid) {
  return setgroups(0, nullptr) == 0 && setresgid(uid, uid, uid) == 0 &&
         setresuid(uid, uid, uid) == 0 && prctl(PR_SET_DUMPABLE, 1) == 0;
}

enum class Plant { kFile, kSymlink, kFifo, kOpenDirectory, kPrivateDirectory };

const char* PlantName(Plant p) {
  switch (p) {
    case Plant::kFile:
      return "file";
    case Plant::kSymlink:
      return "symlink";
    case Plant::kFifo:
      return "fifo";
    case Plant::kOpenDirectory:
      return "directory 0777";
    case Plant::kPrivateDirectory:
      return "directory 0700";
  }
  return "?";
}

// The attacker plants `what` at the victim's per-user directory name.
int PlantAs(uid_t attacker, const std::string& path, Plant what) {
  if (!BecomeUser(attacker)) return 10;
  switch (what) {
    case Plant::kFile: {
      const int fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
      return fd >= 0 && write(fd, "x", 1) == 1 && close(fd) == 0 ? 0 : 11;
    }
    case Plant::kSymlink:
      return symlink("/proc/self/environ", path.c_str()) == 0 ? 0 : 12;
    case Plant::kFifo:
      return mkfifo(path.c_str(), 0666) == 0 ? 0 : 13;
    case Plant::kOpenDirectory:
      return mkdir(path.c_str(), 0777) == 0 && chmod(path.c_str(), 0777) == 0 ? 0 : 14;
    case Plant::kPrivateDirectory:
      return mkdir(path.c_str(), 0700) == 0 ? 0 : 15;
  }
  return 16;
}

struct Shared {
  std::atomic<int> opened{0};
  std::atomic<std::uint64_t> inode[2];
  std::atomic<int> fd[2];
  std::atomic<pid_t> pid[2];
  std::atomic<int> done{0};
  char dir[2][256];
};

// A victim process: opens the cache, reads rows, reports where it lives, and
// stays until `done`.
int VictimProcess(const CacheOptions& options, Shared* shared, int index) {
  if (!BecomeUser(kVictim)) return 20;
  auto cache = NodeCache::Open(options);
  if (!cache.ok()) {
    std::fprintf(stderr, "victim: %s\n", cache.status().ToString().c_str());
    return 21;
  }
  const DatasetSlot ds = cache.value()->RegisterDataset({51, 1}, 4096, 100).value();
  std::vector<std::uint64_t> rows = {1, 2, 3};
  std::vector<std::byte> out(3 * 4096);
  if (!cache.value()
           ->ReadRows(ds, rows, out.data(), PatternLoader{8, 4096, nullptr}, nullptr)
           .ok() ||
      FirstBadByte(8, rows, out.data(), 4096) != -1) {
    return 22;
  }
  const std::string path = cache.value()->path();
  const std::string dir = path.substr(0, path.rfind('/'));
  struct stat st{};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != kVictim ||
      (st.st_mode & 07777) != 0700) {
    return 23;
  }
  std::snprintf(shared->dir[index], sizeof(shared->dir[index]), "%s", dir.c_str());
  shared->inode[index] = cache.value()->segment_identity().second;
  shared->fd[index] =
      std::stoi(cache.value()->segment_file().substr(std::strlen("/proc/self/fd/")));
  shared->pid[index] = getpid();
  shared->opened.fetch_add(1);
  while (shared->done.load() == 0) usleep(1000);
  return 0;
}

TEST(UserIsolation, PlantedNamesOfAnotherUserDoNotDenyTheCacheNorExposeIt) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as two users";
  for (Plant plant : {Plant::kFile, Plant::kSymlink, Plant::kFifo, Plant::kOpenDirectory,
                      Plant::kPrivateDirectory}) {
    SCOPED_TRACE(PlantName(plant));
    SmallTmpfs shm("64m", "1777");  // world-writable and sticky, as /dev/shm
    if (!shm.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (" << shm.error() << ")";
    ScopedSegmentName name;
    name.options().shm_dir = shm.dir();
    const std::string planted = shm.dir() + "/prescient-u" + std::to_string(kVictim);
    ASSERT_EQ(WaitExitCode(ForkChild([&] { return PlantAs(kAttacker, planted, plant); })), 0);
    struct stat before{};
    ASSERT_EQ(lstat(planted.c_str(), &before), 0);

    // Two processes of the victim start; both get the cache, in one
    // directory of theirs, sharing one segment.
    auto* shared = SharedObject<Shared>();
    const pid_t a = ForkChild([&] { return VictimProcess(name.options(), shared, 0); });
    const pid_t b = ForkChild([&] { return VictimProcess(name.options(), shared, 1); });
    for (int i = 0; i < 5000 && shared->opened.load() < 2; ++i) usleep(1000);
    EXPECT_EQ(shared->opened.load(), 2);
    EXPECT_STREQ(shared->dir[0], shared->dir[1]);
    EXPECT_EQ(shared->inode[0].load(), shared->inode[1].load());
    EXPECT_NE(std::string(shared->dir[0]), planted);

    // The attacker cannot look inside, nor reach the segment through /proc.
    const std::string victim_dir = shared->dir[0];
    const std::string through_proc = "/proc/" + std::to_string(shared->pid[0].load()) + "/fd/" +
                                     std::to_string(shared->fd[0].load());
    const pid_t snoop = ForkChild([&] {
      if (!BecomeUser(kAttacker)) return 30;
      if (opendir(victim_dir.c_str()) != nullptr) return 31;
      if (open(through_proc.c_str(), O_RDONLY) >= 0) return 32;
      return 0;
    });
    EXPECT_EQ(WaitExitCode(snoop), 0);
    shared->done.store(1);
    EXPECT_EQ(WaitExitCode(a), 0);
    EXPECT_EQ(WaitExitCode(b), 0);

    // What the attacker planted is untouched.
    struct stat after{};
    ASSERT_EQ(lstat(planted.c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino);
    EXPECT_EQ(after.st_uid, kAttacker);
  }
}

}  // namespace
}  // namespace prescient::cache
