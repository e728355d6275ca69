// Admission behind the reader (cache/core/admission_queue.h): rows a read
// loaded reach the caller at once, stay claimed (Loading) until the queue's
// thread publishes them, and are then hits, byte for byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::FirstBadByte;
using testing::OpenOrDie;
using testing::PatternLoader;
using testing::ScopedSegmentName;

// Keeps what is handed over until the test publishes it; `full` refuses;
// `read_again` asks for the rows only (the test fills their bytes);
// `unkept_from_run` (bytes, 0 = never) leaves runs that long or longer unkept.
class HeldQueue final : public AdmissionQueue {
 public:
  bool LeavesUnkept(DatasetSlot, std::uint64_t bytes_per_run) noexcept override {
    runs_asked.push_back(bytes_per_run);
    return unkept_from_run != 0 && bytes_per_run >= unkept_from_run;
  }
  static constexpr std::byte kUnfilled{0xee};
  std::span<std::byte> Reserve(DatasetSlot, std::uint64_t bytes) noexcept override {
    if (full) return {};
    buffers.push_back(std::make_unique<std::byte[]>(bytes));
    std::fill_n(buffers.back().get(), bytes, kUnfilled);
    return {buffers.back().get(), static_cast<std::size_t>(bytes)};
  }
  bool ReadsRowsAgain(DatasetSlot, std::uint64_t) noexcept override { return read_again; }
  void Unreserve(std::span<std::byte>) noexcept override { ++unreserved; }
  bool Submit(LoadedRows&& rows) noexcept override {
    held.push_back(std::move(rows));
    return true;
  }
  PublishedRows PublishAll(NodeCache& cache) {
    PublishedRows sum;
    for (LoadedRows& rows : held) {
      const PublishedRows p = cache.PublishLoaded(std::move(rows));
      sum.stored += p.stored;
      sum.not_admitted += p.not_admitted;
    }
    held.clear();
    return sum;
  }

  bool full = false;
  bool read_again = false;
  std::uint64_t unkept_from_run = 0;
  std::vector<std::uint64_t> runs_asked;
  int unreserved = 0;
  std::vector<std::unique_ptr<std::byte[]>> buffers;
  std::vector<LoadedRows> held;
};

// Publishes on a thread of its own, as the connector's worker does.
class ThreadQueue final : public AdmissionQueue {
 public:
  explicit ThreadQueue(NodeCache& cache) : cache_(cache), thread_([this] { Run(); }) {}
  ~ThreadQueue() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  std::span<std::byte> Reserve(DatasetSlot, std::uint64_t bytes) noexcept override {
    std::lock_guard lock(mu_);
    if (in_flight_ > 8) return {};  // a bounded queue: the reader publishes its own
    ++in_flight_;
    auto* data = new std::byte[bytes];
    return {data, static_cast<std::size_t>(bytes)};
  }
  bool ReadsRowsAgain(DatasetSlot, std::uint64_t) noexcept override { return false; }
  void Unreserve(std::span<std::byte> buffer) noexcept override {
    delete[] buffer.data();
    std::lock_guard lock(mu_);
    --in_flight_;
  }
  bool Submit(LoadedRows&& rows) noexcept override {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(rows));
    }
    wake_.notify_one();
    return true;
  }
  std::uint64_t stored() {
    std::lock_guard lock(mu_);
    return stored_;
  }

 private:
  void Run() {
    std::unique_lock lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      LoadedRows rows = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      const std::span<std::byte> buffer = rows.bytes;
      const PublishedRows p = cache_.PublishLoaded(std::move(rows));
      Unreserve(buffer);
      lock.lock();
      stored_ += p.stored;
    }
  }

  NodeCache& cache_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<LoadedRows> queue_;
  int in_flight_ = 0;
  std::uint64_t stored_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

constexpr std::uint64_t kRowBytes = 20 * 1024;  // larger than what the reader copies in itself

// A segment of its own, the queue set on it (and unset at the end).
class AdmissionBehind : public ::testing::Test {
 protected:
  void SetUp() override {
    // The tests hold handed-over rows back on purpose: readers wait for them.
    name.options().wait_patience_loads = 0;
    cache = OpenOrDie(name.options());
    ASSERT_NE(cache, nullptr);
    cache->SetAdmissionQueue(&queue);
  }
  void TearDown() override {
    if (cache != nullptr) cache->SetAdmissionQueue(nullptr);
  }

  ScopedSegmentName name;
  std::unique_ptr<NodeCache> cache;
  HeldQueue queue;
};

TEST_F(AdmissionBehind, RowsReachTheCallerAtOnceAndAreHitsOncePublished) {
  const DatasetSlot ds = cache->RegisterDataset({7, 1}, kRowBytes, 64).value();
  std::atomic<std::uint64_t> loaded{0};
  PatternLoader loader{3, kRowBytes, &loaded};
  const std::vector<std::uint64_t> rows = {12, 4, 30, 4, 5};
  std::vector<std::byte> out(rows.size() * kRowBytes);
  ReadRowsStats st;
  ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), loader, nullptr, &st).ok());
  EXPECT_EQ(FirstBadByte(3, rows, out.data(), kRowBytes), -1);
  EXPECT_EQ(st.loaded, 4u);
  EXPECT_EQ(st.admitted_behind, 4u);
  ASSERT_EQ(queue.held.size(), 1u);
  EXPECT_EQ(queue.held[0].rows, (std::vector<std::uint64_t>{4, 5, 12, 30}));
  EXPECT_FALSE(cache->Contains(ds, 12));  // claimed, not yet resident

  // Another reader of a handed-over row waits for it, loading nothing.
  std::vector<std::byte> other(kRowBytes);
  ReadRowsStats other_st;
  std::thread reader([&] {
    const std::vector<std::uint64_t> one = {30};
    EXPECT_TRUE(cache->ReadRows(ds, one, other.data(), loader, nullptr, &other_st).ok());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const PublishedRows published = queue.PublishAll(*cache);
  reader.join();
  EXPECT_EQ(published.stored, 4u);
  EXPECT_EQ(published.not_admitted, 0u);
  EXPECT_EQ(other_st.waited, 1u);
  EXPECT_EQ(FirstBadByte(3, std::vector<std::uint64_t>{30}, other.data(), kRowBytes), -1);
  EXPECT_EQ(loaded.load(), 4u);

  std::vector<std::byte> again(rows.size() * kRowBytes);
  ReadRowsStats st2;
  ASSERT_TRUE(cache->ReadRows(ds, rows, again.data(), loader, nullptr, &st2).ok());
  EXPECT_EQ(FirstBadByte(3, rows, again.data(), kRowBytes), -1);
  EXPECT_EQ(st2.hits, 4u);
  EXPECT_EQ(loaded.load(), 4u);
}

TEST_F(AdmissionBehind, AQueueThatReadsRowsAgainGetsNoCopyFromTheReader) {
  queue.read_again = true;
  const DatasetSlot ds = cache->RegisterDataset({7, 4}, kRowBytes, 64).value();
  std::atomic<std::uint64_t> loaded{0};
  PatternLoader loader{8, kRowBytes, &loaded};
  const std::vector<std::uint64_t> rows = {9, 2, 17};
  std::vector<std::byte> out(rows.size() * kRowBytes);
  ReadRowsStats st;
  ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), loader, nullptr, &st).ok());
  EXPECT_EQ(FirstBadByte(8, rows, out.data(), kRowBytes), -1);
  EXPECT_EQ(st.admitted_behind, 3u);
  EXPECT_EQ(st.admitted_read_again, 3u);
  ASSERT_EQ(queue.held.size(), 1u);
  LoadedRows& held = queue.held[0];
  ASSERT_TRUE(held.read_again);
  ASSERT_EQ(held.bytes.size(), 3 * kRowBytes);
  for (std::byte b : held.bytes) ASSERT_EQ(b, HeldQueue::kUnfilled);  // nothing copied

  // The queue reads them itself (here: the same loader) and publishes.
  std::vector<std::byte*> dest;
  for (std::size_t i = 0; i < held.rows.size(); ++i)
    dest.push_back(held.bytes.data() + i * kRowBytes);
  ASSERT_TRUE(loader(held.rows, dest).ok());
  held.read_again = false;
  const PublishedRows published = queue.PublishAll(*cache);
  EXPECT_EQ(published.stored, 3u);
  std::vector<std::byte> again(rows.size() * kRowBytes);
  ReadRowsStats st2;
  ASSERT_TRUE(cache->ReadRows(ds, rows, again.data(), loader, nullptr, &st2).ok());
  EXPECT_EQ(FirstBadByte(8, rows, again.data(), kRowBytes), -1);
  EXPECT_EQ(st2.hits, 3u);
  EXPECT_EQ(loaded.load(), 6u);  // the reader's load and the queue's
}

TEST_F(AdmissionBehind, RowsTheQueueFailedToReadAgainAreReleasedNotPublished) {
  queue.read_again = true;
  const DatasetSlot ds = cache->RegisterDataset({7, 5}, kRowBytes, 64).value();
  std::atomic<std::uint64_t> loaded{0};
  PatternLoader loader{9, kRowBytes, &loaded};
  const std::vector<std::uint64_t> rows = {3, 4};
  std::vector<std::byte> out(rows.size() * kRowBytes);
  ReadRowsStats st;
  ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), loader, nullptr, &st).ok());
  ASSERT_EQ(queue.held.size(), 1u);
  // Published with read_again still set (the queue's read failed): the
  // unfilled bytes are never made resident, and the claims go.
  const PublishedRows published = queue.PublishAll(*cache);
  EXPECT_EQ(published.stored, 0u);
  EXPECT_EQ(published.not_admitted, 2u);
  EXPECT_FALSE(cache->Contains(ds, 3));
  cache->SetAdmissionQueue(nullptr);
  std::vector<std::byte> again(rows.size() * kRowBytes);
  ReadRowsStats st2;
  ASSERT_TRUE(cache->ReadRows(ds, rows, again.data(), loader, nullptr, &st2).ok());
  EXPECT_EQ(FirstBadByte(9, rows, again.data(), kRowBytes), -1);
  EXPECT_EQ(st2.loaded, 2u);  // loaded afresh, no wait for a claim
  EXPECT_EQ(st2.waited, 0u);
}

TEST_F(AdmissionBehind, AFullQueueLeavesTheCopyToTheReader) {
  queue.full = true;
  const DatasetSlot ds = cache->RegisterDataset({7, 2}, kRowBytes, 64).value();
  PatternLoader loader{5, kRowBytes, nullptr};
  const std::vector<std::uint64_t> rows = {1, 2, 3};
  std::vector<std::byte> out(rows.size() * kRowBytes);
  ReadRowsStats st;
  ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), loader, nullptr, &st).ok());
  EXPECT_EQ(FirstBadByte(5, rows, out.data(), kRowBytes), -1);
  EXPECT_EQ(st.admitted_behind, 0u);
  EXPECT_TRUE(queue.held.empty());
  EXPECT_TRUE(cache->Contains(ds, 2));
}

TEST_F(AdmissionBehind, SmallRowsAreCopiedInByTheReader) {
  // Rows copied in under the lock stay the reader's: the next row of the
  // same entry, read at once, is then a hit, not a wait for the thread.
  constexpr std::uint64_t kSmall = 1000;
  const DatasetSlot ds = cache->RegisterDataset({7, 3}, kSmall, 64).value();
  PatternLoader loader{6, kSmall, nullptr};
  const std::vector<std::uint64_t> rows = {8, 9, 40};
  std::vector<std::byte> out(rows.size() * kSmall);
  ReadRowsStats st;
  ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), loader, nullptr, &st).ok());
  EXPECT_EQ(FirstBadByte(6, rows, out.data(), kSmall), -1);
  EXPECT_EQ(st.admitted_behind, 0u);
  EXPECT_TRUE(queue.held.empty());
  for (std::uint64_t r : rows) EXPECT_TRUE(cache->Contains(ds, r)) << r;
}

TEST_F(AdmissionBehind, LongRunsTheQueueLeavesUnkeptReachTheCallerAndAreNotKept) {
  queue.unkept_from_run = 3 * kRowBytes;
  const DatasetSlot ds = cache->RegisterDataset({7, 6}, kRowBytes, 64).value();
  std::atomic<std::uint64_t> loaded{0};
  PatternLoader loader{4, kRowBytes, &loaded};
  // Two runs, 20-23 and 40-41: three rows a run on average.
  const std::vector<std::uint64_t> rows = {41, 20, 21, 22, 23, 40};
  std::vector<std::byte> out(rows.size() * kRowBytes);
  ReadRowsStats st;
  ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), loader, nullptr, &st).ok());
  EXPECT_EQ(FirstBadByte(4, rows, out.data(), kRowBytes), -1);
  ASSERT_EQ(queue.runs_asked, (std::vector<std::uint64_t>{3 * kRowBytes}));
  EXPECT_EQ(st.loaded, 6u);
  EXPECT_EQ(st.not_kept, 6u);
  EXPECT_EQ(st.admitted_behind, 0u);
  EXPECT_TRUE(queue.held.empty());
  for (std::uint64_t r : rows) EXPECT_FALSE(cache->Contains(ds, r)) << r;
  EXPECT_EQ(cache->Stats().rows_resident, 0u);

  // Their claims went: the next reader loads them at once, waiting for none.
  std::vector<std::byte> again(rows.size() * kRowBytes);
  ReadRowsStats st2;
  ASSERT_TRUE(cache->ReadRows(ds, rows, again.data(), loader, nullptr, &st2).ok());
  EXPECT_EQ(FirstBadByte(4, rows, again.data(), kRowBytes), -1);
  EXPECT_EQ(st2.loaded, 6u);
  EXPECT_EQ(st2.waited, 0u);
  EXPECT_EQ(loaded.load(), 12u);
}

TEST_F(AdmissionBehind, ScatteredRowsOfABatchAreKept) {
  queue.unkept_from_run = 3 * kRowBytes;
  const DatasetSlot ds = cache->RegisterDataset({7, 7}, kRowBytes, 64).value();
  PatternLoader loader{2, kRowBytes, nullptr};
  // Six rows in four runs (3-4, 9, 30-31, 50): 1.5 rows a run.
  const std::vector<std::uint64_t> rows = {50, 3, 31, 9, 4, 30};
  std::vector<std::byte> out(rows.size() * kRowBytes);
  ReadRowsStats st;
  ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), loader, nullptr, &st).ok());
  EXPECT_EQ(FirstBadByte(2, rows, out.data(), kRowBytes), -1);
  ASSERT_EQ(queue.runs_asked, (std::vector<std::uint64_t>{6 * kRowBytes / 4}));
  EXPECT_EQ(st.not_kept, 0u);
  EXPECT_EQ(st.admitted_behind, 6u);
  EXPECT_EQ(queue.PublishAll(*cache).stored, 6u);
  for (std::uint64_t r : rows) EXPECT_TRUE(cache->Contains(ds, r)) << r;
}

TEST_F(AdmissionBehind, RowsOfADatasetDroppedMeanwhileAreNotPublished) {
  const DatasetSlot ds = cache->RegisterDataset({7, 4}, kRowBytes, 64).value();
  PatternLoader loader{8, kRowBytes, nullptr};
  const std::vector<std::uint64_t> rows = {10, 11};
  std::vector<std::byte> out(rows.size() * kRowBytes);
  ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), loader, nullptr, nullptr).ok());
  ASSERT_EQ(queue.held.size(), 1u);
  ASSERT_TRUE(cache->DropDataset(ds).ok());  // the file changed under an open handle
  const PublishedRows published = queue.PublishAll(*cache);
  EXPECT_EQ(published.stored, 0u);
  EXPECT_EQ(published.not_admitted, 2u);
  EXPECT_EQ(cache->Stats().rows_resident, 0u);
  // The same key registered again gets a new slot and loads afresh.
  const DatasetSlot fresh = cache->RegisterDataset({7, 4}, kRowBytes, 64).value();
  ASSERT_NE(fresh, ds);
  ReadRowsStats st;
  ASSERT_TRUE(cache->ReadRows(fresh, rows, out.data(), loader, nullptr, &st).ok());
  EXPECT_EQ(st.loaded, 2u);
  EXPECT_EQ(FirstBadByte(8, rows, out.data(), kRowBytes), -1);
}

TEST(AdmissionBehindThread, ReadersAndThePublishingThreadTogetherKeepEveryByteExact) {
  // Readers miss, hit and wait on rows the queue's thread is publishing, in a
  // cache that holds a third of the rows (evictions, declined admissions).
  ScopedSegmentName name;
  name.options().capacity_bytes = 2 << 20;
  auto cache = OpenOrDie(name.options());
  ASSERT_NE(cache, nullptr);
  constexpr std::uint64_t kRows = 300;
  const DatasetSlot ds = cache->RegisterDataset({7, 5}, kRowBytes, kRows).value();
  std::uint64_t stored = 0;
  {
    ThreadQueue queue(*cache);
    cache->SetAdmissionQueue(&queue);
    std::vector<std::thread> readers;
    for (int t = 0; t < 3; ++t) {
      readers.emplace_back([&, t] {
        PatternLoader loader{9, kRowBytes, nullptr};
        std::mt19937_64 rng(t);
        std::vector<std::byte> out(4 * kRowBytes);
        for (int i = 0; i < 400; ++i) {
          std::vector<std::uint64_t> rows(1 + rng() % 4);
          for (auto& r : rows) r = rng() % kRows;
          ASSERT_TRUE(cache->ReadRows(ds, rows, out.data(), loader, nullptr, nullptr).ok());
          ASSERT_EQ(FirstBadByte(9, rows, out.data(), kRowBytes), -1) << "read " << i;
        }
      });
    }
    for (auto& th : readers) th.join();
    cache->SetAdmissionQueue(nullptr);
    stored = queue.stored();  // read before the queue drains
  }
  EXPECT_GT(stored, 0u);
  EXPECT_GT(cache->Stats().rows_resident, 0u);
}

}  // namespace
}  // namespace prescient::cache
