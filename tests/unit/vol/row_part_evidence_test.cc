#include "vol/serve/row_part_evidence.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace prescient::vol {
namespace {

std::vector<std::uint64_t> Rows(std::uint64_t first, std::uint64_t count) {
  std::vector<std::uint64_t> rows;
  for (std::uint64_t r = first; r < first + count; ++r) rows.push_back(r);
  return rows;
}

// 3-D patches of a 96-plane volume: 32 planes at a time, a ninth of each.
TEST(RowPartEvidence, OverlappingPatchesPayOnceTheyAskForTheirRowsWorth) {
  constexpr std::uint64_t kRowBytes = 9 * 1024;
  RowPartEvidence evidence(96, kRowBytes);
  int reads = 0;
  bool pays = false;
  for (std::uint64_t z = 0; !pays && reads < 1000; z = (z + 16) % 80, ++reads) {
    pays = evidence.NoteAndCheck(Rows(z, 32), kRowBytes / 9);
  }
  // 96 planes of 9 KiB asked for a KiB at a time, 32 per read: 27 reads.
  EXPECT_TRUE(pays);
  EXPECT_EQ(reads, 27);
  EXPECT_EQ(evidence.distinct_rows(), 96u);
  EXPECT_TRUE(evidence.NoteAndCheck(Rows(0, 32), kRowBytes / 9));
}

// `d[i, channels]`, each row once (an epoch of DLIO's reads): never.
TEST(RowPartEvidence, TheSamePartOfEveryRowReadOnceNeverPays) {
  RowPartEvidence evidence(10'000, 4096);
  for (std::uint64_t row = 0; row < 10'000; ++row) {
    ASSERT_FALSE(evidence.NoteAndCheck(Rows(row, 1), 1024)) << row;
  }
  EXPECT_EQ(evidence.bytes_asked(), 10'000u * 1024);
}

// The same rows asked for again (a second epoch in one process) do pay:
// whole rows would then have read no more than the parts did.
TEST(RowPartEvidence, PartsOfTheSameRowsAskedForAgainPay) {
  RowPartEvidence evidence(100, 4096);
  for (int pass = 0; pass < 3; ++pass) {
    for (std::uint64_t row = 0; row < 100; ++row) {
      EXPECT_FALSE(evidence.NoteAndCheck(Rows(row, 1), 1024));
    }
  }
  EXPECT_TRUE(evidence.NoteAndCheck(Rows(0, 100), 1024));  // the fourth quarter
}

TEST(RowPartEvidence, RowsPastTheEndAndUntrackableDatasetsAreNotCounted) {
  RowPartEvidence evidence(4, 100);
  EXPECT_FALSE(evidence.NoteAndCheck(Rows(4, 1000), 100));
  EXPECT_EQ(evidence.distinct_rows(), 0u);
  EXPECT_TRUE(evidence.NoteAndCheck(Rows(0, 1), 100));
  RowPartEvidence huge(RowPartEvidence::kMaxRows + 1, 100);
  EXPECT_FALSE(huge.NoteAndCheck(Rows(0, 10), 1000));
  RowPartEvidence empty(0, 100);
  EXPECT_FALSE(empty.NoteAndCheck(Rows(0, 1), 100));
}

}  // namespace
}  // namespace prescient::vol
