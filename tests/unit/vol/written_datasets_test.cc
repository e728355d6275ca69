// WrittenDatasets: a dataset changed through this process stays forwarded
// until a read-only open made anew finds its file's status-change time past
// the writing handle's (vol/objects/written_datasets.h).
#include "vol/objects/written_datasets.h"

#include <gtest/gtest.h>

namespace prescient::vol {
namespace {

DatasetIdentity Dataset(std::uint64_t inode, std::uint8_t token, std::int64_t ctime_ns) {
  DatasetIdentity identity;
  identity.file_device = 7;
  identity.file_inode = inode;
  identity.file_ctime_ns = ctime_ns;
  identity.token[0] = token;
  return identity;
}

FileIdentity File(std::uint64_t inode, std::int64_t ctime_ns) {
  FileIdentity file;
  file.valid = true;
  file.device = 7;
  file.inode = inode;
  file.ctime_ns = ctime_ns;
  return file;
}

TEST(WrittenDatasets, ADatasetWrittenHereIsKnownByFileAndTokenOnly) {
  WrittenDatasets::Note(Dataset(101, 1, 1000));
  EXPECT_TRUE(WrittenDatasets::Contains(Dataset(101, 1, 5000)));   // any handle of it
  EXPECT_FALSE(WrittenDatasets::Contains(Dataset(101, 2, 1000)));  // another dataset
  EXPECT_FALSE(WrittenDatasets::Contains(Dataset(102, 1, 1000)));  // another file
}

TEST(WrittenDatasets, ForgottenOnlyByAnOpenMadeAnewOfAFileChangedSince) {
  WrittenDatasets::Note(Dataset(201, 1, 1000));
  WrittenDatasets::Note(Dataset(201, 2, 3000));  // through a handle opened later
  int asked = 0;
  auto shared_writable = [&] { return ++asked, false; };
  auto anew = [&] { return ++asked, true; };
  // The time of a handle the changes were made through, or earlier: a quick
  // rewrite could have left rows cached before it looking current. Not even asked.
  WrittenDatasets::FileOpenedReadOnly(File(201, 3000), anew);
  EXPECT_EQ(asked, 0);
  EXPECT_TRUE(WrittenDatasets::Contains(Dataset(201, 1, 0)));
  // Later, but HDF5 shares a writable open: unflushed writes.
  WrittenDatasets::FileOpenedReadOnly(File(201, 4000), shared_writable);
  EXPECT_EQ(asked, 1);
  EXPECT_TRUE(WrittenDatasets::Contains(Dataset(201, 2, 0)));
  // Both (past that open's time too): forgotten, every dataset of the file, no other file's.
  WrittenDatasets::Note(Dataset(202, 1, 1000));
  WrittenDatasets::FileOpenedReadOnly(File(201, 5000), anew);
  EXPECT_EQ(asked, 2);
  EXPECT_FALSE(WrittenDatasets::Contains(Dataset(201, 1, 0)));
  EXPECT_FALSE(WrittenDatasets::Contains(Dataset(201, 2, 0)));
  EXPECT_TRUE(WrittenDatasets::Contains(Dataset(202, 1, 0)));
}

TEST(WrittenDatasets, AnOpenThatSharesTheWritableOneRaisesTheBar) {
  // Rows may be cached under the identity a read-only open saw while the
  // writes were not flushed: a later open must be past its time too.
  WrittenDatasets::Note(Dataset(401, 1, 1000));
  WrittenDatasets::FileOpenedReadOnly(File(401, 2000), [] { return false; });
  WrittenDatasets::FileOpenedReadOnly(File(401, 2000), [] { return true; });
  EXPECT_TRUE(WrittenDatasets::Contains(Dataset(401, 1, 0)));
  WrittenDatasets::FileOpenedReadOnly(File(401, 2001), [] { return true; });
  EXPECT_FALSE(WrittenDatasets::Contains(Dataset(401, 1, 0)));
}

TEST(WrittenDatasets, AnUnknownTimeIsNeverBehindUs) {
  WrittenDatasets::Note(Dataset(301, 1, 0));  // the writing handle's file could not be stat'ed
  WrittenDatasets::FileOpenedReadOnly(File(301, 9000), [] { return true; });
  EXPECT_TRUE(WrittenDatasets::Contains(Dataset(301, 1, 0)));
  FileIdentity unstated = File(302, 9000);  // the reopened file could not be stat'ed
  unstated.valid = false;
  WrittenDatasets::Note(Dataset(302, 1, 1000));
  WrittenDatasets::FileOpenedReadOnly(unstated, [] { return true; });
  EXPECT_TRUE(WrittenDatasets::Contains(Dataset(302, 1, 0)));
}

}  // namespace
}  // namespace prescient::vol
