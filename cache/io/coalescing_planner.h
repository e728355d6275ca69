// The coalescing planner: turns the missing rows of one dataset into a
// ReadPlan (read_plan.h). Pure: no I/O, deterministic, cheap (sorting).
//
//   ReadPlan plan = PlanReads(layout, missing_rows, options).value();
//
// Contiguous: each row is a byte range; ranges sorted by offset are merged
// while the gap between neighbours is <= max_gap_bytes and the merged read
// stays <= max_run_bytes. Each read is one task.
//
// Chunked: rows are grouped by slab (the chunks sharing their dim-0 grid
// coordinate; every row needs all of its slab's chunks). Slabs are taken in
// file order of their first chunk and grouped into tasks while the next slab
// starts within max_gap_bytes of the task's end and the task's extent stays
// <= max_run_bytes. Inside a task the chunks' byte ranges are merged by the
// same gap rule. Each chunk belongs to exactly one task.
#ifndef PRESCIENT_CACHE_IO_COALESCING_PLANNER_H_
#define PRESCIENT_CACHE_IO_COALESCING_PLANNER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "cache/io/coalescing_options.h"
#include "cache/io/raw_layout.h"
#include "cache/io/read_plan.h"
#include "cache/io/status.h"

namespace prescient::cache::io {

// `rows` may be in any order and contain duplicates; each row appears in the
// plan once. InvalidArgument if a row is >= the dataset's row count or the
// layout is invalid. Filters are not checked: a chunked plan with filters this
// library cannot decode is still a valid grouping of chunk-aligned reads for
// the caller to do through HDF5 (the loader returns Unsupported for it).
Result<ReadPlan> PlanReads(const RawLayout& layout, std::span<const std::uint64_t> rows,
                           const CoalescingOptions& options);

Result<ReadPlan> PlanContiguousReads(const ContiguousLayout& layout,
                                     std::span<const std::uint64_t> rows,
                                     const CoalescingOptions& options);

// Deadline slices of contiguous rows (task_order.h: SplitByDeadline), planned
// one after the other, most urgent first. A read of one slice that spans rows
// of a later slice (its gap merged, or the read extended to its read_window_bytes windows)
// delivers them too, and they leave their own slice: bytes read are used, and
// no row is read twice. Tasks come out slice by slice, each slice's in file
// order; every row of every slice is in exactly one task. Rows as for PlanContiguousReads; no row
// may be in two slices.
Result<ReadPlan> PlanContiguousSlices(const ContiguousLayout& layout,
                                      std::span<const std::vector<std::uint64_t>> slices,
                                      const CoalescingOptions& options);

Result<ReadPlan> PlanChunkedReads(const ChunkedLayout& layout, std::span<const std::uint64_t> rows,
                                  const CoalescingOptions& options);

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_COALESCING_PLANNER_H_
