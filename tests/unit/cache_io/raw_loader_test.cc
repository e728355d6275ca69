#include "cache/io/raw_loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <random>

#include "cache/io/coalescing_planner.h"
#include "test_dataset.h"

namespace prescient::cache::io {
namespace {

using testing::MakeChunked;
using testing::MakeContiguous;
using testing::MemorySource;
using testing::TestDataset;

// Loads `rows` through the plan and returns each row's bytes.
struct Loaded {
  LoadSummary summary;
  std::map<std::uint64_t, std::vector<std::byte>> rows;
  std::vector<Status> task_statuses;
};

Loaded LoadRows(const RawLayout& layout, std::shared_ptr<const RandomAccessSource> source,
                const std::vector<std::uint64_t>& rows, const CoalescingOptions& options,
                Executor& executor) {
  Loaded out;
  const std::uint64_t row_bytes = RowBytes(layout);
  for (const std::uint64_t r : rows) out.rows[r].assign(row_bytes, std::byte{0xCD});
  std::mutex mu;
  LoadJob job{.layout = std::make_shared<const RawLayout>(layout),
              .source = std::move(source),
              .plan = PlanReads(layout, rows, options).value(),
              .row_target = [&](std::uint64_t row) { return out.rows.at(row).data(); },
              .on_task_done =
                  [&](const ReadTask&, const Status& status) {
                    std::lock_guard lock(mu);
                    out.task_statuses.push_back(status);
                  }};
  out.summary = Load(std::move(job), executor);
  return out;
}

std::vector<std::uint64_t> RandomRows(std::uint64_t num_rows, std::size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint64_t> rows;
  for (std::size_t i = 0; i < count; ++i) rows.push_back(rng() % num_rows);
  return rows;
}

TEST(RawLoaderTest, ContiguousRowsAreExact) {
  ContiguousLayout layout;
  const TestDataset data = MakeContiguous(200, 96, 1234, layout);
  auto source = std::make_shared<MemorySource>(data.file);
  InlineExecutor executor;
  for (const CoalescingOptions options :
       {kNoCoalescing, CoalescingOptions{.max_gap_bytes = 500, .max_run_bytes = 1000},
        kDefaultLocalDiskCoalescing,
        CoalescingOptions{.max_gap_bytes = 0, .max_run_bytes = 0, .read_window_bytes = 1000}}) {
    const std::vector<std::uint64_t> rows = RandomRows(200, 80, 7);
    const Loaded loaded = LoadRows(layout, source, rows, options, executor);
    ASSERT_TRUE(loaded.summary.first_error.ok()) << loaded.summary.first_error.ToString();
    for (const auto& [row, bytes] : loaded.rows) EXPECT_EQ(bytes, data.expected_row(row)) << row;
  }
}

TEST(RawLoaderTest, ContiguousRowsFromARealFileViaPreadv) {
  ContiguousLayout layout;
  const TestDataset data = MakeContiguous(300, 200, 777, layout);
  const char* dir = std::getenv("TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/prescient_loader_" +
                           std::to_string(::getpid());
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data.file.data()),
              static_cast<std::streamsize>(data.file.size()));
  }
  std::shared_ptr<const RandomAccessSource> file = PosixFile::Open(path).value();
  ThreadPool pool({.threads = 2});
  for (const CoalescingOptions options :
       {kNoCoalescing, CoalescingOptions{.max_gap_bytes = 1000, .max_run_bytes = 5000},
        CoalescingOptions{.max_gap_bytes = 1 << 20, .max_run_bytes = 1 << 20},
        CoalescingOptions{.max_gap_bytes = 0, .max_run_bytes = 0, .read_window_bytes = 65536}}) {
    const Loaded loaded = LoadRows(layout, file, RandomRows(300, 120, 3), options, pool);
    ASSERT_TRUE(loaded.summary.first_error.ok()) << loaded.summary.first_error.ToString();
    for (const auto& [row, bytes] : loaded.rows) ASSERT_EQ(bytes, data.expected_row(row)) << row;
  }
  std::remove(path.c_str());
}

struct ChunkCase {
  const char* name;
  testing::ChunkedSpec spec;
};

void PrintTo(const ChunkCase& c, std::ostream* os) { *os << c.name; }

class ChunkedLoaderTest : public ::testing::TestWithParam<ChunkCase> {};

TEST_P(ChunkedLoaderTest, RowsMatchTheArrayWithEveryPlanAndExecutor) {
  ChunkedLayout layout = ChunkedLayout::Make("f", {1}, {1}, 1, {}).value();
  const TestDataset data = MakeChunked(GetParam().spec, layout,
                                       GetParam().spec.unallocated.empty()
                                           ? std::vector<std::byte>{}
                                           : testing::MakeArray(1, GetParam().spec.element_size));
  auto source = std::make_shared<MemorySource>(data.file);
  InlineExecutor inline_executor;
  ThreadPool pool({.threads = 3});
  unsigned seed = 1;
  for (Executor* executor :
       {static_cast<Executor*>(&inline_executor), static_cast<Executor*>(&pool)}) {
    for (const CoalescingOptions options :
         {kNoCoalescing, CoalescingOptions{.max_gap_bytes = 64, .max_run_bytes = 2000},
          kDefaultLocalDiskCoalescing}) {
      const std::vector<std::uint64_t> rows = RandomRows(layout.num_rows(), 25, seed++);
      const Loaded loaded = LoadRows(layout, source, rows, options, *executor);
      ASSERT_TRUE(loaded.summary.first_error.ok()) << loaded.summary.first_error.ToString();
      for (const auto& [row, bytes] : loaded.rows) {
        ASSERT_EQ(bytes, data.expected_row(row)) << GetParam().name << " row " << row;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ChunkedLoaderTest,
    ::testing::Values(
        ChunkCase{"rank1", {.shape = {103}, .chunk_shape = {10}, .element_size = 8}},
        ChunkCase{"rows", {.shape = {50, 7, 5}, .chunk_shape = {8, 7, 5}, .element_size = 4}},
        ChunkCase{"inner_split",
                  {.shape = {40, 12, 10}, .chunk_shape = {4, 6, 10}, .element_size = 4}},
        ChunkCase{"inner_split_edges",
                  {.shape = {37, 13, 11},
                   .chunk_shape = {5, 4, 3},
                   .element_size = 2,
                   .gap_between_chunks = 17}},
        ChunkCase{
            "deflate",
            {.shape = {45, 9, 6}, .chunk_shape = {10, 9, 6}, .element_size = 4, .deflate = true}},
        ChunkCase{"shuffle_deflate_split",
                  {.shape = {33, 10, 7},
                   .chunk_shape = {6, 4, 7},
                   .element_size = 8,
                   .shuffle = true,
                   .deflate = true,
                   .reverse_file_order = true}},
        ChunkCase{"shuffle_only_1byte",
                  {.shape = {30, 20}, .chunk_shape = {7, 6}, .element_size = 1, .shuffle = true}},
        ChunkCase{"mask_skips_deflate",
                  {.shape = {30, 8},
                   .chunk_shape = {7, 8},
                   .element_size = 4,
                   .shuffle = true,
                   .deflate = true,
                   .filter_mask = 0b10}},
        ChunkCase{"mask_skips_all",
                  {.shape = {30, 8},
                   .chunk_shape = {7, 8},
                   .element_size = 4,
                   .shuffle = true,
                   .deflate = true,
                   .filter_mask = 0b11}},
        ChunkCase{"unallocated_with_fill",
                  {.shape = {30, 8, 4},
                   .chunk_shape = {5, 4, 4},
                   .element_size = 4,
                   .deflate = true,
                   .unallocated = {0, 3, 6, 7}}}),
    [](const ::testing::TestParamInfo<ChunkCase>& param_info) {
      return std::string(param_info.param.name);
    });

TEST(RawLoaderTest, UnsupportedFilterIsRefusedByTheLoader) {
  ChunkedLayout layout =
      ChunkedLayout::Make("f", {10, 4}, {5, 4}, 4, {{.id = 32017, .client_data = {}}})
          .value();  // SZ
  ASSERT_TRUE(
      layout.SetChunk(std::vector<std::uint64_t>{0, 0}, {.file_offset = 0, .stored_size = 80})
          .ok());
  InlineExecutor executor;
  const Loaded loaded = LoadRows(layout, std::make_shared<MemorySource>(std::vector<std::byte>(80)),
                                 {2}, kNoCoalescing, executor);
  EXPECT_EQ(loaded.summary.first_error.code(), Status::Code::kUnsupported);
  EXPECT_NE(loaded.summary.first_error.message().find("32017"), std::string::npos);
}

TEST(RawLoaderTest, NullTargetSkipsRows) {
  ContiguousLayout layout;
  const TestDataset data = MakeContiguous(10, 16, 0, layout);
  const auto source = std::make_shared<MemorySource>(data.file);
  std::vector<std::byte> row3(16);
  LoadJob job{.layout = std::make_shared<const RawLayout>(layout),
              .source = source,
              .plan = PlanReads(layout, std::vector<std::uint64_t>{2, 3, 4}, {}).value(),
              .row_target = [&](std::uint64_t row) { return row == 3 ? row3.data() : nullptr; },
              .on_task_done = {}};
  InlineExecutor executor;
  EXPECT_TRUE(Load(std::move(job), executor).first_error.ok());
  EXPECT_EQ(row3, data.expected_row(3));
}

TEST(RawLoaderTest, ShortFileIsAnIoErrorForThatTaskOnly) {
  ContiguousLayout layout;
  TestDataset data = MakeContiguous(100, 64, 0, layout);
  data.file.resize(50 * 64 + 10);  // rows 50.. are missing or cut
  const auto source = std::make_shared<MemorySource>(data.file, "short.h5");
  ThreadPool pool({.threads = 2});
  const Loaded loaded = LoadRows(layout, source, {1, 80}, kNoCoalescing, pool);
  EXPECT_EQ(loaded.summary.tasks, 2u);
  EXPECT_EQ(loaded.summary.failed_tasks, 1u);
  EXPECT_EQ(loaded.summary.first_error.code(), Status::Code::kIoError);
  EXPECT_NE(loaded.summary.first_error.message().find("short.h5"), std::string::npos);
  EXPECT_EQ(loaded.rows.at(1), data.expected_row(1));
  EXPECT_EQ(loaded.task_statuses.size(), 2u);
}

TEST(RawLoaderTest, CorruptDeflateChunkIsReportedNotFatal) {
  ChunkedLayout layout = ChunkedLayout::Make("f", {1}, {1}, 1, {}).value();
  TestDataset data = MakeChunked(
      {.shape = {40, 16}, .chunk_shape = {10, 16}, .element_size = 4, .deflate = true}, layout);
  const ChunkLocation second = *layout.chunk(1);
  for (std::uint64_t i = 4; i < second.stored_size; i += 5) {
    data.file[second.file_offset + i] ^= std::byte{0x3c};
  }
  const auto source = std::make_shared<MemorySource>(data.file, "corrupt.h5");
  ThreadPool pool({.threads = 2});
  const Loaded loaded = LoadRows(layout, source, {3, 15, 25}, kNoCoalescing, pool);
  EXPECT_EQ(loaded.summary.failed_tasks, 1u);
  const Status& error = loaded.summary.first_error;
  EXPECT_EQ(error.code(), Status::Code::kCorruption) << error.ToString();
  EXPECT_NE(error.message().find("chunk 1"), std::string::npos) << error.message();
  EXPECT_NE(error.message().find("corrupt.h5"), std::string::npos) << error.message();
  EXPECT_EQ(loaded.rows.at(3), data.expected_row(3));
  EXPECT_EQ(loaded.rows.at(25), data.expected_row(25));
}

TEST(RawLoaderTest, ExceptionsInCallbacksBecomeStatuses) {
  ContiguousLayout layout;
  const TestDataset data = MakeContiguous(10, 16, 0, layout);
  LoadJob job{.layout = std::make_shared<const RawLayout>(layout),
              .source = std::make_shared<MemorySource>(data.file),
              .plan = PlanReads(layout, std::vector<std::uint64_t>{1, 8}, kNoCoalescing).value(),
              .row_target = [](std::uint64_t) -> std::byte* { throw std::runtime_error("boom"); },
              .on_task_done = {}};
  ThreadPool pool({.threads = 2});
  const LoadSummary summary = Load(std::move(job), pool);
  EXPECT_EQ(summary.failed_tasks, 2u);
  EXPECT_EQ(summary.first_error.code(), Status::Code::kInternal);
  EXPECT_NE(summary.first_error.message().find("boom"), std::string::npos);
}

// An executor that refuses everything: the loader must run the tasks itself.
class RefusingExecutor final : public Executor {
 public:
  bool Submit(std::function<void()>) override { return false; }
};

TEST(RawLoaderTest, RefusedTasksRunOnTheCaller) {
  ContiguousLayout layout;
  const TestDataset data = MakeContiguous(30, 8, 0, layout);
  RefusingExecutor executor;
  const Loaded loaded = LoadRows(layout, std::make_shared<MemorySource>(data.file), {1, 5, 20},
                                 kNoCoalescing, executor);
  EXPECT_TRUE(loaded.summary.first_error.ok());
  EXPECT_EQ(loaded.summary.reads, 3u);
  EXPECT_EQ(loaded.rows.at(20), data.expected_row(20));
}

TEST(RawLoaderTest, RowTargetsFromArraysMapsRows) {
  std::vector<std::byte> a(1), b(1);
  const std::vector<std::uint64_t> rows = {4, 9};
  const std::vector<std::byte*> buffers = {a.data(), b.data()};
  const RowTargetFn target = RowTargetsFromArrays(rows, buffers);
  EXPECT_EQ(target(4), a.data());
  EXPECT_EQ(target(9), b.data());
  EXPECT_EQ(target(5), nullptr);
}

}  // namespace
}  // namespace prescient::cache::io
