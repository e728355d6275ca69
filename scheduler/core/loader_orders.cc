#include "scheduler/core/loader_orders.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace prescient::scheduler {

EpochOrderStream::EpochOrderStream(const LoaderSpec& spec, std::uint64_t num_samples)
    : spec_(spec), num_samples_(num_samples) {
  if (spec_.reseed_each_epoch) return;  // seeded per epoch in StartEpoch
  switch (spec_.source) {
    case LoaderSource::kTorchLoader:
      torch_.emplace(spec_.seed);
      break;
    case LoaderSource::kNumpy:
      pcg_.emplace(spec_.seed);
      break;
    case LoaderSource::kNumpyLegacy:
      legacy_.emplace(static_cast<std::uint32_t>(spec_.seed));
      break;
    default:
      break;
  }
}

// Sets up the generator for next_epoch_ where the source reseeds per epoch,
// and consumes what the loader draws before the permutation.
void EpochOrderStream::StartEpoch() {
  const std::uint64_t epoch_seed = spec_.seed + next_epoch_;
  switch (spec_.source) {
    case LoaderSource::kTorchDistributed:
      torch_.emplace(epoch_seed);  // DistributedSampler: manual_seed(seed + epoch)
      break;
    case LoaderSource::kTorchLoader:
      // Each DataLoader iterator draws a 64-bit base seed when created: every
      // epoch, or only once with persistent workers.
      if (!spec_.persistent_workers || next_epoch_ == 0) torch_->Discard(2);
      break;
    case LoaderSource::kNumpy:
      if (spec_.reseed_each_epoch) pcg_.emplace(epoch_seed);
      break;
    case LoaderSource::kNumpyLegacy:
      if (spec_.reseed_each_epoch) {
        if (epoch_seed > 0xffffffffULL) {
          throw std::invalid_argument("numpy-legacy: seed + epoch exceeds 2^32 - 1");
        }
        legacy_.emplace(static_cast<std::uint32_t>(epoch_seed));
      }
      break;
    case LoaderSource::kSequential:
      break;
  }
}

void EpochOrderStream::Next(std::span<SampleId> out) {
  if (out.size() != num_samples_) {
    throw std::invalid_argument("EpochOrderStream::Next: output size differs from num_samples");
  }
  StartEpoch();
  switch (spec_.source) {
    case LoaderSource::kTorchDistributed:
      if (spec_.shuffle) {
        TorchRandperm(*torch_, out);
      } else {
        std::iota(out.begin(), out.end(), SampleId{0});
      }
      break;
    case LoaderSource::kTorchLoader:
      TorchRandperm(*torch_, out);
      // RandomSampler runs one more randperm for its (empty) tail when the
      // consumer pulls past the last sample; its draws are lost.
      torch_->Discard(TorchRandpermDraws(num_samples_));
      break;
    case LoaderSource::kNumpy:
      NumpyPermutation(*pcg_, out);
      break;
    case LoaderSource::kNumpyLegacy:
      NumpyPermutation(*legacy_, out);
      break;
    case LoaderSource::kSequential:
      std::iota(out.begin(), out.end(), SampleId{0});
      break;
  }
  ++next_epoch_;
}

void EpochOrderStream::Skip() {
  StartEpoch();
  switch (spec_.source) {
    case LoaderSource::kTorchLoader:
      torch_->Discard(2 * TorchRandpermDraws(num_samples_));
      break;
    case LoaderSource::kNumpy:
      NumpySkipPermutation(*pcg_, num_samples_);
      break;
    case LoaderSource::kNumpyLegacy:
      NumpySkipPermutation(*legacy_, num_samples_);
      break;
    default:
      break;  // stateless across epochs
  }
  ++next_epoch_;
}

std::uint64_t SamplesPerRank(const LoaderSpec& spec, std::uint64_t num_samples,
                             const WorldLayout& layout) {
  const std::uint64_t r = layout.ranks;
  if (spec.drop_last && num_samples % r != 0) return (num_samples - r + r - 1) / r;
  return (num_samples + r - 1) / r;
}

std::uint64_t StepsPerEpoch(const LoaderSpec& spec, std::uint64_t num_samples,
                            const WorldLayout& layout) {
  const std::uint64_t per_rank = SamplesPerRank(spec, num_samples, layout);
  const std::uint64_t batch = layout.batch_size;
  return spec.drop_last_batch ? per_rank / batch : (per_rank + batch - 1) / batch;
}

RankEpoch SplitForRank(const LoaderSpec& spec, const WorldLayout& layout,
                       std::span<const SampleId> order, std::uint32_t rank) {
  const std::uint64_t n = order.size();
  const std::uint64_t per_rank = SamplesPerRank(spec, n, layout);
  const std::uint64_t batch = layout.batch_size;
  const std::uint64_t steps = StepsPerEpoch(spec, n, layout);
  const std::uint64_t kept = std::min(per_rank, steps * batch);

  RankEpoch part;
  part.samples.resize(kept);
  // Padding repeats the order cyclically, so position k of the padded list
  // is order[k % n].
  for (std::uint64_t j = 0; j < kept; ++j) {
    const std::uint64_t k = rank + j * layout.ranks;
    part.samples[j] = order[k < n ? k : k % n];
  }
  part.step_begin.resize(steps + 1);
  for (std::uint64_t s = 0; s <= steps; ++s) part.step_begin[s] = std::min(s * batch, kept);
  return part;
}

AccessSchedule GenerateLoaderSchedule(const LoaderSpec& spec, std::uint64_t num_samples,
                                      const WorldLayout& layout, std::uint32_t epochs,
                                      const std::function<void(double)>& progress) {
  ValidateLoaderSpec(spec, num_samples, layout, epochs);
  AccessSchedule schedule(num_samples, layout, epochs);
  EpochOrderStream stream(spec, num_samples);
  std::vector<SampleId> order(num_samples);
  for (std::uint32_t e = 0; e < epochs; ++e) {
    stream.Next(order);
    for (std::uint32_t r = 0; r < layout.ranks; ++r) {
      schedule.Part(r, e) = SplitForRank(spec, layout, order, r);
    }
    if (progress) progress(static_cast<double>(e + 1) / epochs);
  }
  return schedule;
}

RankEpoch GenerateLoaderRankEpoch(const LoaderSpec& spec, std::uint64_t num_samples,
                                  const WorldLayout& layout, std::uint32_t rank,
                                  std::uint32_t epoch) {
  ValidateLoaderSpec(spec, num_samples, layout, epoch + 1);
  if (rank >= layout.ranks) throw std::out_of_range("GenerateLoaderRankEpoch: rank out of range");
  EpochOrderStream stream(spec, num_samples);
  while (stream.next_epoch() < epoch) stream.Skip();
  std::vector<SampleId> order(num_samples);
  stream.Next(order);
  return SplitForRank(spec, layout, order, rank);
}

}  // namespace prescient::scheduler
