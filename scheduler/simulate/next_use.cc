#include "scheduler/simulate/next_use.h"

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <thread>

namespace prescient::scheduler::simulate {

namespace {

struct NodeTotals {
  std::uint64_t compulsory = 0;
  std::vector<bool> anywhere;
};

// The backward pass for nodes first, first + stride, ...
void NodesPass(const plan::ScheduleView& view, const std::vector<std::uint64_t>& first_steps,
               std::uint32_t first, std::uint32_t stride, NextUseTable& table, NodeTotals& totals) {
  const WorldLayout& layout = view.layout;
  std::vector<std::uint32_t> last_seen(view.num_samples);
  totals.anywhere.assign(view.num_samples, false);
  for (std::uint32_t node = first; node < layout.nodes(); node += stride) {
    const std::uint32_t first_rank = node * layout.ranks_per_node;
    const std::uint32_t end_rank = std::min(first_rank + layout.ranks_per_node, layout.ranks);
    std::fill(last_seen.begin(), last_seen.end(), kNoNextUse);
    std::vector<plan::PartView> parts(end_rank - first_rank);
    for (std::uint32_t e = view.epochs; e-- > 0;) {
      for (std::uint32_t r = first_rank; r < end_rank; ++r) {
        parts[r - first_rank] = view.part(r, e);
        table.next[static_cast<std::size_t>(e) * layout.ranks + r].resize(
            parts[r - first_rank].samples.size());
      }
      const std::size_t steps = first_steps[e + 1] - first_steps[e];
      for (std::uint32_t r = first_rank; r < end_rank; ++r) {
        const plan::PartView& part = parts[r - first_rank];
        if (part.steps() != steps || part.step_begin.back() != part.samples.size()) {
          throw std::invalid_argument("simulate: ranks of one epoch differ in step count");
        }
      }
      for (std::size_t s = steps; s-- > 0;) {
        const auto t = static_cast<std::uint32_t>(first_steps[e] + s);
        for (std::uint32_t r = end_rank; r-- > first_rank;) {
          const plan::PartView& part = parts[r - first_rank];
          std::uint32_t* next = table.next[static_cast<std::size_t>(e) * layout.ranks + r].data();
          for (std::uint64_t i = part.step_begin[s + 1]; i-- > part.step_begin[s];) {
            const SampleId x = part.samples[i];
            if (x >= view.num_samples) {
              throw std::invalid_argument("simulate: sample id out of range");
            }
            next[i] = last_seen[x];
            if (last_seen[x] == kNoNextUse) ++totals.compulsory;
            last_seen[x] = t;
            totals.anywhere[x] = true;
          }
        }
      }
    }
  }
}

}  // namespace

NextUseTable ComputeNextUse(const plan::ScheduleView& view,
                            const std::vector<std::uint64_t>& first_steps, unsigned threads) {
  const WorldLayout& layout = view.layout;
  if (first_steps.back() >= kNoNextUse - 1) {  // 0xfffffffe is SampleSlots's reserved value
    throw std::invalid_argument("simulate: more than 2^32 - 2 global steps");
  }
  NextUseTable table;
  table.next.resize(static_cast<std::size_t>(view.epochs) * layout.ranks);
  const std::uint32_t workers = std::max(1u, std::min<std::uint32_t>(threads, layout.nodes()));
  std::vector<NodeTotals> totals(workers);
  std::vector<std::exception_ptr> errors(workers);
  std::vector<std::thread> pool;
  for (std::uint32_t w = 1; w < workers; ++w) {
    pool.emplace_back([&, w] {
      try {
        NodesPass(view, first_steps, w, workers, table, totals[w]);
      } catch (...) {
        errors[w] = std::current_exception();
      }
    });
  }
  try {
    NodesPass(view, first_steps, 0, workers, table, totals[0]);
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  std::vector<bool> anywhere(view.num_samples, false);
  for (const NodeTotals& t : totals) {
    table.compulsory_node += t.compulsory;
    for (std::uint64_t s = 0; s < view.num_samples; ++s) {
      if (t.anywhere[s]) anywhere[s] = true;
    }
  }
  table.compulsory_global =
      static_cast<std::uint64_t>(std::count(anywhere.begin(), anywhere.end(), true));
  return table;
}

}  // namespace prescient::scheduler::simulate
