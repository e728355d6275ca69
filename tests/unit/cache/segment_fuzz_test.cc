// Random bytes written into a leftover or a live segment, many times: no
// process may crash (a child killed by a signal fails the test) or hang
// (bounded waits), whatever the bytes hit: header, tables, lock, data. Runs
// under ASan in tests/run's sanitizer step. Failures print the seed; set
// PRESCIENT_FUZZ_SEED to replay one.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "cache/core/segment_layout.h"
#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::ForkChild;
using testing::PatternLoader;
using testing::ScopedSegmentName;
using Clock = std::chrono::steady_clock;

std::uint64_t Seed() {
  if (const char* s = std::getenv("PRESCIENT_FUZZ_SEED")) return std::strtoull(s, nullptr, 10);
  return static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
}

// Exit status of `pid`, killing it if it has not exited within `limit`
// (a hang is a failure too: 1000 + the signal).
int WaitWithin(pid_t pid, std::chrono::seconds limit) {
  const auto end = Clock::now() + limit;
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (Clock::now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return 1000 + SIGKILL;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

CacheOptions FuzzOptions(ScopedSegmentName& name) {
  CacheOptions o = name.options();
  o.capacity_bytes = 2 << 20;
  o.block_bytes = 1024;
  o.max_datasets = 64;
  o.lock_timeout = std::chrono::milliseconds(200);
  o.liveness_poll = std::chrono::milliseconds(5);
  o.wait_timeout = std::chrono::milliseconds(100);
  return o;
}

// Everything a process does with the cache, on rows of three sizes; the
// bytes are not checked (a corrupted data block or row field legitimately
// yields wrong bytes; a crash or a hang never is legitimate).
int Exercise(NodeCache& cache, std::mt19937_64& rng, int rounds) {
  const std::uint64_t sizes[] = {100, 1024, 5000};
  DatasetSlot slots[3];
  for (int i = 0; i < 3; ++i) {
    auto s = cache.RegisterDataset({77, static_cast<std::uint64_t>(i)}, sizes[i], 400);
    if (!s.ok()) return 0;  // e.g. a corrupt lock: fine, the cache is just unusable
    slots[i] = s.value();
  }
  std::vector<std::byte> out(8 * 5000);
  for (int round = 0; round < rounds; ++round) {
    const int d = static_cast<int>(rng() % 3);
    std::vector<std::uint64_t> rows(1 + rng() % 8);
    for (auto& r : rows) r = rng() % 400;
    (void)cache.ReadRows(slots[d], rows, out.data(), PatternLoader{5, sizes[d], nullptr}, nullptr);
    switch (rng() % 8) {
      case 0: {
        std::vector<RowWithKey> want = {{rng() % 400, rng() % 1000}, {rng() % 400, rng() % 1000}};
        auto claimed = cache.ClaimForPrefetch(slots[d], want);
        if (claimed.ok()) {
          for (std::uint64_t r : claimed.value()) {
            if (rng() % 2 == 0) {
              (void)cache.Publish(slots[d], r, out.data(), nullptr);
            } else {
              (void)cache.Abandon(slots[d], r);
            }
          }
        }
        break;
      }
      case 1:
        (void)cache.ReportProgress(static_cast<std::uint32_t>(rng() % 4), rng() % 100, getpid());
        (void)cache.NodeStep();
        break;
      case 2:
        (void)cache.Stats();
        (void)cache.Participants();
        break;
      case 3:
        if (rng() % 16 == 0) {
          (void)cache.DropDataset(slots[d]);
          auto s = cache.RegisterDataset({78, rng()}, sizes[d], 400);
          if (s.ok()) slots[d] = s.value();
        }
        break;
      default:
        break;
    }
  }
  return 0;
}

// Writes `count` random bytes into the file, mostly into the metadata.
void Corrupt(const std::string& path, std::mt19937_64& rng, int count) {
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st{};
  fstat(fd, &st);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  detail::SegmentHeader h{};
  const bool have_header = pread(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h));
  const std::uint64_t metadata =
      have_header && h.off_data > 0 && h.off_data < size ? h.off_data : size;
  for (int i = 0; i < count && size > 0; ++i) {
    std::uint64_t at;
    switch (rng() % 5) {
      case 0:
        at = rng() % std::min<std::uint64_t>(size, sizeof(detail::SegmentHeader));
        break;
      case 1:
        at = rng() % size;
        break;
      default:
        at = rng() % metadata;
        break;
    }
    // A random byte, or an index-like value (kNone, 0, just out of range).
    const std::uint32_t values[] = {0xffffffffu, 0, 0x7fffffffu, static_cast<std::uint32_t>(rng())};
    if (rng() % 3 == 0 && at + 4 <= size) {
      const std::uint32_t v = values[rng() % 4];
      (void)pwrite(fd, &v, 4, static_cast<off_t>(at & ~std::uint64_t{3}));
    } else {
      const unsigned char b = static_cast<unsigned char>(rng());
      (void)pwrite(fd, &b, 1, static_cast<off_t>(at));
    }
  }
  close(fd);
}

TEST(SegmentFuzz, LeftoverSegmentsWithRandomBytesNeverCrashTheNextJob) {
  const std::uint64_t seed = Seed();
  std::mt19937_64 rng(seed);
  constexpr int kTrials = 120;
  int replaced = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    ScopedSegmentName name;
    CacheOptions options = FuzzOptions(name);
    options.keep_after_exit = true;  // left behind, and repaired when reused
    const std::uint64_t child_seed = rng();
    // A job that fills the cache and dies without detaching (claims held).
    const pid_t job = ForkChild([&] {
      auto cache = NodeCache::Open(options);
      if (!cache.ok()) return 1;
      std::mt19937_64 r(child_seed);
      Exercise(*cache.value(), r, 60);
      const RowWithKey held{399, 1};
      (void)cache.value()->ClaimForPrefetch(0, {&held, 1});
      _exit(0);
    });
    ASSERT_EQ(WaitWithin(job, std::chrono::seconds(30)), 0) << "seed " << seed;
    Corrupt(name.path() + ".kept", rng, 1 + static_cast<int>(rng() % 64));
    if (rng() % 4 == 0) Corrupt(name.path() + ".lock", rng, 1 + static_cast<int>(rng() % 16));
    // The next job: open (repair, or replace), use it, exit. Never a signal.
    options.keep_after_exit = rng() % 2 == 0;
    const pid_t next = ForkChild([&] {
      auto cache = NodeCache::Open(options);
      if (!cache.ok()) {
        std::fprintf(stderr, "open failed: %s\n", cache.status().ToString().c_str());
        return 2;
      }
      std::mt19937_64 r(child_seed + 1);
      Exercise(*cache.value(), r, 60);
      return cache.value()->notices().empty() ? 0 : 3;
    });
    const int code = WaitWithin(next, std::chrono::seconds(30));
    ASSERT_TRUE(code == 0 || code == 3)
        << "trial " << trial << " seed " << seed << " exit " << code;
    replaced += code == 3;
  }
  std::printf("%d of %d corrupt leftovers replaced with a notice, the rest repaired\n", replaced,
              kTrials);
}

TEST(SegmentFuzz, LiveSegmentCorruptedUnderItsUsersNeverCrashesThem) {
  const std::uint64_t seed = Seed();
  std::mt19937_64 rng(seed);
  ScopedSegmentName name;
  CacheOptions options = FuzzOptions(name);
  auto cache = NodeCache::Open(options);
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  // Two processes use the segment while a third writes random bytes into it.
  std::vector<pid_t> users;
  for (int u = 0; u < 2; ++u) {
    const std::uint64_t user_seed = rng();
    users.push_back(ForkChild([&] {
      std::mt19937_64 r(user_seed);
      const auto end = Clock::now() + std::chrono::milliseconds(2500);
      while (Clock::now() < end) Exercise(*cache.value(), r, 20);
      return 0;
    }));
  }
  const auto end = Clock::now() + std::chrono::milliseconds(2000);
  int writes = 0;
  while (Clock::now() < end) {
    Corrupt(cache.value()->segment_file(), rng, 1 + static_cast<int>(rng() % 8));
    ++writes;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (pid_t u : users) {
    EXPECT_EQ(WaitWithin(u, std::chrono::seconds(60)), 0) << "seed " << seed;
  }
  // This process still works with the segment (or reports errors): no crash.
  std::mt19937_64 r(seed + 2);
  Exercise(*cache.value(), r, 50);
  std::printf("%d corrupting writes survived\n", writes);
}

}  // namespace
}  // namespace prescient::cache
