// Bit-exactness of the torch and NumPy generators against vectors recorded
// from torch 2.6 and NumPy 2.2 (see the research notes, sections 4 and 5).
#include <gtest/gtest.h>

#include <vector>

#include "scheduler/core/numpy_rng.h"
#include "scheduler/core/torch_rng.h"

namespace prescient::scheduler {
namespace {

std::vector<SampleId> TorchPerm(std::uint64_t seed, std::size_t n) {
  TorchGenerator g(seed);
  std::vector<SampleId> out(n);
  TorchRandperm(g, out);
  return out;
}

template <typename Gen>
std::vector<SampleId> NumpyPerm(Gen& gen, std::size_t n) {
  std::vector<SampleId> out(n);
  NumpyPermutation(gen, out);
  return out;
}

TEST(TorchRngTest, MersenneTwisterOutputs) {
  TorchGenerator g(0);
  const std::uint32_t expected[] = {2357136044u, 2546248239u, 3071714933u, 3626093760u,
                                    2588848963u};
  for (std::uint32_t e : expected) EXPECT_EQ(g.Random(), e);
}

TEST(TorchRngTest, Random64IsHighWordFirst) {
  // torch.empty((), dtype=torch.int64).random_(generator=manual_seed(0)).
  TorchGenerator g(0);
  EXPECT_EQ(g.Random64() % (1ULL << 63), 900450186894289455ULL);
  EXPECT_EQ(g.Random64() % (1ULL << 63), 3969543146641149120ULL);
}

TEST(TorchRngTest, RandpermSmall) {
  EXPECT_EQ(TorchPerm(0, 10), (std::vector<SampleId>{4, 1, 7, 5, 3, 9, 0, 8, 6, 2}));
}

TEST(TorchRngTest, OnlyLow32BitsOfTheSeedMatter) {
  EXPECT_EQ(TorchPerm(1, 10), TorchPerm(4294967297ULL, 10));
  EXPECT_NE(TorchPerm(1, 10), TorchPerm(2, 10));
  // A negative Python seed is its two's complement.
  EXPECT_EQ(TorchPerm(static_cast<std::uint64_t>(-1), 10), TorchPerm(0xffffffffULL, 10));
}

TEST(TorchRngTest, DrawCounts) {
  EXPECT_EQ(TorchRandpermDraws(10), 9u);
  EXPECT_EQ(TorchRandpermDraws(1), 0u);
  EXPECT_EQ(TorchRandpermDraws(kTorchRandpermLargeN - 1), kTorchRandpermLargeN - 2);
  EXPECT_EQ(TorchRandpermDraws(kTorchRandpermLargeN), 2 * kTorchRandpermLargeN);
}

TEST(NumpyRngTest, Pcg64RawOutputs) {
  Pcg64 g(0);
  EXPECT_EQ(g.Next64(), 11749869230777074271ULL);
  EXPECT_EQ(g.Next64(), 4976686463289251617ULL);
  EXPECT_EQ(g.Next64(), 755828109848996024ULL);
}

TEST(NumpyRngTest, Next32UsesLowHalfFirst) {
  Pcg64 a(0);
  Pcg64 b(0);
  const std::uint64_t word = a.Next64();
  EXPECT_EQ(b.Next32(), static_cast<std::uint32_t>(word));
  EXPECT_EQ(b.Next32(), static_cast<std::uint32_t>(word >> 32));
}

TEST(NumpyRngTest, DefaultRngPermutations) {
  Pcg64 g0(0), g1(1), g42(42), gbig(12345678901234ULL);
  EXPECT_EQ(NumpyPerm(g0, 10), (std::vector<SampleId>{4, 6, 2, 7, 3, 5, 9, 0, 8, 1}));
  EXPECT_EQ(NumpyPerm(g1, 10), (std::vector<SampleId>{8, 4, 7, 0, 1, 2, 5, 9, 6, 3}));
  EXPECT_EQ(NumpyPerm(g42, 10), (std::vector<SampleId>{5, 6, 0, 7, 3, 2, 4, 9, 1, 8}));
  EXPECT_EQ(NumpyPerm(gbig, 10), (std::vector<SampleId>{9, 1, 5, 0, 8, 3, 2, 7, 6, 4}));
}

TEST(NumpyRngTest, LargePermutation) {
  Pcg64 g(7);
  const std::vector<SampleId> p = NumpyPerm(g, 1000003);
  EXPECT_EQ(std::vector<SampleId>(p.begin(), p.begin() + 5),
            (std::vector<SampleId>{668784, 141716, 135854, 711164, 431478}));
  EXPECT_EQ(p.back(), 346763u);
}

TEST(NumpyRngTest, ConsecutivePermutationsCarryTheHalfWord) {
  Pcg64 g(3);
  EXPECT_EQ(NumpyPerm(g, 10), (std::vector<SampleId>{9, 6, 0, 2, 1, 4, 7, 5, 3, 8}));
  EXPECT_EQ(NumpyPerm(g, 10), (std::vector<SampleId>{7, 4, 3, 5, 0, 8, 9, 6, 1, 2}));
}

TEST(NumpyRngTest, SkipAdvancesLikeAPermutation) {
  Pcg64 a(3), b(3);
  NumpyPerm(a, 1001);
  NumpySkipPermutation(b, 1001);
  EXPECT_EQ(NumpyPerm(a, 50), NumpyPerm(b, 50));
}

TEST(NumpyRngTest, LegacyRandomState) {
  LegacyMt19937 g0(0), g42(42);
  EXPECT_EQ(NumpyPerm(g0, 10), (std::vector<SampleId>{2, 8, 4, 9, 1, 6, 7, 3, 0, 5}));
  EXPECT_EQ(NumpyPerm(g42, 10), (std::vector<SampleId>{8, 1, 5, 0, 7, 2, 9, 4, 3, 6}));
}

TEST(NumpyRngTest, RandomIntervalStaysInRange) {
  Pcg64 g(9);
  for (std::uint64_t max : {1ULL, 2ULL, 5ULL, 1000ULL, 0xffffffffULL, 0x1ffffffffULL}) {
    for (int i = 0; i < 200; ++i) EXPECT_LE(NumpyRandomInterval(g, max), max);
  }
  EXPECT_EQ(NumpyRandomInterval(g, 0), 0u);
}

}  // namespace
}  // namespace prescient::scheduler
