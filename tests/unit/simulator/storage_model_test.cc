#include "scheduler/simulate/storage_model.h"

#include <gtest/gtest.h>

namespace prescient::scheduler::simulate {
namespace {

TEST(StorageModel, LassenPresetMatchesNopfsSection61) {
  const StorageModel m = StorageModel::Lassen();
  EXPECT_DOUBLE_EQ(m.PfsPerClient(1), 330);
  EXPECT_DOUBLE_EQ(m.PfsPerClient(2), 365);
  EXPECT_DOUBLE_EQ(m.PfsPerClient(3), (730 + (1540 - 730) / 2.0) / 3);  // interpolated
  EXPECT_DOUBLE_EQ(m.PfsPerClient(8), 2870.0 / 8);
  EXPECT_DOUBLE_EQ(m.PfsPerClient(16), 2870.0 / 16);  // clamped at the last point
  EXPECT_DOUBLE_EQ(m.remote_mbps, 21250);             // min(24,000, 85,000 / 4)
  EXPECT_DOUBLE_EQ(m.local_mbps, 21250);
}

TEST(StorageModel, StepIsTheSlowerOfComputeAndFetch) {
  const StorageModel m = StorageModel::Lassen();
  // 64 MB of compute at 64 MB/s: 1 s; 33 MB from storage alone at 330 MB/s: 0.1 s.
  EXPECT_DOUBLE_EQ(m.RankSeconds(64e6, 33e6, 0, 31e6, 1), 1.0);
  // 660 MB from storage with one client: 2 s > 1 s of compute.
  EXPECT_DOUBLE_EQ(m.RankSeconds(64e6, 660e6, 0, 0, 1), 2.0);
  EXPECT_NEAR(m.RankSeconds(0, 0, 21.25e6, 21.25e6, 0), 2e-3, 1e-12);
  EXPECT_THROW(StorageModelByName("summit"), std::invalid_argument);
}

}  // namespace
}  // namespace prescient::scheduler::simulate
