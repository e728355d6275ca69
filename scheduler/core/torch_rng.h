// PyTorch's CPU random numbers, reproduced bit for bit (torch 2.x).
//
// torch.Generator on the CPU is a 32-bit Mersenne Twister seeded with the low
// 32 bits of the seed (init_genrand), i.e. std::mt19937, whose output
// sequence the C++ standard fixes. random64() is two outputs, high word first.
// torch.randperm has two algorithms chosen by n (see TorchRandperm).
#ifndef PRESCIENT_SCHEDULER_CORE_TORCH_RNG_H_
#define PRESCIENT_SCHEDULER_CORE_TORCH_RNG_H_

#include <cstdint>
#include <random>
#include <span>

#include "scheduler/core/access_schedule.h"

namespace prescient::scheduler {

class TorchGenerator {
 public:
  // torch.Generator().manual_seed(seed); a negative Python seed is its 64-bit
  // two's complement, and only the low 32 bits matter.
  explicit TorchGenerator(std::uint64_t seed) : engine_(static_cast<std::uint32_t>(seed)) {}

  std::uint32_t Random() { return static_cast<std::uint32_t>(engine_()); }
  std::uint64_t Random64() {
    const std::uint64_t hi = Random();
    return (hi << 32) | Random();
  }
  void Discard(std::uint64_t outputs) { engine_.discard(outputs); }

 private:
  std::mt19937 engine_;
};

// randperm switches algorithm at n = UINT32_MAX / 20.
inline constexpr std::uint64_t kTorchRandpermLargeN = 214748364;

// torch.randperm(out.size(), generator=g): below kTorchRandpermLargeN a
// forward Fisher-Yates with `random() % (n - i)`; from it on an inside-out
// shuffle with `random64() % (i + 1)`.
void TorchRandperm(TorchGenerator& generator, std::span<SampleId> out);

// 32-bit outputs one torch.randperm(n) consumes (n - 1, or 2n when large).
std::uint64_t TorchRandpermDraws(std::uint64_t n);

}  // namespace prescient::scheduler

#endif  // PRESCIENT_SCHEDULER_CORE_TORCH_RNG_H_
