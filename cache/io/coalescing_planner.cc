#include "cache/io/coalescing_planner.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

namespace prescient::cache::io {
namespace {

constexpr std::uint64_t kNoOffset = std::numeric_limits<std::uint64_t>::max();

// Sorted, de-duplicated copy of `rows`, checked against the row count.
Result<std::vector<std::uint64_t>> NormalizeRows(std::span<const std::uint64_t> rows,
                                                 std::uint64_t num_rows) {
  std::vector<std::uint64_t> sorted(rows.begin(), rows.end());
  if (!std::is_sorted(sorted.begin(), sorted.end())) std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  if (!sorted.empty() && sorted.back() >= num_rows) {
    return Status::InvalidArgument("row " + std::to_string(sorted.back()) +
                                   " is out of range: the dataset has " + std::to_string(num_rows) +
                                   " rows");
  }
  return sorted;
}

// True when a range starting at `next_begin` may join a read spanning
// [begin, end): the gap is small enough and the result fits the cap.
bool CanMerge(std::uint64_t begin, std::uint64_t end, std::uint64_t next_begin,
              std::uint64_t next_end, const CoalescingOptions& options) {
  if (next_begin < end) return next_end - begin <= options.max_run_bytes;  // overlap (odd files)
  return next_begin - end <= options.max_gap_bytes && next_end - begin <= options.max_run_bytes;
}

// The rows of one slab and where its chunks are.
struct Slab {
  std::uint64_t first_offset = kNoOffset;  // smallest file offset of its stored chunks
  std::uint64_t end_offset = 0;            // largest end of its stored chunks
  std::uint64_t slab = 0;
  std::size_t rows_begin = 0;  // into the sorted row list
  std::size_t rows_end = 0;
};

// Merges the stored chunks of a task's slabs into reads by the gap rule.
void BuildChunkReads(const ChunkedLayout& layout, std::span<const Slab> slabs,
                     const CoalescingOptions& options, ReadTask& task) {
  struct Stored {
    std::uint64_t index;
    ChunkLocation location;
  };
  std::vector<Stored> stored;
  for (const Slab& slab : slabs) {
    const std::uint64_t first = slab.slab * layout.chunks_per_slab();
    for (std::uint64_t i = first; i < first + layout.chunks_per_slab(); ++i) {
      if (const auto& chunk = layout.chunk(i)) {
        stored.push_back({i, *chunk});
      } else {
        task.unallocated_chunks.push_back(i);
      }
    }
  }
  std::sort(stored.begin(), stored.end(), [](const Stored& a, const Stored& b) {
    return a.location.file_offset < b.location.file_offset;
  });
  for (const Stored& chunk : stored) {
    const std::uint64_t begin = chunk.location.file_offset;
    const std::uint64_t end = begin + chunk.location.stored_size;
    if (task.reads.empty() ||
        !CanMerge(task.reads.back().file_offset,
                  task.reads.back().file_offset + task.reads.back().length, begin, end, options)) {
      task.reads.push_back(FileRead{.file_offset = begin, .length = 0, .chunks = {}});
    }
    FileRead& read = task.reads.back();
    read.length = std::max(read.length, end - read.file_offset);
    read.chunks.push_back(ChunkSpan{.chunk_index = chunk.index,
                                    .offset_in_read = begin - read.file_offset,
                                    .stored_size = chunk.location.stored_size});
  }
  std::sort(task.unallocated_chunks.begin(), task.unallocated_chunks.end());
}

}  // namespace

Result<ReadPlan> PlanContiguousReads(const ContiguousLayout& layout,
                                     std::span<const std::uint64_t> rows,
                                     const CoalescingOptions& options) {
  PRESCIENT_RETURN_IF_ERROR(layout.Validate());
  auto sorted = NormalizeRows(rows, layout.num_rows);
  if (!sorted.ok()) return sorted.status();

  ReadPlan plan;
  for (const std::uint64_t row : *sorted) {
    const std::uint64_t begin = layout.RowOffset(row);
    const std::uint64_t end = begin + layout.row_bytes;
    if (!plan.tasks.empty()) {
      FileRead& read = plan.tasks.back().reads.front();
      if (CanMerge(read.file_offset, read.file_offset + read.length, begin, end, options)) {
        read.length = end - read.file_offset;
        plan.tasks.back().rows.push_back(row);
        continue;
      }
    }
    ReadTask task;
    task.reads.push_back(FileRead{.file_offset = begin, .length = layout.row_bytes, .chunks = {}});
    task.rows.push_back(row);
    plan.tasks.push_back(std::move(task));
  }
  if (options.read_window_bytes > 0) {
    // Windows of whole rows, counted from row 0: a read shorter than
    // read_window_bytes covers the windows its rows are in. Reads in a
    // shuffled order then bring each window in once, in one request; windows
    // starting at each read's first row overlapped what earlier reads had
    // brought, and their uncached rests were requests of a few pages each.
    const std::uint64_t window =
        std::max<std::uint64_t>(1, options.read_window_bytes / layout.row_bytes) * layout.row_bytes;
    const std::uint64_t data_end = layout.RowOffset(layout.num_rows);
    for (ReadTask& task : plan.tasks) {
      FileRead& read = task.reads.front();
      if (read.length >= options.read_window_bytes) continue;
      const std::uint64_t begin = read.file_offset - layout.data_offset;
      const std::uint64_t end = begin + read.length;
      const std::uint64_t window_begin = begin / window * window;
      const std::uint64_t window_end = (end + window - 1) / window * window;
      read.file_offset = layout.data_offset + window_begin;
      read.length = std::min(layout.data_offset + window_end, data_end) - read.file_offset;
    }
  }
  return plan;
}

Result<ReadPlan> PlanChunkedReads(const ChunkedLayout& layout, std::span<const std::uint64_t> rows,
                                  const CoalescingOptions& options) {
  // No filter check here: a plan is also how the VOL groups chunk-aligned
  // reads it must do through HDF5 (unsupported filters); LoadTask refuses those.
  auto sorted_or = NormalizeRows(rows, layout.num_rows());
  if (!sorted_or.ok()) return sorted_or.status();
  const std::vector<std::uint64_t>& sorted = *sorted_or;

  // Group the rows by slab and find each slab's extent in the file.
  std::vector<Slab> slabs;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const std::uint64_t slab = layout.SlabOfRow(sorted[i]);
    if (slabs.empty() || slabs.back().slab != slab) {
      Slab next{.slab = slab, .rows_begin = i, .rows_end = i};
      const std::uint64_t first = slab * layout.chunks_per_slab();
      for (std::uint64_t c = first; c < first + layout.chunks_per_slab(); ++c) {
        if (const auto& chunk = layout.chunk(c)) {
          next.first_offset = std::min(next.first_offset, chunk->file_offset);
          next.end_offset = std::max(next.end_offset, chunk->file_offset + chunk->stored_size);
        }
      }
      slabs.push_back(next);
    }
    slabs.back().rows_end = i + 1;
  }
  // Slabs with no stored chunk (kNoOffset) sort last and group together: no I/O.
  std::stable_sort(slabs.begin(), slabs.end(),
                   [](const Slab& a, const Slab& b) { return a.first_offset < b.first_offset; });

  ReadPlan plan;
  std::size_t group_begin = 0;
  std::uint64_t group_first = 0;
  std::uint64_t group_end = 0;
  auto flush = [&](std::size_t group_end_index) {
    ReadTask task;
    const std::span<const Slab> group(slabs.data() + group_begin, group_end_index - group_begin);
    BuildChunkReads(layout, group, options, task);
    for (const Slab& slab : group) {
      task.rows.insert(task.rows.end(),
                       sorted.begin() + static_cast<std::ptrdiff_t>(slab.rows_begin),
                       sorted.begin() + static_cast<std::ptrdiff_t>(slab.rows_end));
    }
    std::sort(task.rows.begin(), task.rows.end());
    plan.tasks.push_back(std::move(task));
  };
  for (std::size_t i = 0; i < slabs.size(); ++i) {
    const Slab& slab = slabs[i];
    if (i > group_begin) {
      const bool both_unstored = slab.first_offset == kNoOffset && group_first == kNoOffset;
      const bool mergeable = slab.first_offset != kNoOffset && group_first != kNoOffset &&
                             CanMerge(group_first, group_end, slab.first_offset,
                                      std::max(group_end, slab.end_offset), options);
      if (!both_unstored && !mergeable) {
        flush(i);
        group_begin = i;
      }
    }
    if (i == group_begin) {
      group_first = slab.first_offset;
      group_end = slab.end_offset;
    } else {
      group_end = std::max(group_end, slab.end_offset);
    }
  }
  if (!slabs.empty()) flush(slabs.size());
  return plan;
}

Result<ReadPlan> PlanContiguousSlices(const ContiguousLayout& layout,
                                      std::span<const std::vector<std::uint64_t>> slices,
                                      const CoalescingOptions& options) {
  std::vector<std::uint64_t> all;
  for (const std::vector<std::uint64_t>& slice : slices)
    all.insert(all.end(), slice.begin(), slice.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  std::vector<bool> taken(all.size(), false);
  auto index_of = [&](std::uint64_t row) {
    return static_cast<std::size_t>(std::lower_bound(all.begin(), all.end(), row) - all.begin());
  };
  ReadPlan out;
  std::vector<std::uint64_t> rows;
  for (const std::vector<std::uint64_t>& slice : slices) {
    rows.clear();
    for (std::uint64_t row : slice) {
      if (!taken[index_of(row)]) rows.push_back(row);
    }
    if (rows.empty()) continue;
    Result<ReadPlan> plan = PlanContiguousReads(layout, rows, options);
    if (!plan.ok()) return plan.status();
    for (ReadTask& task : plan.value().tasks) {
      // Every row not yet taken that lies whole inside one of the task's
      // reads: the slice's own rows, and later slices' rows the read spans.
      task.rows.clear();
      for (const FileRead& read : task.reads) {
        const std::uint64_t begin =
            read.file_offset > layout.data_offset ? read.file_offset - layout.data_offset : 0;
        const std::uint64_t end = read.file_offset + read.length - layout.data_offset;
        const std::uint64_t first = (begin + layout.row_bytes - 1) / layout.row_bytes;
        const std::uint64_t last = end / layout.row_bytes;  // rows [first, last) fit
        for (std::size_t i = index_of(first); i < all.size() && all[i] < last; ++i) {
          if (taken[i]) continue;
          taken[i] = true;
          task.rows.push_back(all[i]);
        }
      }
      out.tasks.push_back(std::move(task));
    }
  }
  return out;
}

Result<ReadPlan> PlanReads(const RawLayout& layout, std::span<const std::uint64_t> rows,
                           const CoalescingOptions& options) {
  if (const auto* contiguous = std::get_if<ContiguousLayout>(&layout)) {
    return PlanContiguousReads(*contiguous, rows, options);
  }
  return PlanChunkedReads(std::get<ChunkedLayout>(layout), rows, options);
}

}  // namespace prescient::cache::io
