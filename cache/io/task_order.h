// Ordering a read plan by when its rows are needed.
//
// The planner returns tasks in file order, which is right for the disk but
// wrong for a loader that needs rows in schedule order: in a large prefetch
// round (hundreds of steps, so that misses coalesce) the rows of the very
// next batch would otherwise wait behind whatever happens to sit earlier in
// the file. Submitting tasks by the earliest need among their rows keeps the
// coalescing and puts the next batch first.
#ifndef PRESCIENT_CACHE_IO_TASK_ORDER_H_
#define PRESCIENT_CACHE_IO_TASK_ORDER_H_

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "cache/io/read_plan.h"

namespace prescient::cache::io {

// A row a prefetch round wants and the first step at which it is needed.
struct RowNeed {
  // Rows read only because they share a chunk with needed rows.
  static constexpr std::uint64_t kNotNeeded = std::numeric_limits<std::uint64_t>::max();

  std::uint64_t row = 0;
  std::uint64_t step = kNotNeeded;

  friend bool operator==(const RowNeed&, const RowNeed&) = default;
};

// Sorts by row and keeps one entry per row, with its earliest step.
void NormalizeNeeds(std::vector<RowNeed>& needs);

// Reorders `plan.tasks` by the earliest step of their rows (looked up in
// `needs`, normalized; rows missing from it count as not needed). Ties keep
// file order, so equally urgent tasks still sweep the file forwards.
void OrderTasksByFirstNeed(ReadPlan& plan, std::span<const RowNeed> needs);

// Deadline slices: rows (ascending) split by when they are first needed,
// relative to `front`, the first step the loaders have not begun. Slice 0
// holds the rows needed in [front, front + slice_steps) (or already late),
// slice 1 the next 2 x slice_steps steps, slice 2 the 4 x after those, and so
// on, the last of kMaxDeadlineSlices also every row needed later or not at all.
// Planned one slice at a time, the rows needed next get short reads of their
// own instead of waiting in a long coalesced read beside rows needed seconds
// later, while rows far ahead still coalesce. Each slice stays ascending.
inline constexpr std::uint32_t kMaxDeadlineSlices = 8;
std::vector<std::vector<std::uint64_t>> SplitByDeadline(std::span<const std::uint64_t> rows,
                                                        std::span<const RowNeed> needs,
                                                        std::uint64_t front,
                                                        std::uint64_t slice_steps);

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_TASK_ORDER_H_
