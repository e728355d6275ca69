// The random stream behind every planned order: SplitMix64 (Steele, Lea and
// Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014).
//
// Planned orders are Prescient's own, so the generator only has to be fast,
// well mixed and fully specified here (the Python sampler never regenerates
// them; it reads the schedule file). Streams are keyed by (seed, epoch,
// purpose) through the SplitMix64 finaliser, so any epoch can be rebuilt
// without replaying the epochs before it.
#ifndef PRESCIENT_SCHEDULER_PLAN_PLAN_RNG_H_
#define PRESCIENT_SCHEDULER_PLAN_PLAN_RNG_H_

#include <cstdint>
#include <span>
#include <utility>

namespace prescient::scheduler::plan {

// What a stream is used for; part of the key so streams never overlap.
enum class StreamPurpose : std::uint64_t {
  kEpochPermutation = 1,
  kLocalShuffle = 2,
  kExchangeChoice = 3,
  kExchangeShuffle = 4,
  kGroupShuffle = 5,
  kEpochOrderSearch = 6,
};

// __extension__ keeps -Wpedantic quiet about the (GCC/Clang) 128-bit type.
__extension__ typedef unsigned __int128 Uint128;

class PlanRng {
 public:
  explicit PlanRng(std::uint64_t state) : state_(state) {}

  // The stream for (seed, epoch, purpose).
  static PlanRng For(std::uint64_t seed, std::uint64_t epoch, StreamPurpose purpose) {
    std::uint64_t key = Mix(seed ^ 0x5045524d55544531ULL);  // "PERMUTE1"
    key = Mix(key ^ (epoch + 0x9e3779b97f4a7c15ULL));
    key = Mix(key ^ static_cast<std::uint64_t>(purpose));
    return PlanRng(key);
  }

  std::uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return Mix(state_);
  }

  // Uniform in [0, bound), bound >= 1: Lemire's multiply-shift with rejection
  // (unbiased).
  std::uint64_t Below(std::uint64_t bound) {
    Uint128 m = static_cast<Uint128>(Next()) * bound;
    auto low = static_cast<std::uint64_t>(m);
    if (low < bound) {
      const std::uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<Uint128>(Next()) * bound;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

  // Uniform in [0, 1).
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Fisher-Yates, from the back: element i swaps with a uniform j <= i.
  template <typename T>
  void Shuffle(std::span<T> values) {
    for (std::size_t i = values.size(); i > 1; --i) {
      const std::size_t j = static_cast<std::size_t>(Below(i));
      std::swap(values[i - 1], values[j]);
    }
  }

 private:
  static std::uint64_t Mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  std::uint64_t state_;
};

}  // namespace prescient::scheduler::plan

#endif  // PRESCIENT_SCHEDULER_PLAN_PLAN_RNG_H_
