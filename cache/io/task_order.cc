#include "cache/io/task_order.h"

#include <algorithm>
#include <utility>

namespace prescient::cache::io {
namespace {

std::uint64_t StepOf(std::span<const RowNeed> needs, std::uint64_t row) {
  const auto it = std::lower_bound(needs.begin(), needs.end(), row,
                                   [](const RowNeed& n, std::uint64_t r) { return n.row < r; });
  return it != needs.end() && it->row == row ? it->step : RowNeed::kNotNeeded;
}

std::uint32_t SliceOf(std::uint64_t step, std::uint64_t front, std::uint64_t slice_steps) {
  if (step == RowNeed::kNotNeeded) return kMaxDeadlineSlices - 1;
  if (step <= front) return 0;
  const std::uint64_t units = (step - front) / slice_steps + 1;  // >= 1
  std::uint32_t slice = 0;
  for (std::uint64_t bound = 2; bound <= units && slice + 1 < kMaxDeadlineSlices; bound *= 2) {
    ++slice;
  }
  return slice;
}

}  // namespace

std::vector<std::vector<std::uint64_t>> SplitByDeadline(std::span<const std::uint64_t> rows,
                                                        std::span<const RowNeed> needs,
                                                        std::uint64_t front,
                                                        std::uint64_t slice_steps) {
  std::vector<std::vector<std::uint64_t>> slices(kMaxDeadlineSlices);
  slice_steps = std::max<std::uint64_t>(1, slice_steps);
  for (std::uint64_t row : rows)
    slices[SliceOf(StepOf(needs, row), front, slice_steps)].push_back(row);
  return slices;
}

void NormalizeNeeds(std::vector<RowNeed>& needs) {
  std::sort(needs.begin(), needs.end(), [](const RowNeed& a, const RowNeed& b) {
    return a.row != b.row ? a.row < b.row : a.step < b.step;
  });
  // After the sort the first entry of each row carries its earliest step.
  needs.erase(std::unique(needs.begin(), needs.end(),
                          [](const RowNeed& a, const RowNeed& b) { return a.row == b.row; }),
              needs.end());
}

void OrderTasksByFirstNeed(ReadPlan& plan, std::span<const RowNeed> needs) {
  std::vector<std::pair<std::uint64_t, std::size_t>> keyed;  // (first need, file-order index)
  keyed.reserve(plan.tasks.size());
  for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
    std::uint64_t first = RowNeed::kNotNeeded;
    for (std::uint64_t row : plan.tasks[i].rows) first = std::min(first, StepOf(needs, row));
    keyed.emplace_back(first, i);
  }
  std::sort(keyed.begin(), keyed.end());  // the index breaks ties: file order is kept
  std::vector<ReadTask> ordered;
  ordered.reserve(plan.tasks.size());
  for (const auto& [first, index] : keyed) ordered.push_back(std::move(plan.tasks[index]));
  plan.tasks = std::move(ordered);
}

}  // namespace prescient::cache::io
