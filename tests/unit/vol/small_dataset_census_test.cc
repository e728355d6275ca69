#include "vol/serve/small_dataset_census.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace prescient::vol {
namespace {

using Key = SmallDatasetCensus::FileKey;
constexpr std::size_t kMany = SmallDatasetCensus::kManyPerFile;

TEST(SmallDatasetCensus, AFileIsManyOnlyPastItsDistinctDatasets) {
  SmallDatasetCensus census;
  const Key file{1, 2, 3, 4};
  for (std::uint64_t i = 0; i < kMany; ++i) {
    EXPECT_FALSE(census.NoteAndCheckMany(file, 1000 + 64 * i)) << i;
  }
  // Reopening the same datasets (h5py opens `f["labels"]` at every fetch) adds none.
  for (int pass = 0; pass < 3; ++pass) {
    for (std::uint64_t i = 0; i < kMany; ++i)
      EXPECT_FALSE(census.NoteAndCheckMany(file, 1000 + 64 * i));
  }
  EXPECT_TRUE(census.NoteAndCheckMany(file, 999'999));
  // From then on every small dataset of the file, the first ones too.
  EXPECT_TRUE(census.NoteAndCheckMany(file, 1000));
}

TEST(SmallDatasetCensus, FilesAreTalliedApartAndARewrittenFileAnew) {
  SmallDatasetCensus census;
  const Key first{1, 2, 3, 4};
  for (std::uint64_t i = 0; i <= kMany; ++i) census.NoteAndCheckMany(first, i);
  EXPECT_TRUE(census.NoteAndCheckMany(first, 0));
  EXPECT_FALSE(census.NoteAndCheckMany(Key{1, 3, 3, 4}, 0));  // another inode
  EXPECT_FALSE(census.NoteAndCheckMany(Key{1, 2, 3, 5}, 0));  // the file rewritten
}

TEST(SmallDatasetCensus, FilesOfFewDatasetsAreForgottenButManyKept) {
  SmallDatasetCensus census;
  const Key many{9, 9, 9, 9};
  for (std::uint64_t i = 0; i <= kMany; ++i) census.NoteAndCheckMany(many, i);
  // One small file per sample: two datasets each, never many.
  for (std::uint64_t inode = 0; inode < 3 * SmallDatasetCensus::kFilesKept; ++inode) {
    EXPECT_FALSE(census.NoteAndCheckMany(Key{1, inode, 100, 1}, 10));
    EXPECT_FALSE(census.NoteAndCheckMany(Key{1, inode, 100, 1}, 20));
    ASSERT_LE(census.files_tallied(), SmallDatasetCensus::kFilesKept);
  }
  EXPECT_TRUE(census.NoteAndCheckMany(many, 12345));
}

}  // namespace
}  // namespace prescient::vol
