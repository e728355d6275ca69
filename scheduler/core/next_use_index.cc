#include "scheduler/core/next_use_index.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "scheduler/core/huge_array.h"

namespace prescient::scheduler {
namespace {

constexpr std::uint32_t kNoStep = std::numeric_limits<std::uint32_t>::max();

struct NodeRanks {
  std::uint32_t first;
  std::uint32_t end;
};

NodeRanks RanksOf(const WorldLayout& layout, std::uint32_t node) {
  const std::uint32_t first = node * layout.ranks_per_node;
  return {first, std::min(layout.ranks, first + layout.ranks_per_node)};
}

// Calls visit(sample, global_step) for every read on the node in increasing
// global-step order, skipping repeats of a sample within one step.
template <typename Visit>
void ForEachNodeUse(const WorldLayout& layout, std::span<const std::uint64_t> epoch_first_step,
                    std::uint32_t node, const NextUseIndex::PartSource& parts,
                    std::vector<std::uint32_t>& last_step, Visit visit,
                    const std::function<void(double)>& progress, double progress_base,
                    double progress_share) {
  const NodeRanks ranks = RanksOf(layout, node);
  const auto epochs = static_cast<std::uint32_t>(epoch_first_step.size() - 1);
  std::fill(last_step.begin(), last_step.end(), kNoStep);
  std::vector<RankEpochView> views(ranks.end - ranks.first);
  for (std::uint32_t e = 0; e < epochs; ++e) {
    for (std::uint32_t r = ranks.first; r < ranks.end; ++r) views[r - ranks.first] = parts(r, e);
    const std::uint64_t steps = epoch_first_step[e + 1] - epoch_first_step[e];
    for (std::uint64_t s = 0; s < steps; ++s) {
      const auto global = static_cast<std::uint32_t>(epoch_first_step[e] + s);
      for (const RankEpochView& view : views) {
        if (s >= view.steps()) {
          throw std::invalid_argument("NextUseIndex: a rank has fewer steps than its epoch");
        }
        for (SampleId sample : view.Step(s)) {
          if (sample >= last_step.size()) {
            throw std::invalid_argument("NextUseIndex: sample id out of range");
          }
          if (last_step[sample] == global) continue;
          last_step[sample] = global;
          visit(sample, global);
        }
      }
    }
    if (progress) progress(progress_base + progress_share * (e + 1) / epochs);
  }
}

}  // namespace

struct NextUseIndex::Built {
  std::uint32_t node = 0;
  std::uint32_t first_rank = 0;
  std::uint32_t node_ranks = 0;
  std::uint64_t num_samples = 0;
  HugeArray<std::uint64_t> row_begin;
  HugeArray<std::uint32_t> steps;
  std::vector<std::uint64_t> epoch_first_step;
  std::vector<std::uint64_t> read_begin;
  HugeArray<std::uint32_t> read_next;
};

void NextUseIndex::Adopt(std::shared_ptr<const Built> built) {
  node_ = built->node;
  first_rank_ = built->first_rank;
  node_ranks_ = built->node_ranks;
  num_samples_ = built->num_samples;
  row_begin_ = built->row_begin.span();
  steps_ = built->steps.span();
  epoch_first_step_ = built->epoch_first_step;
  read_begin_ = built->read_begin;
  read_next_ = built->read_next.span();
  storage_ = std::move(built);
}

NextUseIndex NextUseIndex::BuildFromParts(std::uint64_t num_samples, const WorldLayout& layout,
                                          std::span<const std::uint64_t> epoch_first_step,
                                          std::uint32_t node, const PartSource& parts,
                                          const std::function<void(double)>& progress,
                                          const NextUseIndexOptions& options) {
  if (node >= layout.nodes()) {
    throw std::out_of_range("NextUseIndex: node " + std::to_string(node) +
                            " >= " + std::to_string(layout.nodes()) + " nodes");
  }
  if (epoch_first_step.empty() || epoch_first_step.back() >= kNoStep) {
    throw std::length_error("NextUseIndex: 2^32 - 1 or more global steps");
  }
  const double share = options.read_table ? 1.0 / 3 : 0.5;
  auto b = std::make_shared<Built>();
  b->node = node;
  b->num_samples = num_samples;
  const NodeRanks ranks = RanksOf(layout, node);
  b->first_rank = ranks.first;
  b->node_ranks = ranks.end - ranks.first;
  b->epoch_first_step.assign(epoch_first_step.begin(), epoch_first_step.end());
  std::vector<std::uint32_t> last_step(num_samples);

  // Pass 1: count uses per sample into row_begin[s + 1].
  b->row_begin = HugeArray<std::uint64_t>(num_samples + 1);
  ForEachNodeUse(
      layout, epoch_first_step, node, parts, last_step,
      [&](SampleId s, std::uint32_t) { ++b->row_begin[s + 1]; }, progress, 0.0, share);
  for (std::uint64_t s = 0; s < num_samples; ++s) b->row_begin[s + 1] += b->row_begin[s];

  // Pass 2: fill; steps arrive in increasing order, so every row is sorted.
  b->steps = HugeArray<std::uint32_t>(b->row_begin[num_samples]);
  std::vector<std::uint64_t> cursor(b->row_begin.data(), b->row_begin.data() + num_samples);
  ForEachNodeUse(
      layout, epoch_first_step, node, parts, last_step,
      [&](SampleId s, std::uint32_t g) { b->steps[cursor[s]++] = g; }, progress, share, share);
  if (options.read_table) BuildReadTable(*b, parts, progress);
  NextUseIndex index;
  index.Adopt(std::move(b));
  return index;
}

// Pass 3: walk every read again; a per-sample cursor into its (sorted) uses
// sits at the current step, so the next use is the following entry. Repeats
// within a step share the cursor and so the answer.
void NextUseIndex::BuildReadTable(Built& b, const PartSource& parts,
                                  const std::function<void(double)>& progress) {
  const auto epochs = static_cast<std::uint32_t>(b.epoch_first_step.size() - 1);
  std::vector<RankEpochView> views(b.node_ranks);
  // Sizes first (cheap for lists; recipe parts are regenerated below anyway).
  b.read_begin.assign(static_cast<std::size_t>(epochs) * b.node_ranks + 1, 0);
  for (std::uint32_t e = 0; e < epochs; ++e) {
    for (std::uint32_t k = 0; k < b.node_ranks; ++k) {
      const std::size_t slot = static_cast<std::size_t>(e) * b.node_ranks + k;
      b.read_begin[slot + 1] = b.read_begin[slot] + parts(b.first_rank + k, e).size();
    }
  }
  b.read_next = HugeArray<std::uint32_t>(b.read_begin.back());
  std::vector<std::uint64_t> cursor(b.row_begin.data(), b.row_begin.data() + b.num_samples);
  for (std::uint32_t e = 0; e < epochs; ++e) {
    for (std::uint32_t k = 0; k < b.node_ranks; ++k) views[k] = parts(b.first_rank + k, e);
    const std::uint64_t steps = b.epoch_first_step[e + 1] - b.epoch_first_step[e];
    for (std::uint64_t s = 0; s < steps; ++s) {
      const auto global = static_cast<std::uint32_t>(b.epoch_first_step[e] + s);
      for (std::uint32_t k = 0; k < b.node_ranks; ++k) {
        const RankEpochView& view = views[k];
        std::uint64_t out =
            b.read_begin[static_cast<std::size_t>(e) * b.node_ranks + k] + view.step_begin()[s];
        for (SampleId sample : view.Step(s)) {
          std::uint64_t c = cursor[sample];
          const std::uint64_t row_end = b.row_begin[sample + 1];
          while (c < row_end && b.steps[c] < global) ++c;
          if (c == row_end || b.steps[c] != global) {  // the parts changed between passes
            throw std::logic_error("NextUseIndex: the schedule changed while building");
          }
          cursor[sample] = c;
          const std::uint64_t next = c + 1;
          b.read_next[out++] = next < row_end ? b.steps[next] : kNoStep;
        }
      }
    }
    if (progress) progress(2.0 / 3 + (e + 1) / (3.0 * epochs));
  }
}

NextUseIndex NextUseIndex::Build(const AccessSchedule& schedule, std::uint32_t node,
                                 const NextUseIndexOptions& options) {
  std::vector<std::uint64_t> first(schedule.epochs() + 1, 0);
  for (std::uint32_t e = 0; e < schedule.epochs(); ++e) {
    first[e + 1] = first[e] + (schedule.layout().ranks == 0 ? 0 : schedule.Part(0, e).steps());
  }
  return BuildFromParts(
      schedule.num_samples(), schedule.layout(), first, node,
      [&](std::uint32_t r, std::uint32_t e) {
        const RankEpoch& part = schedule.Part(r, e);
        return RankEpochView(part.samples, part.step_begin, nullptr);
      },
      {}, options);
}

NextUseIndex NextUseIndex::Build(const ScheduleReader& reader, std::uint32_t node,
                                 const std::function<void(double)>& progress,
                                 const NextUseIndexOptions& options) {
  const ScheduleHeader& h = reader.header();
  std::vector<std::uint64_t> first(h.epochs + 1);
  for (std::uint32_t e = 0; e <= h.epochs; ++e) first[e] = reader.EpochFirstStep(e);
  NextUseIndex index = BuildFromParts(
      h.num_samples, h.layout, first, node,
      [&](std::uint32_t r, std::uint32_t e) { return reader.Part(r, e); }, progress, options);
  index.schedule_checksum_ = reader.checksum();
  return index;
}

std::span<const std::uint32_t> NextUseIndex::Uses(SampleId sample) const {
  if (sample >= num_samples_) return {};
  return steps_.subspan(row_begin_[sample], row_begin_[sample + 1] - row_begin_[sample]);
}

std::uint64_t NextUseIndex::NextUseAfter(SampleId sample, std::uint64_t global_step) const {
  if (global_step >= kNoStep) return kNever;
  const std::span<const std::uint32_t> uses = Uses(sample);
  const auto it =
      std::upper_bound(uses.begin(), uses.end(), static_cast<std::uint32_t>(global_step));
  return it == uses.end() ? kNever : *it;
}

std::uint64_t NextUseIndex::NextUseAtOrAfter(SampleId sample, std::uint64_t global_step) const {
  if (global_step >= kNoStep) return kNever;
  const std::span<const std::uint32_t> uses = Uses(sample);
  const auto it =
      std::lower_bound(uses.begin(), uses.end(), static_cast<std::uint32_t>(global_step));
  return it == uses.end() ? kNever : *it;
}

std::uint64_t NextUseIndex::NextUseOfRead(std::uint32_t rank, std::uint32_t epoch,
                                          std::uint64_t position) const {
  if (read_begin_.empty()) {
    throw std::logic_error("NextUseIndex: built without the read table (options.read_table)");
  }
  const std::uint32_t k = rank - first_rank_;
  if (rank < first_rank_ || k >= node_ranks_ || epoch + 1 >= epoch_first_step_.size()) {
    throw std::out_of_range("NextUseIndex::NextUseOfRead: rank " + std::to_string(rank) +
                            " epoch " + std::to_string(epoch) + " is not on node " +
                            std::to_string(node_));
  }
  const std::size_t slot = static_cast<std::size_t>(epoch) * node_ranks_ + k;
  const std::uint64_t at = read_begin_[slot] + position;
  if (at >= read_begin_[slot + 1]) {
    throw std::out_of_range("NextUseIndex::NextUseOfRead: position past the rank's epoch");
  }
  const std::uint32_t next = read_next_[at];
  return next == kNoStep ? kNever : next;
}

}  // namespace prescient::scheduler
