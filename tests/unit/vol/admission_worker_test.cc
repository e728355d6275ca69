// The connector's admission thread (vol/serve/admission_worker.h): its budget
// and buffers, draining before the segment goes, and a forked child that
// inherits the worker but not its thread. A real segment, real fork().
#include "vol/serve/admission_worker.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "tests/unit/cache/test_support.h"
#include "vol/runtime/runtime.h"

namespace prescient::vol {
namespace {

using cache::testing::FirstBadByte;
using cache::testing::OpenOrDie;
using cache::testing::PatternLoader;
using cache::testing::ScopedSegmentName;

constexpr std::uint64_t kMiB = 1 << 20;
constexpr std::uint64_t kRowBytes = 64 * 1024;
constexpr cache::DatasetSlot kSlot = 3;  // the datasets of the hand-overs below

TEST(AdmissionWorker, HoldsAtMostItsBudgetAndReusesItsBuffers) {
  ScopedSegmentName name;
  auto segment = OpenOrDie(name.options());
  ASSERT_NE(segment, nullptr);
  AdmissionWorker worker({.budget_bytes = 16 * kMiB, .only_on_spare_cpu = false});
  EXPECT_TRUE(worker.Reserve(kSlot, kMiB).empty());  // not attached: nothing to publish into
  worker.Attach(segment.get());
  const std::span<std::byte> first = worker.Reserve(kSlot, 10 * kMiB);
  ASSERT_EQ(first.size(), 10 * kMiB);
  EXPECT_TRUE(worker.Reserve(kSlot, 10 * kMiB).empty());  // 20 MiB would wait
  const std::span<std::byte> small = worker.Reserve(kSlot, 6 * kMiB);
  EXPECT_EQ(small.size(), 6 * kMiB);
  worker.Unreserve(first);
  worker.Unreserve(small);
  const std::span<std::byte> again = worker.Reserve(kSlot, 8 * kMiB);
  EXPECT_EQ(again.data(), first.data());  // the smallest kept buffer that fits
  worker.Unreserve(again);
  EXPECT_EQ(worker.KeptBytes(), 16 * kMiB);
  // One read larger than the budget goes when nothing waits, and its buffer
  // is not kept afterwards.
  const std::span<std::byte> large = worker.Reserve(kSlot, 40 * kMiB);
  ASSERT_EQ(large.size(), 40 * kMiB);
  EXPECT_TRUE(worker.Reserve(kSlot, kMiB).empty());
  worker.Unreserve(large);
  EXPECT_LE(worker.KeptBytes(), 16 * kMiB);
  worker.Drain();
  EXPECT_TRUE(worker.Reserve(kSlot, kMiB).empty());  // detached
}

TEST(AdmissionWorker, TakesNoRowsOfADatasetLeftToItsReaders) {
  ScopedSegmentName name;
  auto segment = OpenOrDie(name.options());
  ASSERT_NE(segment, nullptr);
  AdmissionWorker worker({.budget_bytes = 16 * kMiB, .only_on_spare_cpu = false});
  worker.Attach(segment.get());
  worker.LeaveToReaders(kSlot + 1);
  EXPECT_TRUE(worker.Reserve(kSlot + 1, kMiB).empty());
  const std::span<std::byte> other = worker.Reserve(kSlot, kMiB);
  EXPECT_EQ(other.size(), kMiB);
  worker.Unreserve(other);
  worker.Drain();
}

TEST(AdmissionWorker, KeepsAThousandSmallBuffersForReuseAndNoMore) {
  ScopedSegmentName name;
  auto segment = OpenOrDie(name.options());
  ASSERT_NE(segment, nullptr);
  AdmissionWorker worker({.budget_bytes = 16 * kMiB, .only_on_spare_cpu = false});
  worker.Attach(segment.get());
  constexpr std::uint64_t kRow = 16 * 1024;
  std::vector<std::span<std::byte>> held;
  for (std::span<std::byte> b = worker.Reserve(kSlot, kRow); !b.empty();
       b = worker.Reserve(kSlot, kRow)) {
    held.push_back(b);
  }
  ASSERT_EQ(held.size(), 16 * kMiB / kRow);  // the budget, then no more
  std::vector<std::byte*> addresses;
  for (std::span<std::byte> b : held) {
    addresses.push_back(b.data());
    worker.Unreserve(b);
  }
  worker.Unreserve(held.front());  // a second give-back of one buffer changes nothing
  EXPECT_EQ(worker.KeptBytes(), 16 * kMiB);
  // Every buffer is reused, none allocated anew.
  std::sort(addresses.begin(), addresses.end());
  for (std::size_t i = 0; i < held.size(); ++i) {
    const std::span<std::byte> again = worker.Reserve(kSlot, kRow);
    ASSERT_FALSE(again.empty());
    EXPECT_TRUE(std::binary_search(addresses.begin(), addresses.end(), again.data()));
  }
  EXPECT_EQ(worker.KeptBytes(), 16 * kMiB);
  // A larger read makes room by dropping free small ones, keeping the budget.
  worker.Drain();
  AdmissionWorker fresh({.budget_bytes = 16 * kMiB, .only_on_spare_cpu = false});
  fresh.Attach(segment.get());
  for (int i = 0; i < 64; ++i) fresh.Unreserve(fresh.Reserve(kSlot, kRow));
  std::vector<std::span<std::byte>> small;
  for (int i = 0; i < 1000; ++i) small.push_back(fresh.Reserve(kSlot, kRow));
  for (std::span<std::byte> b : small) fresh.Unreserve(b);
  const std::span<std::byte> big = fresh.Reserve(kSlot, 4 * kMiB);
  ASSERT_EQ(big.size(), 4 * kMiB);
  EXPECT_LE(fresh.KeptBytes(), 16 * kMiB);
  fresh.Unreserve(big);
  EXPECT_LE(fresh.KeptBytes(), 16 * kMiB);
  fresh.Drain();
}

// A worker attached to `segment` that sees `runnable` threads on two CPUs.
std::unique_ptr<AdmissionWorker> WorkerSeeing(cache::NodeCache* segment,
                                              std::atomic<std::uint32_t>* runnable,
                                              bool only_on_spare_cpu = true,
                                              std::uint64_t busy_unkept_run_bytes = 256 * 1024) {
  auto worker = std::make_unique<AdmissionWorker>(
      AdmissionWorkerOptions{.budget_bytes = 16 * kMiB,
                             .only_on_spare_cpu = only_on_spare_cpu,
                             .busy_unkept_run_bytes = busy_unkept_run_bytes,
                             .cpu_load = [runnable]() -> std::optional<cache::io::CpuLoad> {
                               return cache::io::CpuLoad{.runnable = runnable->load(), .cpus = 2};
                             }});
  if (segment != nullptr) worker->Attach(segment);
  return worker;
}

TEST(AdmissionWorker, LeavesLongRunsOfRowsStoredAsTheyAreUnkeptOnlyWhileNoCpuIsSpare) {
  ScopedSegmentName name;
  auto segment = OpenOrDie(name.options());
  ASSERT_NE(segment, nullptr);
  constexpr std::uint64_t kRun = 256 * 1024;
  constexpr cache::DatasetSlot kDecoded = kSlot + 1;  // filtered: not named
  constexpr cache::DatasetSlot kGrouped = kSlot + 2;  // left to its readers: not named

  std::atomic<std::uint32_t> busy{3};
  std::unique_ptr<AdmissionWorker> worker = WorkerSeeing(segment.get(), &busy);
  worker->MayLeaveUnkept(kSlot);
  worker->LeaveToReaders(kGrouped);
  EXPECT_TRUE(worker->LeavesUnkept(kSlot, kRun));
  EXPECT_TRUE(worker->LeavesUnkept(kSlot, 4 * kMiB));
  EXPECT_FALSE(worker->LeavesUnkept(kSlot, kRun - 1));  // a batch of scattered rows
  EXPECT_FALSE(worker->LeavesUnkept(kDecoded, 4 * kMiB));
  EXPECT_FALSE(worker->LeavesUnkept(kGrouped, 4 * kMiB));
  worker->Drain();
  EXPECT_FALSE(worker->LeavesUnkept(kSlot, kRun));  // detached: nothing is kept anyway

  // A spare CPU: every run is kept.
  std::atomic<std::uint32_t> idle{1};
  std::unique_ptr<AdmissionWorker> spare = WorkerSeeing(segment.get(), &idle);
  spare->MayLeaveUnkept(kSlot);
  EXPECT_FALSE(spare->LeavesUnkept(kSlot, 4 * kMiB));
  spare->Drain();

  // PRESCIENT_ADMIT_BEHIND_WHEN=always, and PRESCIENT_BUSY_UNKEPT_RUN=0: kept.
  for (const bool only_on_spare_cpu : {false, true}) {
    std::unique_ptr<AdmissionWorker> keeping =
        WorkerSeeing(segment.get(), &busy, only_on_spare_cpu, only_on_spare_cpu ? 0 : kRun);
    keeping->MayLeaveUnkept(kSlot);
    EXPECT_FALSE(keeping->LeavesUnkept(kSlot, 4 * kMiB)) << only_on_spare_cpu;
    keeping->Drain();
  }
}

TEST(AdmissionWorker, HandsRowsOverOnlyWhileACpuIsSpare) {
  ScopedSegmentName name;
  auto segment = OpenOrDie(name.options());
  ASSERT_NE(segment, nullptr);
  Stats& stats = Runtime::Get().stats();
  const std::uint64_t declined = stats.Get(Counter::kReadsAdmitNoSpareCpu);

  std::atomic<std::uint32_t> busy{3};  // the reader and two others on two CPUs
  std::unique_ptr<AdmissionWorker> declining = WorkerSeeing(segment.get(), &busy);
  EXPECT_TRUE(declining->Reserve(kSlot, kMiB).empty());
  EXPECT_EQ(stats.Get(Counter::kReadsAdmitNoSpareCpu), declined + 1);
  declining->Drain();

  std::atomic<std::uint32_t> runnable{1};  // the reader alone
  std::unique_ptr<AdmissionWorker> worker = WorkerSeeing(segment.get(), &runnable);
  const std::span<std::byte> first = worker->Reserve(kSlot, kMiB);
  EXPECT_EQ(first.size(), kMiB);
  // The load is sampled at most every 10 ms: each later step waits longer.
  const auto next_sample = [] { std::this_thread::sleep_for(std::chrono::milliseconds(15)); };
  runnable = 2;  // the reader and the thread, busy with `first`: still one spare
  for (int i = 0; i < 8; ++i) {
    next_sample();
    const std::span<std::byte> more = worker->Reserve(kSlot, kMiB);
    EXPECT_EQ(more.size(), kMiB) << i;
    worker->Unreserve(more);
  }
  worker->Unreserve(first);
  // Two runnable while the thread is idle: another reader. Declined within
  // a few samples (the average follows a change in about four).
  bool declines = false;
  for (int i = 0; i < 8 && !declines; ++i) {
    next_sample();
    const std::span<std::byte> more = worker->Reserve(kSlot, kMiB);
    declines = more.empty();
    if (!declines) worker->Unreserve(more);
  }
  EXPECT_TRUE(declines);
  EXPECT_EQ(stats.Get(Counter::kReadsAdmitNoSpareCpu), declined + 2);
  worker->Drain();
}

TEST(AdmissionWorker, SmallReadsPlaceTheirOwnRowsUnlessAskedAlways) {
  ScopedSegmentName name;
  auto segment = OpenOrDie(name.options());
  ASSERT_NE(segment, nullptr);
  Stats& stats = Runtime::Get().stats();
  const std::uint64_t small = stats.Get(Counter::kReadsAdmitSmall);
  const std::uint64_t busy = stats.Get(Counter::kReadsAdmitNoSpareCpu);
  constexpr std::uint64_t kLeast = AdmissionWorker::kMinHandOverBytes;

  std::atomic<std::uint32_t> runnable{1};  // the reader alone: a CPU is spare
  std::unique_ptr<AdmissionWorker> worker = WorkerSeeing(segment.get(), &runnable);
  EXPECT_TRUE(worker->Reserve(kSlot, 16 * 1024).empty());
  EXPECT_TRUE(worker->Reserve(kSlot, kLeast - 1).empty());
  EXPECT_EQ(stats.Get(Counter::kReadsAdmitSmall), small + 2);
  const std::span<std::byte> enough = worker->Reserve(kSlot, kLeast);
  EXPECT_EQ(enough.size(), kLeast);
  worker->Unreserve(enough);
  EXPECT_EQ(stats.Get(Counter::kReadsAdmitNoSpareCpu), busy);  // not mistaken for a busy CPU
  worker->Drain();

  // PRESCIENT_ADMIT_BEHIND_WHEN=always hands over whatever the budget allows.
  std::unique_ptr<AdmissionWorker> always = WorkerSeeing(segment.get(), &runnable, false);
  const std::span<std::byte> row = always->Reserve(kSlot, 16 * 1024);
  EXPECT_EQ(row.size(), 16u * 1024);
  always->Unreserve(row);
  EXPECT_EQ(stats.Get(Counter::kReadsAdmitSmall), small + 2);
  always->Drain();
}

TEST(AdmissionWorker, DrainPublishesWhatIsQueuedBeforeTheSegmentGoes) {
  ScopedSegmentName name;
  auto segment = OpenOrDie(name.options());
  ASSERT_NE(segment, nullptr);
  const cache::DatasetSlot ds = segment->RegisterDataset({5, 5}, kRowBytes, 64).value();
  AdmissionWorker worker({.budget_bytes = 16 * kMiB, .only_on_spare_cpu = false});
  worker.Attach(segment.get());
  PatternLoader loader{2, kRowBytes, nullptr};
  std::vector<std::byte> out(kRowBytes);
  std::uint64_t behind = 0;
  for (std::uint64_t row = 0; row < 32; ++row) {
    const std::vector<std::uint64_t> one = {row};
    cache::ReadRowsStats st;
    ASSERT_TRUE(segment->ReadRows(ds, one, out.data(), loader, nullptr, &st).ok());
    ASSERT_EQ(FirstBadByte(2, one, out.data(), kRowBytes), -1);
    behind += st.admitted_behind;
  }
  worker.Drain();
  EXPECT_EQ(behind, 32u);
  for (std::uint64_t row = 0; row < 32; ++row) EXPECT_TRUE(segment->Contains(ds, row)) << row;
  // Detached: the reader places its own rows again.
  const std::vector<std::uint64_t> next = {40};
  cache::ReadRowsStats st;
  ASSERT_TRUE(segment->ReadRows(ds, next, out.data(), loader, nullptr, &st).ok());
  EXPECT_EQ(st.admitted_behind, 0u);
  EXPECT_TRUE(segment->Contains(ds, 40));
}

TEST(AdmissionWorker, AForkedChildStartsAThreadOfItsOwnAndLeavesTheParentsRowsToIt) {
  ScopedSegmentName name;
  auto segment = OpenOrDie(name.options());
  ASSERT_NE(segment, nullptr);
  const cache::DatasetSlot ds = segment->RegisterDataset({5, 6}, kRowBytes, 64).value();
  AdmissionWorker worker({.budget_bytes = 16 * kMiB, .only_on_spare_cpu = false});
  worker.Attach(segment.get());
  PatternLoader loader{4, kRowBytes, nullptr};
  std::vector<std::byte> out(16 * kRowBytes);
  std::vector<std::uint64_t> parent_rows(16);
  for (std::uint64_t i = 0; i < 16; ++i) parent_rows[i] = i;
  ASSERT_TRUE(segment->ReadRows(ds, parent_rows, out.data(), loader, nullptr, nullptr).ok());
  // fork() as the connector's handlers do it: the worker's lock held across.
  worker.LockForFork();
  const pid_t child = fork();
  worker.UnlockAfterFork();
  if (child == 0) {
    worker.ForgetAfterForkInChild();
    std::vector<std::uint64_t> rows(16);
    for (std::uint64_t i = 0; i < 16; ++i) rows[i] = 32 + i;
    cache::ReadRowsStats st;
    bool ok = segment->ReadRows(ds, rows, out.data(), loader, nullptr, &st).ok() &&
              FirstBadByte(4, rows, out.data(), kRowBytes) == -1 && st.admitted_behind == 16;
    // The parent's rows: hits or waits, never wrong.
    ok = ok && segment->ReadRows(ds, parent_rows, out.data(), loader, nullptr, nullptr).ok() &&
         FirstBadByte(4, parent_rows, out.data(), kRowBytes) == -1;
    worker.Drain();  // the child's own thread places its rows
    for (std::uint64_t r : rows) ok = ok && segment->Contains(ds, r);
    _exit(ok ? 0 : 1);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  worker.Drain();
  for (std::uint64_t r = 0; r < 16; ++r) EXPECT_TRUE(segment->Contains(ds, r)) << r;
  for (std::uint64_t r = 32; r < 48; ++r) EXPECT_TRUE(segment->Contains(ds, r)) << r;
}

}  // namespace
}  // namespace prescient::vol
