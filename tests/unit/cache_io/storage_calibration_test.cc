#include "cache/io/storage_calibration.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace prescient::cache::io {
namespace {

TEST(GapThresholdTest, IsBandwidthTimesSeekClamped) {
  EXPECT_EQ(GapThreshold(150e-6, 1.5e9, 1000, 100'000'000), 225'000u);
  EXPECT_EQ(GapThreshold(1e-6, 1e9, 65536, 1 << 24), 65536u);     // clamped up
  EXPECT_EQ(GapThreshold(1.0, 1e10, 65536, 1 << 24), 1u << 24);   // clamped down
  EXPECT_EQ(GapThreshold(0.0 / 0.0, 1e9, 4096, 1 << 24), 4096u);  // NaN: lower bound
}

TEST(CalibrateStorageTest, MeasuresARealFileWithinBudget) {
  const char* dir = std::getenv("TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/prescient_calibrate_" +
                           std::to_string(::getpid());
  {
    std::ofstream out(path, std::ios::binary);
    const std::string block(1 << 20, 'x');
    for (int i = 0; i < 12; ++i) out << block;
  }
  CalibrationOptions options;
  options.min_gap_bytes = 4096;
  options.max_gap_bytes = 1 << 22;
  const StorageProfile profile = CalibrateStorage(path, options).value();
  EXPECT_GT(profile.bandwidth_bytes_per_second, 0.0);
  EXPECT_GE(profile.seek_seconds, 0.0);
  EXPECT_GE(profile.gap_threshold_bytes, 4096u);
  EXPECT_LE(profile.gap_threshold_bytes, 1u << 22);
  EXPECT_GE(profile.random_reads, 3u);
  EXPECT_LE(profile.bytes_read, (4u << 20) + 16u * 4096u);
  EXPECT_LT(profile.elapsed_seconds, 2.0);
  EXPECT_FALSE(profile.ToString().empty());
  const CoalescingOptions coalescing = CoalescingFromProfile(profile);
  EXPECT_EQ(coalescing.max_gap_bytes, profile.gap_threshold_bytes);
  EXPECT_EQ(coalescing.max_run_bytes, kDefaultLocalDiskCoalescing.max_run_bytes);
  std::remove(path.c_str());
}

TEST(CalibrateStorageTest, MissingOrTinyFileIsAnError) {
  EXPECT_EQ(CalibrateStorage("/nonexistent/prescient").status().code(), Status::Code::kIoError);
  const std::string path = "/proc/self/status";  // a few hundred bytes reported as size 0
  EXPECT_FALSE(CalibrateStorage(path).ok());
}

}  // namespace
}  // namespace prescient::cache::io
