#include "scheduler/core/next_use_index.h"

#include <algorithm>
#include <bit>
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

// Calls visit(sample, global_step, local_rank) for every read on the node in
// increasing (global step, local rank) order, skipping repeats of a sample by
// one rank within one step.
template <typename Visit>
void ForEachNodeUse(const WorldLayout& layout, std::span<const std::uint64_t> epoch_first_step,
                    std::uint32_t node, const NextUseIndex::PartSource& parts,
                    std::vector<std::uint32_t>& last_step, std::vector<std::uint16_t>& last_rank,
                    Visit visit, const std::function<void(double)>& progress, double progress_base,
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
      for (std::size_t k = 0; k < views.size(); ++k) {
        const RankEpochView& view = views[k];
        if (s >= view.steps()) {
          throw std::invalid_argument("NextUseIndex: a rank has fewer steps than its epoch");
        }
        for (SampleId sample : view.Step(s)) {
          if (sample >= last_step.size()) {
            throw std::invalid_argument("NextUseIndex: sample id out of range");
          }
          if (last_step[sample] == global && last_rank[sample] == k) continue;
          last_step[sample] = global;
          last_rank[sample] = static_cast<std::uint16_t>(k);
          visit(sample, global, static_cast<std::uint32_t>(k));
        }
      }
    }
    if (progress) progress(progress_base + progress_share * (e + 1) / epochs);
  }
}

}  // namespace

unsigned NextUseIndex::RankBitsFor(std::uint32_t node_ranks) {
  return node_ranks <= 1 ? 0 : static_cast<unsigned>(std::bit_width(node_ranks - 1));
}

bool NextUseIndex::NeedsWideKeys(std::uint64_t total_steps, unsigned rank_bits) {
  return total_steps > (std::uint64_t{1} << (32 - rank_bits));
}

struct NextUseIndex::Built {
  std::uint32_t node = 0;
  std::uint32_t first_rank = 0;
  std::uint32_t node_ranks = 0;
  std::uint64_t num_samples = 0;
  HugeArray<std::uint64_t> row_begin;
  unsigned rank_bits = 0;
  bool wide_keys = false;
  HugeArray<std::uint32_t> keys32;
  HugeArray<std::uint64_t> keys64;
  std::uint64_t StepAt(std::uint64_t i) const {
    return (wide_keys ? keys64[i] : keys32[i]) >> rank_bits;
  }
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
  rank_bits_ = built->rank_bits;
  wide_keys_ = built->wide_keys;
  keys32_ = built->keys32.span();
  keys64_ = built->keys64.span();
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
  if (const NodeRanks r = RanksOf(layout, node); r.end - r.first > 65536) {
    throw std::length_error("NextUseIndex: more than 65,536 ranks on a node");
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
  std::vector<std::uint16_t> last_rank(num_samples);

  // Pass 1: count uses per sample into row_begin[s + 1].
  b->row_begin = HugeArray<std::uint64_t>(num_samples + 1);
  ForEachNodeUse(
      layout, epoch_first_step, node, parts, last_step, last_rank,
      [&](SampleId s, std::uint32_t, std::uint32_t) { ++b->row_begin[s + 1]; }, progress, 0.0,
      share);
  for (std::uint64_t s = 0; s < num_samples; ++s) b->row_begin[s + 1] += b->row_begin[s];

  // Pass 2: fill; uses arrive in (step, rank) order, so every row is sorted.
  const std::uint64_t uses = b->row_begin[num_samples];
  b->rank_bits = RankBitsFor(b->node_ranks);
  b->wide_keys = options.wide_keys || NeedsWideKeys(epoch_first_step.back(), b->rank_bits);
  if (b->wide_keys) {
    b->keys64 = HugeArray<std::uint64_t>(uses);
  } else {
    b->keys32 = HugeArray<std::uint32_t>(uses);
  }
  std::vector<std::uint64_t> cursor(b->row_begin.data(), b->row_begin.data() + num_samples);
  ForEachNodeUse(
      layout, epoch_first_step, node, parts, last_step, last_rank,
      [&](SampleId s, std::uint32_t g, std::uint32_t k) {
        const std::uint64_t at = cursor[s]++;
        const std::uint64_t key = std::uint64_t{g} << b->rank_bits | k;
        if (b->wide_keys) {
          b->keys64[at] = key;
        } else {
          b->keys32[at] = static_cast<std::uint32_t>(key);
        }
      },
      progress, share, share);
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
          while (c < row_end && b.StepAt(c) < global) ++c;
          if (c == row_end || b.StepAt(c) != global) {  // the parts changed between passes
            throw std::logic_error("NextUseIndex: the schedule changed while building");
          }
          cursor[sample] = c;
          std::uint64_t next = c + 1;  // past the other local ranks' uses of this step
          while (next < row_end && b.StepAt(next) == global) ++next;
          b.read_next[out++] =
              next < row_end ? static_cast<std::uint32_t>(b.StepAt(next)) : kNoStep;
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

std::vector<NodeUse> NextUseIndex::Uses(SampleId sample) const {
  std::vector<NodeUse> out;
  if (sample >= num_samples_) return out;
  const std::uint64_t mask = (std::uint64_t{1} << rank_bits_) - 1;
  for (std::uint64_t i = row_begin_[sample]; i < row_begin_[sample + 1]; ++i) {
    const std::uint64_t key = wide_keys_ ? keys64_[i] : keys32_[i];
    out.push_back({key >> rank_bits_, static_cast<std::uint32_t>(key & mask)});
  }
  return out;
}

// The step of the first use of `sample` at a step >= `step`, or kNever.
template <typename Key>
std::uint64_t NextUseIndex::FirstStepFrom(std::span<const Key> keys, SampleId sample,
                                          std::uint64_t step) const {
  if (sample >= num_samples_ || step >= kNoStep) return kNever;
  const std::uint64_t target = step << rank_bits_;
  if (target > std::numeric_limits<Key>::max()) return kNever;
  const Key* end = keys.data() + row_begin_[sample + 1];
  const Key* it = std::lower_bound(keys.data() + row_begin_[sample], end, static_cast<Key>(target));
  return it == end ? kNever : std::uint64_t{*it} >> rank_bits_;
}

std::uint64_t NextUseIndex::NextUseAfter(SampleId sample, std::uint64_t global_step) const {
  if (global_step >= kNoStep) return kNever;
  return wide_keys_ ? FirstStepFrom(keys64_, sample, global_step + 1)
                    : FirstStepFrom(keys32_, sample, global_step + 1);
}

std::uint64_t NextUseIndex::NextUseAtOrAfter(SampleId sample, std::uint64_t global_step) const {
  return wide_keys_ ? FirstStepFrom(keys64_, sample, global_step)
                    : FirstStepFrom(keys32_, sample, global_step);
}

template <typename Key>
NodeUse NextUseIndex::Scan(std::span<const Key> keys, SampleId sample,
                           std::span<const std::uint64_t> progress, std::uint32_t raised_rank,
                           std::uint64_t raised_to) const {
  if (sample >= num_samples_ || progress.size() != node_ranks_) return {};
  // Uses before the slowest rank's step are done for every rank.
  std::uint64_t slowest = kNever;
  for (std::uint32_t k = 0; k < node_ranks_; ++k) {
    slowest = std::min(slowest, k == raised_rank ? std::max(progress[k], raised_to) : progress[k]);
  }
  if (slowest >= kNoStep) return {};
  const std::uint64_t target = slowest << rank_bits_;
  if (target > std::numeric_limits<Key>::max()) return {};
  const Key* end = keys.data() + row_begin_[sample + 1];
  const std::uint64_t mask = (std::uint64_t{1} << rank_bits_) - 1;
  for (const Key* it =
           std::lower_bound(keys.data() + row_begin_[sample], end, static_cast<Key>(target));
       it != end; ++it) {
    const auto k = static_cast<std::uint32_t>(*it & mask);
    const std::uint64_t step = std::uint64_t{*it} >> rank_bits_;
    const std::uint64_t done = k == raised_rank ? std::max(progress[k], raised_to) : progress[k];
    if (step >= done) return {step, k};
  }
  return {};
}

NodeUse NextUseIndex::NextUse(SampleId sample, std::span<const std::uint64_t> progress) const {
  const std::uint32_t none = node_ranks_;  // no rank raised
  return wide_keys_ ? Scan(keys64_, sample, progress, none, 0)
                    : Scan(keys32_, sample, progress, none, 0);
}

NodeUse NextUseIndex::NextUseAfterRead(SampleId sample, std::uint32_t local_rank,
                                       std::uint64_t read_step,
                                       std::span<const std::uint64_t> progress) const {
  if (local_rank >= node_ranks_) return {};
  const std::uint64_t after = read_step == kNever ? kNever : read_step + 1;
  return wide_keys_ ? Scan(keys64_, sample, progress, local_rank, after)
                    : Scan(keys32_, sample, progress, local_rank, after);
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
