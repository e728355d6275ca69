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

}  // namespace

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
