// Dataset hints: what one process finds out about a dataset's reads, seen by
// every process of the node (the prefetch leader is often another process
// than the readers).
#include <gtest/gtest.h>

#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::ForkChild;
using testing::ScopedSegmentName;
using testing::WaitExitCode;

TEST(DatasetHints, AHintSetByOneProcessIsSeenByTheOthersAndOnlyForItsDataset) {
  ScopedSegmentName name;
  auto opened = NodeCache::Open(name.options());
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  NodeCache& cache = *opened.value();
  const DatasetSlot patches = cache.RegisterDataset({21, 1}, 8192, 64).value();
  const DatasetSlot labels = cache.RegisterDataset({21, 2}, 8, 64).value();
  EXPECT_FALSE(cache.HasDatasetHint(patches, DatasetHint::kReadInParts));

  // A forked reader (a DataLoader worker) sets it; the parent sees it.
  const pid_t child = ForkChild([&] {
    cache.AddDatasetHint(patches, DatasetHint::kReadInParts);
    return cache.HasDatasetHint(patches, DatasetHint::kReadInParts) ? 0 : 1;
  });
  ASSERT_EQ(WaitExitCode(child), 0);
  EXPECT_TRUE(cache.HasDatasetHint(patches, DatasetHint::kReadInParts));
  EXPECT_FALSE(cache.HasDatasetHint(labels, DatasetHint::kReadInParts));

  // Set again: no change. A slot never registered, or out of range: none.
  cache.AddDatasetHint(patches, DatasetHint::kReadInParts);
  EXPECT_TRUE(cache.HasDatasetHint(patches, DatasetHint::kReadInParts));
  cache.AddDatasetHint(kInvalidDatasetSlot, DatasetHint::kReadInParts);
  EXPECT_FALSE(cache.HasDatasetHint(kInvalidDatasetSlot, DatasetHint::kReadInParts));
  EXPECT_FALSE(cache.HasDatasetHint(labels + 1000, DatasetHint::kReadInParts));
}

TEST(DatasetHints, ADroppedDatasetRegisteredAgainStartsWithout) {
  ScopedSegmentName name;
  auto opened = NodeCache::Open(name.options());
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  NodeCache& cache = *opened.value();
  const DatasetKey key{22, 1};
  const DatasetSlot old_slot = cache.RegisterDataset(key, 8192, 64).value();
  cache.AddDatasetHint(old_slot, DatasetHint::kReadInParts);
  ASSERT_TRUE(cache.DropDataset(old_slot).ok());
  // A retired record answers nothing; the file's new identity starts afresh.
  EXPECT_FALSE(cache.HasDatasetHint(old_slot, DatasetHint::kReadInParts));
  const DatasetSlot new_slot = cache.RegisterDataset(key, 8192, 64).value();
  ASSERT_NE(new_slot, old_slot);
  EXPECT_FALSE(cache.HasDatasetHint(new_slot, DatasetHint::kReadInParts));
}

}  // namespace
}  // namespace prescient::cache
