// A read plan: the output of the coalescing planner and the input of the
// loader. It says which byte ranges of the file to read and which rows each
// unit of work completes.
//
// The unit of work is a ReadTask. A task owns whole rows: once all its reads
// are done and decoded, every row in `rows` is complete, so the cache can
// publish rows task by task. For contiguous data a task is one read. For
// chunked data a task covers one or more slabs (all chunks sharing a dim-0
// grid coordinate), each chunk appearing in exactly one task, so every chunk
// is read and decoded once; a task usually has one read, several when a
// slab's chunks are scattered through the file.
#ifndef PRESCIENT_CACHE_IO_READ_PLAN_H_
#define PRESCIENT_CACHE_IO_READ_PLAN_H_

#include <cstdint>
#include <vector>

namespace prescient::cache::io {

// A stored chunk inside a FileRead.
struct ChunkSpan {
  std::uint64_t chunk_index = 0;     // linear C-order grid index
  std::uint64_t offset_in_read = 0;  // where its stored bytes start in the read buffer
  std::uint64_t stored_size = 0;
};

// One pread.
struct FileRead {
  std::uint64_t file_offset = 0;
  std::uint64_t length = 0;
  std::vector<ChunkSpan> chunks{};  // chunked layouts only, ascending offset_in_read
};

struct ReadTask {
  std::vector<FileRead> reads{};  // ascending file_offset, non-overlapping
  // Chunks of this task's slabs never written: their part of each row is the fill value.
  std::vector<std::uint64_t> unallocated_chunks{};
  std::vector<std::uint64_t> rows{};  // the requested rows this task fills, ascending
};

struct ReadPlan {
  // By the file offset of their first read, unless reordered (task_order.h).
  std::vector<ReadTask> tasks{};

  std::uint64_t num_reads() const;
  std::uint64_t bytes_read() const;  // sum of read lengths, gaps included
  std::uint64_t num_rows() const;
};

inline std::uint64_t ReadPlan::num_reads() const {
  std::uint64_t n = 0;
  for (const ReadTask& task : tasks) n += task.reads.size();
  return n;
}

inline std::uint64_t ReadPlan::bytes_read() const {
  std::uint64_t n = 0;
  for (const ReadTask& task : tasks) {
    for (const FileRead& read : task.reads) n += read.length;
  }
  return n;
}

inline std::uint64_t ReadPlan::num_rows() const {
  std::uint64_t n = 0;
  for (const ReadTask& task : tasks) n += task.rows.size();
  return n;
}

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_READ_PLAN_H_
