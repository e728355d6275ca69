#include "scheduler/core/numpy_rng.h"

#include <vector>

namespace prescient::scheduler {
namespace {

// SeedSequence constants (numpy/random/bit_generator.pyx).
constexpr std::uint32_t kInitA = 0x43b0d7e5;
constexpr std::uint32_t kMultA = 0x931e8875;
constexpr std::uint32_t kInitB = 0x8b51f9dd;
constexpr std::uint32_t kMultB = 0x58f38ded;
constexpr std::uint32_t kMixMultL = 0xca01f9dd;
constexpr std::uint32_t kMixMultR = 0x4973f715;
constexpr int kXShift = 16;
constexpr int kPoolSize = 4;

std::uint32_t HashMix(std::uint32_t value, std::uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

std::uint32_t Mix(std::uint32_t x, std::uint32_t y) {
  std::uint32_t result = kMixMultL * x - kMixMultR * y;
  result ^= result >> kXShift;
  return result;
}

constexpr Uint128 kPcgMultiplier =
    (static_cast<Uint128>(2549297995355413924ULL) << 64) | 4865540595714422341ULL;

}  // namespace

std::array<std::uint64_t, 4> SeedSequenceState(std::uint64_t seed) {
  // The entropy integer as 32-bit words, least significant first; 0 is [0].
  std::vector<std::uint32_t> entropy;
  do {
    entropy.push_back(static_cast<std::uint32_t>(seed));
    seed >>= 32;
  } while (seed != 0);

  std::uint32_t pool[kPoolSize];
  std::uint32_t hash_const = kInitA;
  for (int i = 0; i < kPoolSize; ++i) {
    pool[i] = HashMix(i < static_cast<int>(entropy.size()) ? entropy[i] : 0, hash_const);
  }
  for (int src = 0; src < kPoolSize; ++src) {
    for (int dst = 0; dst < kPoolSize; ++dst) {
      if (src != dst) pool[dst] = Mix(pool[dst], HashMix(pool[src], hash_const));
    }
  }
  for (std::size_t src = kPoolSize; src < entropy.size(); ++src) {
    for (int dst = 0; dst < kPoolSize; ++dst) {
      pool[dst] = Mix(pool[dst], HashMix(entropy[src], hash_const));
    }
  }

  std::uint32_t words[8];
  std::uint32_t out_const = kInitB;
  for (int i = 0; i < 8; ++i) {
    std::uint32_t value = pool[i % kPoolSize];
    value ^= out_const;
    out_const *= kMultB;
    value *= out_const;
    value ^= value >> kXShift;
    words[i] = value;
  }
  std::array<std::uint64_t, 4> state;
  for (int i = 0; i < 4; ++i) {
    state[i] = (static_cast<std::uint64_t>(words[2 * i + 1]) << 32) | words[2 * i];
  }
  return state;
}

Pcg64::Pcg64(std::uint64_t seed) {
  const std::array<std::uint64_t, 4> s = SeedSequenceState(seed);
  const Uint128 initstate = (static_cast<Uint128>(s[0]) << 64) | s[1];
  const Uint128 initseq = (static_cast<Uint128>(s[2]) << 64) | s[3];
  state_ = 0;
  increment_ = (initseq << 1) | 1;
  Step();
  state_ += initstate;
  Step();
}

void Pcg64::Step() { state_ = state_ * kPcgMultiplier + increment_; }

std::uint64_t Pcg64::Next64() {
  Step();
  const std::uint64_t hi = static_cast<std::uint64_t>(state_ >> 64);
  const std::uint64_t lo = static_cast<std::uint64_t>(state_);
  const unsigned rot = static_cast<unsigned>(state_ >> 122);
  const std::uint64_t x = hi ^ lo;
  return (x >> rot) | (x << ((64 - rot) & 63));
}

std::uint32_t Pcg64::Next32() {
  if (has_half_) {
    has_half_ = false;
    return half_;
  }
  const std::uint64_t next = Next64();
  has_half_ = true;
  half_ = static_cast<std::uint32_t>(next >> 32);
  return static_cast<std::uint32_t>(next);
}

}  // namespace prescient::scheduler
