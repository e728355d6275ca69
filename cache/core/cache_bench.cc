// prescient_cache_bench: micro-benchmark of the node-shared cache.
//
//   prescient_cache_bench [--quick] [--hits | --fork]   (only the hit-path or the fork lines)
//
// Prints, per row: the hit path (lookup + copy into the caller's buffer) for
// 64 KiB and 4 KiB rows, one row per call and 32 rows per call, next to a
// plain memcpy of the same bytes; the miss path (claim + publish + evict,
// with a loader that only fills the row) with 100k resident rows under LRU
// and under a schedule oracle; and two processes reading the same rows at the
// same time (coordination: each row loaded once, the other waits or hits);
// and hits in a freshly forked child (a DataLoader worker), whose first touch
// of each page of the segment is a minor page fault, against pre-populating
// the whole mapping (MADV_POPULATE_READ), which costs more than it saves
// when each row is read about once per worker.
// Segments are created under /dev/shm with a private name and removed after.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cache/core/node_cache.h"

namespace {

using prescient::cache::CacheOptions;
using prescient::cache::DatasetSlot;
using prescient::cache::NextUseOracle;
using prescient::cache::NodeCache;
using prescient::cache::Status;
using Clock = std::chrono::steady_clock;

double NsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

// CPU time of this thread: on a shared, oversubscribed machine it excludes the
// time the benchmark spends preempted, which wall time does not.
double CpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

CacheOptions Options(std::uint64_t capacity, std::uint32_t block) {
  CacheOptions o;
  o.name_prefix = "prescient-bench-" + std::to_string(getpid());
  o.node_id = "bench";
  o.capacity_bytes = capacity;
  o.block_bytes = block;
  return o;
}

Status FillLoader(std::span<const std::uint64_t> rows, std::span<std::byte* const> dest,
                  std::uint64_t bytes) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::memset(dest[i], static_cast<int>(rows[i] & 0xff), bytes);
  }
  return Status::Ok();
}

// A schedule: row r is next used at a pseudo-random step (fixed per row).
class HashOracle : public NextUseOracle {
 public:
  std::uint64_t NextUse(DatasetSlot, std::uint64_t row, std::uint64_t now) const noexcept override {
    return now + 1 + (row * 0x9e3779b97f4a7c15ull >> 40) % 1000000;
  }
};

void HitPath(std::uint64_t row_bytes, std::uint64_t rows, std::uint64_t reads, std::uint32_t batch,
             const NextUseOracle* oracle = nullptr) {
  auto opened = NodeCache::Open(Options(rows * row_bytes * 2 + (64 << 20), 4096));
  if (!opened.ok()) {
    std::printf("open failed: %s\n", opened.status().message().c_str());
    return;
  }
  NodeCache& cache = *opened.value();
  const DatasetSlot ds = cache.RegisterDataset({1, row_bytes}, row_bytes, rows).value();
  auto loader = [&](std::span<const std::uint64_t> r, std::span<std::byte* const> d) {
    return FillLoader(r, d, row_bytes);
  };
  std::vector<std::byte> out(batch * row_bytes);
  std::vector<std::uint64_t> all(rows);
  std::iota(all.begin(), all.end(), 0);
  for (std::uint64_t i = 0; i < rows; i += batch) {  // warm: everything resident
    const std::uint64_t n = std::min<std::uint64_t>(batch, rows - i);
    (void)cache.ReadRows(ds, {all.data() + i, n}, out.data(), loader, oracle);
  }
  std::mt19937_64 rng(1);
  std::vector<std::uint64_t> sel(reads);
  for (auto& r : sel) r = rng() % rows;
  const double n = static_cast<double>(reads / batch * batch);
  double c0 = CpuNs();
  for (std::uint64_t i = 0; i + batch <= reads; i += batch) {
    (void)cache.ReadRows(ds, {sel.data() + i, batch}, out.data(), loader, oracle);
  }
  const double cached = (CpuNs() - c0) / n;
  // Baseline: memcpy of the same rows from a private buffer of the same size.
  std::vector<std::byte> source(rows * row_bytes, std::byte{1});
  c0 = CpuNs();
  for (std::uint64_t i = 0; i + batch <= reads; i += batch) {
    for (std::uint32_t k = 0; k < batch; ++k) {
      std::memcpy(out.data() + k * row_bytes, source.data() + sel[i + k] * row_bytes, row_bytes);
    }
  }
  const double copy = (CpuNs() - c0) / n;
  const auto st = cache.Stats();
  std::printf(
      "hit   %6llu KiB rows, %2u rows/call%s: %8.0f cpu-ns/row  (memcpy alone %6.0f ns, %.2fx; "
      "%.2f GB/s) hits=%llu\n",
      static_cast<unsigned long long>(row_bytes >> 10), batch, oracle != nullptr ? ", oracle" : "",
      cached, copy, cached / copy, static_cast<double>(row_bytes) / cached,
      static_cast<unsigned long long>(st.hits));
}

void MissPath(std::uint64_t resident, const NextUseOracle* oracle, std::uint64_t inserts) {
  constexpr std::uint64_t kRow = 1024;
  auto opened = NodeCache::Open(Options(resident * kRow * 23 / 20, 1024));
  if (!opened.ok()) {
    std::printf("open failed: %s\n", opened.status().message().c_str());
    return;
  }
  NodeCache& cache = *opened.value();
  const DatasetSlot ds = cache.RegisterDataset({2, 2}, kRow, 1ull << 40).value();
  auto loader = [&](std::span<const std::uint64_t> r, std::span<std::byte* const> d) {
    return FillLoader(r, d, kRow);
  };
  std::vector<std::byte> out(kRow);
  std::uint64_t row = 0;
  while (cache.Stats().evictions == 0 && cache.Stats().rejections == 0) {  // fill up
    (void)cache.ReadRows(ds, {&row, 1}, out.data(), loader, oracle);
    ++row;
  }
  const std::uint64_t full = cache.Stats().rows_resident;
  const double c0 = CpuNs();
  for (std::uint64_t i = 0; i < inserts; ++i, ++row) {
    (void)cache.ReadRows(ds, {&row, 1}, out.data(), loader, oracle);
  }
  const double ns = (CpuNs() - c0) / static_cast<double>(inserts);
  const auto st = cache.Stats();
  std::printf(
      "miss  1 KiB rows, %7llu resident, %s: %8.0f cpu-ns/row (claim+load+publish+evict), "
      "evictions=%llu rejected=%llu\n",
      static_cast<unsigned long long>(full), oracle ? "oracle" : "LRU   ", ns,
      static_cast<unsigned long long>(st.evictions),
      static_cast<unsigned long long>(st.rejections));
}

// Two processes read the same rows in the same order at the same time.
void Contention(std::uint64_t rows) {
  constexpr std::uint64_t kRow = 4096;
  CacheOptions o = Options(rows * kRow * 2 + (16 << 20), 4096);
  auto loader = [&](std::span<const std::uint64_t> r, std::span<std::byte* const> d) {
    return FillLoader(r, d, kRow);
  };
  std::vector<std::uint64_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(3));
  auto run = [&](NodeCache& cache) {
    const DatasetSlot ds = cache.RegisterDataset({3, 3}, kRow, rows).value();
    std::vector<std::byte> out(kRow);
    const auto t0 = Clock::now();
    const double c0 = CpuNs();
    for (std::uint64_t r : order) (void)cache.ReadRows(ds, {&r, 1}, out.data(), loader, nullptr);
    return std::pair{NsSince(t0) / static_cast<double>(rows),
                     (CpuNs() - c0) / static_cast<double>(rows)};
  };
  {
    auto alone = NodeCache::Open(o);
    const auto [wall, cpu] = run(*alone.value());
    std::printf(
        "cold  4 KiB rows, 1 process : %8.0f wall-ns/row, %8.0f cpu-ns/row (every row a miss)\n",
        wall, cpu);
  }
  auto parent = NodeCache::Open(o);
  int pipefd[2];
  if (pipe(pipefd) != 0) return;
  const pid_t child = fork();
  if (child == 0) {
    auto own = NodeCache::Open(o);
    const auto result = run(*own.value());
    (void)!write(pipefd[1], &result, sizeof(result));
    _exit(0);
  }
  const auto mine = run(*parent.value());
  std::pair<double, double> theirs{0, 0};
  (void)!read(pipefd[0], &theirs, sizeof(theirs));
  waitpid(child, nullptr, 0);
  const auto st = parent.value()->Stats();
  std::printf(
      "cold  4 KiB rows, 2 processes same order: %8.0f / %8.0f wall-ns/row, %6.0f / %6.0f "
      "cpu-ns/row; misses=%llu (rows=%llu) hits=%llu waits=%llu\n",
      mine.first, theirs.first, mine.second, theirs.second,
      static_cast<unsigned long long>(st.misses), static_cast<unsigned long long>(rows),
      static_cast<unsigned long long>(st.hits), static_cast<unsigned long long>(st.waits));
}

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Reads every row once in `order` (one row per call), in a forked child:
// returns wall ns per row and minor page faults per row, for two passes, and
// the time of `before` (run in the child first).
struct ForkedPasses {
  double setup_ns, first_ns, first_faults, second_ns, second_faults;
};

ForkedPasses ReadInChild(const std::function<void(std::uint64_t)>& read_row,
                         const std::vector<std::uint64_t>& order,
                         const std::function<void()>& before = {}) {
  int pipefd[2];
  ForkedPasses result{};
  if (pipe(pipefd) != 0) return result;
  const pid_t child = fork();
  if (child == 0) {
    ForkedPasses mine{};
    const auto setup = Clock::now();
    if (before) before();
    mine.setup_ns = NsSince(setup);
    const double n = static_cast<double>(order.size());
    for (int pass = 0; pass < 2; ++pass) {
      const long f0 = MinorFaults();
      const auto t0 = Clock::now();
      for (std::uint64_t r : order) read_row(r);
      const double ns = NsSince(t0) / n;
      const double faults = static_cast<double>(MinorFaults() - f0) / n;
      (pass == 0 ? mine.first_ns : mine.second_ns) = ns;
      (pass == 0 ? mine.first_faults : mine.second_faults) = faults;
    }
    (void)!write(pipefd[1], &mine, sizeof(mine));
    _exit(0);
  }
  (void)!read(pipefd[0], &result, sizeof(result));
  waitpid(child, nullptr, 0);
  close(pipefd[0]);
  close(pipefd[1]);
  return result;
}

void ForkedHits(std::uint64_t rows) {
  constexpr std::uint64_t kRow = 64 << 10;
  auto opened = NodeCache::Open(Options(rows * kRow * 21 / 20 + (64 << 20), 4096));
  if (!opened.ok()) {
    std::printf("open failed: %s\n", opened.status().message().c_str());
    return;
  }
  NodeCache& cache = *opened.value();
  const DatasetSlot ds = cache.RegisterDataset({4, 4}, kRow, rows).value();
  auto loader = [&](std::span<const std::uint64_t> r, std::span<std::byte* const> d) {
    return FillLoader(r, d, kRow);
  };
  std::vector<std::byte> out(kRow);
  for (std::uint64_t r = 0; r < rows; ++r) {
    (void)cache.ReadRows(ds, {&r, 1}, out.data(), loader, nullptr);
  }
  std::vector<std::uint64_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(5));
  const ForkedPasses hits = ReadInChild(
      [&](std::uint64_t r) { (void)cache.ReadRows(ds, {&r, 1}, out.data(), loader, nullptr); },
      order);
  std::printf(
      "fork  64 KiB hits in a forked child, %llu rows: first pass %6.0f ns/row (%.2f minor "
      "faults/row), second %6.0f ns/row (%.2f)\n",
      static_cast<unsigned long long>(rows), hits.first_ns, hits.first_faults, hits.second_ns,
      hits.second_faults);

  // The same first touch on a plain shared tmpfs mapping, with and without
  // populating the whole mapping first (the populate time is included).
  const std::string path = "/dev/shm/prescient-bench-map-" + std::to_string(getpid());
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  const std::uint64_t bytes = rows * kRow;
  if (fd < 0 || posix_fallocate(fd, 0, static_cast<off_t>(bytes)) != 0) {
    if (fd >= 0) close(fd);
    unlink(path.c_str());
    return;
  }
  void* mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  unlink(path.c_str());
  if (mapped == MAP_FAILED) {
    close(fd);
    return;
  }
  auto* base = static_cast<std::byte*>(mapped);
  std::memset(base, 1, bytes);
  auto copy_row = [&](std::uint64_t r) { std::memcpy(out.data(), base + r * kRow, kRow); };
  const ForkedPasses plain = ReadInChild(copy_row, order);
  // The same bytes through the descriptor: the kernel copies from the page
  // cache, so a process that never touched the mapping takes no fault.
  const ForkedPasses through_fd = ReadInChild(
      [&](std::uint64_t r) { (void)!pread(fd, out.data(), kRow, static_cast<off_t>(r * kRow)); },
      order);
  close(fd);
#ifdef MADV_POPULATE_READ
  const ForkedPasses populated =
      ReadInChild(copy_row, order, [&] { (void)madvise(base, bytes, MADV_POPULATE_READ); });
#else
  const ForkedPasses populated{};
#endif
  std::printf(
      "fork  64 KiB memcpy from a shared mapping in a forked child: first touch %6.0f ns/row "
      "(%.2f faults/row), touched %6.0f ns/row; MADV_POPULATE_READ first: %6.0f ns/row (%.2f "
      "faults/row) + %6.0f ns/row to populate\n",
      plain.first_ns, plain.first_faults, plain.second_ns, populated.first_ns,
      populated.first_faults, populated.setup_ns / static_cast<double>(rows));
  std::printf(
      "fork  64 KiB pread from the shared file in a forked child: first %6.0f ns/row (%.2f "
      "faults/row), second %6.0f ns/row\n",
      through_fd.first_ns, through_fd.first_faults, through_fd.second_ns);
  munmap(mapped, bytes);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, hits_only = false, fork_only = false;
  for (int i = 1; i < argc; ++i) {
    quick = quick || std::strcmp(argv[i], "--quick") == 0;
    hits_only = hits_only || std::strcmp(argv[i], "--hits") == 0;
    fork_only = fork_only || std::strcmp(argv[i], "--fork") == 0;
  }
  const std::uint64_t scale = quick ? 10 : 1;
  if (fork_only) {
    ForkedHits(20000 / scale);
    return 0;
  }
  HashOracle oracle;
  HitPath(64 << 10, 1024, 200000 / scale, 1);
  HitPath(64 << 10, 1024, 200000 / scale, 32);
  HitPath(4 << 10, 16384, 1000000 / scale, 1);
  HitPath(4 << 10, 16384, 1000000 / scale, 32);
  HitPath(4 << 10, 16384, 1000000 / scale, 1, &oracle);
  HitPath(4 << 10, 16384, 1000000 / scale, 32, &oracle);
  if (hits_only) return 0;
  MissPath(100000 / scale, nullptr, 200000 / scale);
  MissPath(100000 / scale, &oracle, 200000 / scale);
  Contention(50000 / scale);
  ForkedHits(20000 / scale);
  return 0;
}
