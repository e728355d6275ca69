#include "scheduler/plan/orders.h"

#include <cmath>
#include <numeric>
#include <span>

#include "scheduler/plan/plan_rng.h"

namespace prescient::scheduler::plan {
namespace {

// Pads `list` to `length` by repeating its first elements (DistributedSampler's
// rule), or cuts it (drop_last, or a list longer than needed).
void FitTo(std::vector<SampleId>& list, std::uint64_t length) {
  const std::size_t original = list.size();
  if (original >= length || original == 0) {
    list.resize(length, 0);
    return;
  }
  list.reserve(length);
  for (std::size_t i = 0; list.size() < length; i = (i + 1) % original) list.push_back(list[i]);
}

}  // namespace

void GlobalEpochSequence(std::uint64_t num_samples, const EpochShape& shape, std::uint64_t seed,
                         std::uint32_t random_epoch, std::vector<SampleId>& out) {
  out.resize(num_samples);
  std::iota(out.begin(), out.end(), SampleId{0});
  PlanRng rng = PlanRng::For(seed, random_epoch, StreamPurpose::kEpochPermutation);
  rng.Shuffle(std::span<SampleId>(out));
  FitTo(out, shape.length);
}

std::uint64_t PartitionBegin(std::uint64_t num_samples, std::uint32_t ranks, std::uint32_t rank) {
  return static_cast<std::uint64_t>(static_cast<Uint128>(num_samples) * rank / ranks);
}

RankOrderGenerator::RankOrderGenerator(Kind kind, double param, std::uint64_t num_samples,
                                       const EpochShape& shape, std::uint64_t seed)
    : kind_(kind), num_samples_(num_samples), shape_(shape), seed_(seed) {
  if (kind == Kind::kPartial) q_ = param;
  if (kind == Kind::kGroups) group_size_ = static_cast<std::uint64_t>(param);
  if (kind != Kind::kGroups) {
    partition_.resize(shape.ranks);
    for (std::uint32_t r = 0; r < shape.ranks; ++r) {
      const std::uint64_t begin = PartitionBegin(num_samples, shape.ranks, r);
      const std::uint64_t end = PartitionBegin(num_samples, shape.ranks, r + 1);
      partition_[r].resize(end - begin);
      std::iota(partition_[r].begin(), partition_[r].end(), static_cast<SampleId>(begin));
    }
  }
}

// Partial-local shuffling (Nguyen et al., IPDPS'22): every rank shuffles its
// samples and offers the last round(Q * size) of them; the offers are pooled,
// shuffled and dealt back so every rank receives as many as it gave (its count
// never changes). Q = 0 offers nothing and touches nothing, so the order is
// exactly `local`; Q = 1 pools everything, a uniform redistribution as a
// global shuffle gives.
void RankOrderGenerator::Exchange(std::uint32_t epoch) {
  PlanRng choose = PlanRng::For(seed_, epoch, StreamPurpose::kExchangeChoice);
  scratch_.clear();
  std::vector<std::uint64_t> offered(partition_.size());
  for (std::size_t r = 0; r < partition_.size(); ++r) {
    auto& mine = partition_[r];
    offered[r] = static_cast<std::uint64_t>(std::llround(q_ * static_cast<double>(mine.size())));
    if (offered[r] == 0) continue;
    choose.Shuffle(std::span<SampleId>(mine));
    scratch_.insert(scratch_.end(), mine.end() - static_cast<std::ptrdiff_t>(offered[r]),
                    mine.end());
    mine.resize(mine.size() - offered[r]);
  }
  if (scratch_.empty()) return;
  PlanRng deal = PlanRng::For(seed_, epoch, StreamPurpose::kExchangeShuffle);
  deal.Shuffle(std::span<SampleId>(scratch_));
  std::size_t at = 0;
  for (std::size_t r = 0; r < partition_.size(); ++r) {
    partition_[r].insert(partition_[r].end(), scratch_.begin() + static_cast<std::ptrdiff_t>(at),
                         scratch_.begin() + static_cast<std::ptrdiff_t>(at + offered[r]));
    at += offered[r];
  }
}

// The asynchronous-I/O strategy (Lee et al., section III-A): the dataset is cut
// into groups of B contiguous samples; the groups are shuffled every epoch and
// laid end to end, each group's samples shuffled inside it (the I/O buffer);
// rank r reads the r-th contiguous share, so it reads whole groups except at
// most one split group at each end of its share.
void RankOrderGenerator::FillGroups(std::uint32_t epoch, std::vector<std::vector<SampleId>*>& out) {
  const std::uint64_t groups = (num_samples_ + group_size_ - 1) / group_size_;
  std::vector<std::uint32_t> order(groups);
  std::iota(order.begin(), order.end(), 0u);
  PlanRng rng = PlanRng::For(seed_, epoch, StreamPurpose::kGroupShuffle);
  rng.Shuffle(std::span<std::uint32_t>(order));
  scratch_.clear();
  scratch_.reserve(num_samples_);
  for (const std::uint32_t g : order) {
    const std::uint64_t begin = g * group_size_;
    const std::uint64_t end = std::min(begin + group_size_, num_samples_);
    const std::size_t at = scratch_.size();
    for (std::uint64_t s = begin; s < end; ++s) scratch_.push_back(static_cast<SampleId>(s));
    rng.Shuffle(std::span<SampleId>(scratch_.data() + at, end - begin));
  }
  FitTo(scratch_, shape_.length);
  for (std::uint32_t r = 0; r < shape_.ranks; ++r) {
    const auto first = scratch_.begin() + static_cast<std::ptrdiff_t>(r * shape_.per_rank);
    out[r]->assign(first, first + static_cast<std::ptrdiff_t>(shape_.per_rank));
  }
}

void RankOrderGenerator::NextEpoch(std::uint32_t epoch, std::vector<std::vector<SampleId>*> out) {
  if (kind_ == Kind::kGroups) {
    FillGroups(epoch, out);
    return;
  }
  if (kind_ == Kind::kPartial) Exchange(epoch);
  PlanRng rng = PlanRng::For(seed_, epoch, StreamPurpose::kLocalShuffle);
  for (std::uint32_t r = 0; r < shape_.ranks; ++r) {
    std::vector<SampleId>& list = *out[r];
    list = partition_[r];
    rng.Shuffle(std::span<SampleId>(list));
    FitTo(list, shape_.per_rank);
  }
}

}  // namespace prescient::scheduler::plan
