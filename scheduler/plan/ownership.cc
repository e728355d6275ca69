#include "scheduler/plan/ownership.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

namespace prescient::scheduler::plan {
namespace {

// A fixed mix of sample and node (splitmix64's finaliser): the tie-break
// between nodes that read a sample equally often.
std::uint64_t TieBreak(SampleId sample, std::uint32_t node) {
  std::uint64_t x = (std::uint64_t{sample} << 32) ^ node;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

SampleOwners::SampleOwners(std::uint64_t num_samples, std::uint32_t nodes, std::uint64_t budget)
    : owner_(num_samples, kNoOwner), owned_(nodes, 0), budget_(budget) {}

void SampleOwners::Assign(SampleId sample, std::uint32_t node) {
  owner_[sample] = node;
  ++owned_[node];
}

std::uint64_t HeldBudget(std::uint64_t cache_samples, std::uint64_t read_samples,
                         std::uint32_t nodes) {
  if (nodes == 0) return 0;
  const std::uint64_t share = (read_samples + nodes - 1) / nodes;
  return std::min(cache_samples - cache_samples / kTransitShareDivisor, share);
}

SampleOwners AssignOwners(const ScheduleView& view, std::uint64_t cache_samples) {
  const WorldLayout& layout = view.layout;
  const std::uint32_t nodes = layout.nodes();
  // The node reading each sample most often (and how often), node by node so
  // memory stays three arrays of the sample count.
  std::vector<std::uint32_t> count(view.num_samples);
  std::vector<std::uint32_t> best_count(view.num_samples, 0);
  std::vector<std::uint32_t> best_node(view.num_samples, SampleOwners::kNoOwner);
  for (std::uint32_t node = 0; node < nodes; ++node) {
    std::fill(count.begin(), count.end(), 0);
    ForEachPartOfNode(view, node, [&](std::uint32_t, const PartView& part) {
      for (const SampleId sample : part.samples) ++count[sample];
    });
    for (SampleId s = 0; s < view.num_samples; ++s) {
      if (count[s] == 0) continue;
      if (count[s] > best_count[s] ||
          (count[s] == best_count[s] && TieBreak(s, node) < TieBreak(s, best_node[s]))) {
        best_count[s] = count[s];
        best_node[s] = node;
      }
    }
  }
  const std::uint64_t read = static_cast<std::uint64_t>(
      std::count_if(best_count.begin(), best_count.end(), [](std::uint32_t c) { return c > 0; }));
  SampleOwners owners(view.num_samples, nodes, HeldBudget(cache_samples, read, nodes));
  if (owners.budget() == 0) {
    for (std::uint64_t i = 0; i < read; ++i) owners.CountUnowned();
    return owners;
  }
  // Overflow goes to the least loaded node with room: a min-heap of
  // (owned, node), its entries refreshed lazily.
  using Load = std::pair<std::uint64_t, std::uint32_t>;
  std::priority_queue<Load, std::vector<Load>, std::greater<>> lightest;
  for (std::uint32_t n = 0; n < nodes; ++n) lightest.push({0, n});
  for (SampleId s = 0; s < view.num_samples; ++s) {
    if (best_count[s] == 0) continue;
    if (owners.OwnedBy(best_node[s]) < owners.budget()) {
      owners.Assign(s, best_node[s]);
      continue;
    }
    while (!lightest.empty() && lightest.top().first != owners.OwnedBy(lightest.top().second)) {
      const std::uint32_t n = lightest.top().second;
      lightest.pop();
      lightest.push({owners.OwnedBy(n), n});
    }
    if (lightest.empty() || lightest.top().first >= owners.budget()) {
      owners.CountUnowned();
      continue;
    }
    owners.Assign(s, lightest.top().second);
  }
  return owners;
}

}  // namespace prescient::scheduler::plan
