#include "cache/io/raw_loader.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "cache/base/mutex.h"
#include "cache/io/chunk_decoder.h"
#include "cache/io/row_scatter.h"

namespace prescient::cache::io {

namespace {

// Per-thread buffers, reused from task to task.
struct LoadScratch {
  // Uninitialized storage: zero-filling megabytes per read would cost as much as a page-cache hit.
  std::unique_ptr<std::byte[]> read_buffer;
  std::size_t read_capacity = 0;
  DecodeBuffers decode;
  std::vector<std::byte*> row_buffers;
  std::vector<ScatterPiece> pieces;

  std::span<std::byte> ReadBuffer(std::uint64_t size) {
    if (size > read_capacity) {
      read_buffer.reset(new std::byte[size]);
      read_capacity = size;
    }
    return {read_buffer.get(), size};
  }
};

Status LoadContiguousTask(const ContiguousLayout& layout, const RandomAccessSource& source,
                          const ReadTask& task, const RowTargetFn& row_target,
                          LoadScratch& scratch) {
  // Rows go straight from the file into their destinations (one preadv per
  // read); the gaps between them, and rows nobody wants, are skipped.
  std::vector<ScatterPiece>& pieces = scratch.pieces;
  auto row = task.rows.begin();
  for (const FileRead& read : task.reads) {
    pieces.clear();
    std::uint64_t at = read.file_offset;
    const std::uint64_t end = read.file_offset + read.length;
    for (; row != task.rows.end() && layout.RowOffset(*row) + layout.row_bytes <= end; ++row) {
      const std::uint64_t offset = layout.RowOffset(*row);
      if (offset > at) pieces.push_back({nullptr, static_cast<std::size_t>(offset - at)});
      pieces.push_back({row_target(*row), static_cast<std::size_t>(layout.row_bytes)});
      at = offset + layout.row_bytes;
    }
    if (end > at) pieces.push_back({nullptr, static_cast<std::size_t>(end - at)});
    const bool wanted = std::any_of(pieces.begin(), pieces.end(),
                                    [](const ScatterPiece& p) { return p.data != nullptr; });
    if (wanted) PRESCIENT_RETURN_IF_ERROR(source.ReadScattered(read.file_offset, pieces));
  }
  return Status();
}

// The task's rows inside the slab of `chunk_index`, and their buffers.
struct SlabRows {
  std::span<const std::uint64_t> rows;
  std::span<std::byte* const> buffers;
};

SlabRows RowsOfChunk(const ChunkedLayout& layout, std::uint64_t chunk_index, const ReadTask& task,
                     const std::vector<std::byte*>& buffers) {
  const std::uint64_t slab = chunk_index / layout.chunks_per_slab();
  const std::uint64_t first = slab * layout.chunk_shape()[0];
  const auto begin = std::lower_bound(task.rows.begin(), task.rows.end(), first);
  const auto end = std::lower_bound(begin, task.rows.end(), first + layout.chunk_shape()[0]);
  const auto offset = static_cast<std::size_t>(begin - task.rows.begin());
  const auto count = static_cast<std::size_t>(end - begin);
  return {{task.rows.data() + offset, count}, {buffers.data() + offset, count}};
}

Status LoadChunkedTask(const ChunkedLayout& layout, const RandomAccessSource& source,
                       const ReadTask& task, const RowTargetFn& row_target, LoadScratch& scratch) {
  scratch.row_buffers.clear();
  bool any = false;
  for (const std::uint64_t r : task.rows) {
    scratch.row_buffers.push_back(row_target(r));
    any = any || scratch.row_buffers.back() != nullptr;
  }
  if (!any) return Status();
  for (const std::uint64_t chunk_index : task.unallocated_chunks) {
    const SlabRows target = RowsOfChunk(layout, chunk_index, task, scratch.row_buffers);
    ScatterChunkToRows(layout, chunk_index, {}, target.rows, target.buffers);
  }
  for (const FileRead& read : task.reads) {
    const std::span<std::byte> buffer = scratch.ReadBuffer(read.length);
    PRESCIENT_RETURN_IF_ERROR(source.ReadExact(read.file_offset, buffer));
    for (const ChunkSpan& span : read.chunks) {
      const ChunkLocation& location = *layout.chunk(span.chunk_index);
      auto decoded = DecodeChunk(buffer.subspan(span.offset_in_read, span.stored_size),
                                 layout.filters(), location.filter_mask, layout.element_size(),
                                 layout.chunk_bytes(), scratch.decode);
      if (!decoded.ok()) {
        return Status(decoded.status().code() == Status::Code::kCorruption
                          ? Status::Corruption("chunk " + std::to_string(span.chunk_index) +
                                               " at offset " +
                                               std::to_string(location.file_offset) + " of '" +
                                               source.name() + "': " + decoded.status().message())
                          : decoded.status());
      }
      const SlabRows target = RowsOfChunk(layout, span.chunk_index, task, scratch.row_buffers);
      ScatterChunkToRows(layout, span.chunk_index, *decoded, target.rows, target.buffers);
    }
  }
  return Status();
}

class LoadExecutionImpl final : public LoadExecution {
 public:
  explicit LoadExecutionImpl(LoadJob job) : job_(std::move(job)) {
    remaining_ = job_.plan.tasks.size();
    summary_.tasks = remaining_;
  }

  void RunTask(std::size_t index) noexcept {
    const ReadTask& task = job_.plan.tasks[index];
    Status status;
    try {
      status = LoadTask(*job_.layout, *job_.source, task, job_.row_target);
    } catch (const std::exception& e) {
      status = Status::Internal(std::string("exception while loading: ") + e.what());
    } catch (...) {
      status = Status::Internal("unknown exception while loading");
    }
    try {
      if (job_.on_task_done) job_.on_task_done(task, status);
    } catch (...) {
      if (status.ok()) status = Status::Internal("on_task_done threw");
    }
    MutexLock lock(&mu_);
    if (status.ok()) {
      for (const FileRead& read : task.reads) summary_.bytes_read += read.length;
      summary_.reads += task.reads.size();
    } else {
      ++summary_.failed_tasks;
      if (summary_.first_error.ok()) summary_.first_error = status;
    }
    if (--remaining_ == 0) done_.SignalAll();
  }

  LoadSummary Wait() override {
    MutexLock lock(&mu_);
    while (remaining_ != 0) done_.Wait(&mu_);
    return summary_;
  }

  bool Done() const override {
    MutexLock lock(&mu_);
    return remaining_ == 0;
  }

 private:
  const LoadJob job_;
  mutable Mutex mu_;
  CondVar done_;
  std::size_t remaining_ GUARDED_BY(mu_) = 0;
  LoadSummary summary_ GUARDED_BY(mu_);
};

}  // namespace

RowTargetFn RowTargetsFromArrays(std::span<const std::uint64_t> rows,
                                 std::span<std::byte* const> buffers) {
  return [rows, buffers](std::uint64_t row) -> std::byte* {
    const auto it = std::lower_bound(rows.begin(), rows.end(), row);
    if (it == rows.end() || *it != row) return nullptr;
    return buffers[static_cast<std::size_t>(it - rows.begin())];
  };
}

Status LoadTask(const RawLayout& layout, const RandomAccessSource& source, const ReadTask& task,
                const RowTargetFn& row_target) {
  thread_local LoadScratch scratch;
  if (const auto* contiguous = std::get_if<ContiguousLayout>(&layout)) {
    return LoadContiguousTask(*contiguous, source, task, row_target, scratch);
  }
  return LoadChunkedTask(std::get<ChunkedLayout>(layout), source, task, row_target, scratch);
}

std::shared_ptr<LoadExecution> StartLoad(LoadJob job, Executor& executor) {
  const std::size_t tasks = job.plan.tasks.size();
  auto execution = std::make_shared<LoadExecutionImpl>(std::move(job));
  for (std::size_t i = 0; i < tasks; ++i) {
    bool accepted = false;
    try {
      // The closure keeps the execution (and so the job) alive until the task ran.
      accepted = executor.Submit([execution, i] { execution->RunTask(i); });
    } catch (...) {
      accepted = false;  // e.g. bad_alloc queueing the task
    }
    if (!accepted) execution->RunTask(i);
  }
  return execution;
}

LoadSummary Load(LoadJob job, Executor& executor) {
  return StartLoad(std::move(job), executor)->Wait();
}

}  // namespace prescient::cache::io
