// Shared helpers for the cache tests: private segment names, a deterministic
// byte pattern, counting loaders, a table-driven oracle, and fork helpers.
#ifndef PRESCIENT_TESTS_UNIT_CACHE_TEST_SUPPORT_H_
#define PRESCIENT_TESTS_UNIT_CACHE_TEST_SUPPORT_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cache/core/node_cache.h"
#include "cache/core/segment_file.h"

namespace prescient::cache::testing {

// A segment name no other test (or test process) uses; the file is removed
// on destruction in case the test failed half-way.
class ScopedSegmentName {
 public:
  ScopedSegmentName() {
    static std::atomic<int> counter{0};
    options_.name_prefix =
        "prescient-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
    options_.node_id = "node";
    options_.capacity_bytes = 8 << 20;
    options_.liveness_poll = std::chrono::milliseconds(20);
  }
  ~ScopedSegmentName() {
    ::unlink((SegmentPath(options_) + ".lock").c_str());
    ::unlink((SegmentPath(options_) + ".kept").c_str());
  }
  CacheOptions& options() { return options_; }
  std::string path() const { return SegmentPath(options_); }

 private:
  CacheOptions options_;
};

// Opens a segment, failing the test (and returning null) if it cannot.
inline std::unique_ptr<NodeCache> OpenOrDie(const CacheOptions& options) {
  auto cache = NodeCache::Open(options);
  EXPECT_TRUE(cache.ok()) << cache.status().message();
  return cache.ok() ? std::move(cache.value()) : nullptr;
}

// Maps the segment `cache` uses as another process would (in a forked child
// of the process that opened it: through the inherited descriptor).
inline bool MapSegmentOf(const NodeCache& cache, detail::MappedSegment* out) {
  detail::UniqueFd fd(::open(cache.segment_file().c_str(), O_RDWR | O_CLOEXEC));
  Status error;
  return detail::MapSegment(std::move(fd), "test", out, &error) == detail::MapOutcome::kMapped;
}

inline std::byte PatternByte(std::uint64_t salt, std::uint64_t row, std::uint64_t i) {
  std::uint64_t x = (salt * 0x9e3779b97f4a7c15ull) ^ (row * 0xbf58476d1ce4e5b9ull) ^ (i * 31);
  x ^= x >> 29;
  return static_cast<std::byte>(x & 0xff);
}

inline void FillRow(std::uint64_t salt, std::uint64_t row, std::byte* dest, std::uint64_t bytes) {
  for (std::uint64_t i = 0; i < bytes; ++i) dest[i] = PatternByte(salt, row, i);
}

// Index of the first wrong byte of rows[k] at dest + k*bytes, or -1.
inline long long FirstBadByte(std::uint64_t salt, std::span<const std::uint64_t> rows,
                              const std::byte* dest, std::uint64_t bytes) {
  for (std::size_t k = 0; k < rows.size(); ++k) {
    for (std::uint64_t i = 0; i < bytes; ++i) {
      if (dest[k * bytes + i] != PatternByte(salt, rows[k], i)) {
        return static_cast<long long>(k * bytes + i);
      }
    }
  }
  return -1;
}

// A loader producing the pattern, counting the rows it was asked for.
struct PatternLoader {
  std::uint64_t salt;
  std::uint64_t bytes;
  std::atomic<std::uint64_t>* loaded_rows;  // may be null
  Status operator()(std::span<const std::uint64_t> rows, std::span<std::byte* const> dest) const {
    for (std::size_t k = 0; k < rows.size(); ++k) {
      if (k > 0 && rows[k] <= rows[k - 1])
        return Status::InvalidArgument("rows not ascending/distinct");
      FillRow(salt, rows[k], dest[k], bytes);
    }
    if (loaded_rows != nullptr) loaded_rows->fetch_add(rows.size());
    return Status::Ok();
  }
};

// Next uses from an explicit table (row -> sorted steps), for one dataset.
class TableOracle : public NextUseOracle {
 public:
  void Set(std::uint64_t row, std::vector<std::uint64_t> steps) { uses_[row] = std::move(steps); }
  std::uint64_t NextUse(DatasetSlot, std::uint64_t row, std::uint64_t now) const noexcept override {
    auto it = uses_.find(row);
    if (it == uses_.end()) return kNever;
    for (std::uint64_t s : it->second) {
      if (s > now) return s;
    }
    return kNever;
  }

 private:
  std::map<std::uint64_t, std::vector<std::uint64_t>> uses_;
};

// A genuinely full filesystem: a small tmpfs mounted for the test. Mounting
// needs CAP_SYS_ADMIN, which tests have inside env/run (root in a private mount
// namespace); elsewhere the test is skipped.
class SmallTmpfs {
 public:
  // `mode`: of the mount's root (1777: shared like /dev/shm).
  explicit SmallTmpfs(const char* size, const char* mode = "0700") {
    dir_ = std::filesystem::temp_directory_path() / ("prescient-full-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    const std::string opts = std::string("size=") + size + ",mode=" + mode;
    if (mount("tmpfs", dir_.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      error_ = std::strerror(errno);
      std::filesystem::remove(dir_);
    }
  }
  ~SmallTmpfs() {
    if (error_.empty()) umount2(dir_.c_str(), MNT_DETACH);
    std::filesystem::remove(dir_);
  }
  bool mounted() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }
  std::uint64_t used_bytes() const {
    struct statvfs fs{};
    statvfs(dir_.c_str(), &fs);
    return static_cast<std::uint64_t>(fs.f_blocks - fs.f_bfree) * fs.f_frsize;
  }

 private:
  std::string dir_;
  std::string error_;
};

// Memory shared with forked children (anonymous, MAP_SHARED).
template <typename T>
T* SharedObject() {
  void* p = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return new (p) T();
}

// Runs `body` in a child; returns its pid. The child exits with body()'s value.
template <typename Body>
pid_t ForkChild(Body body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  return pid;
}

inline int WaitExitCode(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline bool WaitFor(const std::atomic<int>& flag, int value, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (flag.load() != value) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace prescient::cache::testing

#endif  // PRESCIENT_TESTS_UNIT_CACHE_TEST_SUPPORT_H_
