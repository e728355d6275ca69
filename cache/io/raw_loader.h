// The loader: executes a ReadPlan (read_plan.h) against a file, decoding
// chunks and writing each requested row into a buffer the caller provides.
//
//   auto file = PosixFile::Open(path).value();
//   ThreadPool pool({.threads = 4});
//   LoadJob job{.layout = layout, .source = file, .plan = plan,
//               .row_target = [&](std::uint64_t row) { return SlotFor(row); },
//               .on_task_done = [&](const ReadTask& t, const Status& s) { Publish(t.rows, s); }};
//   LoadSummary summary = StartLoad(std::move(job), pool)->Wait();
//
// Threads: row_target and on_task_done are called on the executor's threads,
// possibly concurrently for different tasks; each row is requested once.
// Never throws; errors come back per task and in the summary.
#ifndef PRESCIENT_CACHE_IO_RAW_LOADER_H_
#define PRESCIENT_CACHE_IO_RAW_LOADER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "cache/io/executor.h"
#include "cache/io/random_access_file.h"
#include "cache/io/raw_layout.h"
#include "cache/io/read_plan.h"
#include "cache/io/status.h"

namespace prescient::cache::io {

// Where row `row` goes: a buffer of RowBytes(layout) bytes, or nullptr to
// skip the row (e.g. another process already loaded it). Called once per row,
// before any byte of the row is written.
using RowTargetFn = std::function<std::byte*(std::uint64_t row)>;

// Called once per task after its rows are written, or with the error that
// stopped it (its rows' contents are then unspecified).
using TaskDoneFn = std::function<void(const ReadTask& task, const Status& status)>;

// A RowTargetFn over parallel arrays. REQUIRES: rows ascending and unique;
// both spans outlive every use of the returned function.
RowTargetFn RowTargetsFromArrays(std::span<const std::uint64_t> rows,
                                 std::span<std::byte* const> buffers);

// Executes one task on the calling thread (buffers are reused per thread).
Status LoadTask(const RawLayout& layout, const RandomAccessSource& source, const ReadTask& task,
                const RowTargetFn& row_target);

struct LoadJob {
  std::shared_ptr<const RawLayout> layout{};
  std::shared_ptr<const RandomAccessSource> source{};
  ReadPlan plan{};
  RowTargetFn row_target{};
  TaskDoneFn on_task_done{};  // optional
};

struct LoadSummary {
  std::uint64_t tasks = 0;
  std::uint64_t failed_tasks = 0;
  std::uint64_t bytes_read = 0;  // by tasks that succeeded
  std::uint64_t reads = 0;       // by tasks that succeeded
  Status first_error;            // OK when every task succeeded
};

// A plan in flight. Holds the job until every task has finished.
class LoadExecution {
 public:
  virtual ~LoadExecution() = default;
  // Blocks until every task has finished (called on_task_done).
  virtual LoadSummary Wait() = 0;
  virtual bool Done() const = 0;
};

// Submits every task of the job to `executor` and returns at once (with an
// InlineExecutor, after all tasks ran). A task the executor refuses runs on
// the calling thread, so a plan always completes.
std::shared_ptr<LoadExecution> StartLoad(LoadJob job, Executor& executor);

// StartLoad + Wait.
LoadSummary Load(LoadJob job, Executor& executor);

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_RAW_LOADER_H_
