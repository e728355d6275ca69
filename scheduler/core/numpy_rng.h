// NumPy's permutation(), reproduced bit for bit (NumPy 2.x).
//
// np.random.default_rng(seed) is PCG64 (XSL-RR 128/64) seeded through
// SeedSequence; the legacy RandomState(seed) is MT19937 with init_genrand,
// i.e. std::mt19937. Both shuffle with a backward Fisher-Yates whose bounded
// draws use masked rejection on 32-bit outputs. PCG64 hands out 32-bit draws
// from a buffered 64-bit word (low half first), and the buffer survives from
// one permutation to the next, so consecutive epochs must come from one
// generator object, in order.
#ifndef PRESCIENT_SCHEDULER_CORE_NUMPY_RNG_H_
#define PRESCIENT_SCHEDULER_CORE_NUMPY_RNG_H_

#include <array>
#include <cstdint>
#include <random>
#include <span>

#include "scheduler/core/access_schedule.h"

namespace prescient::scheduler {

// 128-bit arithmetic for PCG64 (GCC and Clang).
__extension__ typedef unsigned __int128 Uint128;

// SeedSequence(seed).generate_state(4, np.uint64) for a non-negative integer
// seed below 2^64 and no spawn key.
std::array<std::uint64_t, 4> SeedSequenceState(std::uint64_t seed);

// np.random.PCG64(seed).
class Pcg64 {
 public:
  explicit Pcg64(std::uint64_t seed);

  std::uint64_t Next64();
  std::uint32_t Next32();

 private:
  void Step();

  Uint128 state_ = 0;
  Uint128 increment_ = 0;
  bool has_half_ = false;
  std::uint32_t half_ = 0;
};

// np.random.RandomState(seed)'s bit generator (seed in [0, 2^32)).
class LegacyMt19937 {
 public:
  explicit LegacyMt19937(std::uint32_t seed) : engine_(seed) {}
  std::uint32_t Next32() { return static_cast<std::uint32_t>(engine_()); }
  std::uint64_t Next64() {
    const std::uint64_t hi = Next32();
    return (hi << 32) | Next32();
  }

 private:
  std::mt19937 engine_;
};

// random_interval(max): uniform in [0, max] by masked rejection.
template <typename BitGenerator>
std::uint64_t NumpyRandomInterval(BitGenerator& gen, std::uint64_t max) {
  if (max == 0) return 0;
  std::uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  std::uint64_t value;
  if (max <= 0xffffffffu) {
    while ((value = (gen.Next32() & mask)) > max) {
    }
  } else {
    while ((value = (gen.Next64() & mask)) > max) {
    }
  }
  return value;
}

// generator.permutation(out.size()) into `out`.
template <typename BitGenerator>
void NumpyPermutation(BitGenerator& gen, std::span<SampleId> out) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<SampleId>(i);
  for (std::size_t i = out.size(); i-- > 1;) {
    const std::uint64_t j = NumpyRandomInterval(gen, i);
    std::swap(out[i], out[j]);
  }
}

// Advances `gen` exactly as NumpyPermutation(n) would, without the array:
// the rejection loop's draw count depends only on the drawn values.
template <typename BitGenerator>
void NumpySkipPermutation(BitGenerator& gen, std::uint64_t n) {
  for (std::uint64_t i = n; i-- > 1;) NumpyRandomInterval(gen, i);
}

}  // namespace prescient::scheduler

#endif  // PRESCIENT_SCHEDULER_CORE_NUMPY_RNG_H_
