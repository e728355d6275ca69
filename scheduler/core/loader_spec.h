// Which unmodified loader a clairvoyant schedule reproduces, as a value type
// with a canonical text form (stored as the schedule file's parameters).
#ifndef PRESCIENT_SCHEDULER_CORE_LOADER_SPEC_H_
#define PRESCIENT_SCHEDULER_CORE_LOADER_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "scheduler/core/access_schedule.h"

namespace prescient::scheduler {

enum class LoaderSource {
  // DistributedSampler(n, R, rank, shuffle, seed, drop_last) + set_epoch(e),
  // batched by DataLoader(batch_size, drop_last=drop_last_batch).
  kTorchDistributed,
  // DataLoader(shuffle=True, generator=Generator().manual_seed(seed),
  // batch_size, drop_last=drop_last_batch, persistent_workers) on one rank.
  kTorchLoader,
  // One np.random.default_rng(seed), permutation(n) once per epoch (or a
  // fresh default_rng(seed + epoch) per epoch with reseed_each_epoch), split
  // across ranks like DistributedSampler.
  kNumpy,
  // The same with np.random.RandomState(seed) / np.random.seed(seed).
  kNumpyLegacy,
  // 0..n-1 every epoch, split like DistributedSampler(shuffle=False).
  kSequential,
};

struct LoaderSpec {
  LoaderSource source = LoaderSource::kTorchDistributed;
  std::uint64_t seed = 0;           // negative torch seeds: their two's complement
  bool shuffle = true;              // torch-distributed only
  bool drop_last = false;           // sampler-level (DistributedSampler); not torch-loader
  bool drop_last_batch = false;     // DataLoader / BatchSampler drop_last
  bool persistent_workers = false;  // torch sources; changes torch-loader orders only
  bool reseed_each_epoch = false;   // numpy sources only

  bool operator==(const LoaderSpec&) const = default;
};

std::string_view LoaderSourceName(LoaderSource source);
std::optional<LoaderSource> ParseLoaderSource(std::string_view name);

// "seed=7,shuffle=1,drop_last=0,drop_last_batch=0,persistent_workers=0,reseed_each_epoch=0"
// (every key, fixed order).
std::string CanonicalLoaderParameters(const LoaderSpec& spec);

// Inverse of LoaderSourceName + CanonicalLoaderParameters; keys may come in
// any order and be omitted (defaults above). Throws std::invalid_argument.
LoaderSpec ParseLoaderSpec(std::string_view source, std::string_view parameters);

// Throws std::invalid_argument when the spec cannot describe a real loader
// with this shape (e.g. torch-loader on several ranks, a legacy seed >= 2^32,
// or one that seed + epoch pushes past 2^32 - 1 within `epochs`).
void ValidateLoaderSpec(const LoaderSpec& spec, std::uint64_t num_samples,
                        const WorldLayout& layout, std::uint32_t epochs = 1);

}  // namespace prescient::scheduler

#endif  // PRESCIENT_SCHEDULER_CORE_LOADER_SPEC_H_
