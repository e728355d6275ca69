#include "scheduler/plan/placement.h"

#include <algorithm>

namespace prescient::scheduler::plan {

StaticPlacement::StaticPlacement(std::uint64_t num_samples, std::uint32_t nodes)
    : num_samples_(num_samples),
      nodes_(nodes),
      bits_((num_samples * nodes + 63) / 64, 0),
      cached_(nodes),
      owner_(num_samples, kNoOwner),
      owner_frequency_(num_samples, 0),
      owner_first_step_(num_samples, kNever) {}

void StaticPlacement::Add(std::uint32_t node, SampleId sample, std::uint32_t frequency,
                          std::uint64_t first_step) {
  const std::uint64_t bit = static_cast<std::uint64_t>(node) * num_samples_ + sample;
  bits_[bit / 64] |= std::uint64_t{1} << (bit % 64);
  cached_[node].push_back(sample);
  if (owner_[sample] == kNoOwner || frequency > owner_frequency_[sample]) {
    owner_[sample] = node;
    owner_frequency_[sample] = frequency;
    owner_first_step_[sample] = first_step;
  }
}

StaticPlacement PlaceByFrequency(const ScheduleView& view, std::uint64_t capacity_per_node) {
  const WorldLayout& layout = view.layout;
  const std::uint32_t nodes = layout.nodes();
  StaticPlacement placement(view.num_samples, nodes);
  const std::vector<std::uint64_t> first_step = view.EpochFirstSteps();
  std::vector<std::uint32_t> count(view.num_samples);
  std::vector<std::uint64_t> first(view.num_samples);
  std::vector<SampleId> candidates;
  for (std::uint32_t node = 0; node < nodes; ++node) {
    std::fill(count.begin(), count.end(), 0);
    ForEachPartOfNode(view, node, [&](std::uint32_t e, const PartView& part) {
      for (std::size_t s = 0; s < part.steps(); ++s) {
        for (const SampleId sample : part.Step(s)) {
          if (count[sample]++ == 0) first[sample] = first_step[e] + s;
          // A rank read earlier in the same step may have set it later.
          first[sample] = std::min(first[sample], first_step[e] + s);
        }
      }
    });
    candidates.clear();
    for (SampleId s = 0; s < view.num_samples; ++s) {
      if (count[s] > 0) candidates.push_back(s);
    }
    const auto more_useful = [&](SampleId a, SampleId b) {
      if (count[a] != count[b]) return count[a] > count[b];
      if (first[a] != first[b]) return first[a] < first[b];
      return a < b;
    };
    const std::size_t keep = std::min<std::uint64_t>(capacity_per_node, candidates.size());
    std::nth_element(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(keep),
                     candidates.end(), more_useful);
    candidates.resize(keep);
    std::sort(candidates.begin(), candidates.end(), [&](SampleId a, SampleId b) {
      return first[a] != first[b] ? first[a] < first[b] : a < b;
    });
    for (const SampleId s : candidates) placement.Add(node, s, count[s], first[s]);
  }
  return placement;
}

}  // namespace prescient::scheduler::plan
