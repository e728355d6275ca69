#include "scheduler/core/torch_rng.h"

#include <utility>

namespace prescient::scheduler {

void TorchRandperm(TorchGenerator& generator, std::span<SampleId> out) {
  const std::uint64_t n = out.size();
  if (n < kTorchRandpermLargeN) {
    for (std::uint64_t i = 0; i < n; ++i) out[i] = static_cast<SampleId>(i);
    for (std::uint64_t i = 0; i + 1 < n; ++i) {
      const std::uint64_t z = generator.Random() % (n - i);
      std::swap(out[i], out[i + z]);
    }
    return;
  }
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t z = generator.Random64() % (i + 1);
    out[i] = out[z];
    out[z] = static_cast<SampleId>(i);
  }
}

std::uint64_t TorchRandpermDraws(std::uint64_t n) {
  if (n < kTorchRandpermLargeN) return n == 0 ? 0 : n - 1;
  return 2 * n;
}

}  // namespace prescient::scheduler
