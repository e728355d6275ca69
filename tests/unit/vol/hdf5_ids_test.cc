// The ids and flags the connector reads without entering the library
// (vol/hdf5_ids.h) are the ones HDF5's own macros give.
#include "vol/hdf5_ids.h"

#include <gtest/gtest.h>

#include "vol/runtime/error.h"

namespace prescient::vol {
namespace {

TEST(Hdf5Ids, FileAccessFlagsAreTheMacros) {
  EXPECT_EQ(hdf5::kFileReadWrite, H5F_ACC_RDWR);
  EXPECT_EQ(hdf5::kFileTruncate, H5F_ACC_TRUNC);
  EXPECT_EQ(hdf5::kFileExclusive, H5F_ACC_EXCL);
  EXPECT_EQ(hdf5::kFileCreate, H5F_ACC_CREAT);
  EXPECT_EQ(hdf5::kFileSwmrRead, H5F_ACC_SWMR_READ);
}

TEST(Hdf5Ids, DefaultListsAreTheMacros) {
  EXPECT_EQ(hdf5::DefaultTransferList(), H5P_DATASET_XFER_DEFAULT);
  EXPECT_EQ(hdf5::DefaultFileAccessList(), H5P_FILE_ACCESS_DEFAULT);
}

TEST(Hdf5Ids, DriversAreToldApart) {
  const hid_t posix = H5Pcreate(H5P_FILE_ACCESS);
  const hid_t core = H5Pcreate(H5P_FILE_ACCESS);
  ASSERT_GE(H5Pset_fapl_sec2(posix), 0);
  ASSERT_GE(H5Pset_fapl_core(core, 1 << 16, 0), 0);
  EXPECT_EQ(hdf5::DriverOf(posix), hdf5::FileDriver::kPosix);
  EXPECT_EQ(hdf5::DriverOf(core), hdf5::FileDriver::kOther);
  // Asked again after the ids are forgotten (as at the connector's start and
  // end), and from the cached ids: the same answers.
  hdf5::ForgetDriverIds();
  EXPECT_EQ(hdf5::DriverOf(core), hdf5::FileDriver::kOther);
  EXPECT_EQ(hdf5::DriverOf(posix), hdf5::FileDriver::kPosix);
  EXPECT_EQ(hdf5::DriverOf(posix), hdf5::FileDriver::kPosix);
  H5Pclose(posix);
  H5Pclose(core);
}

TEST(Hdf5Ids, AListThatCannotBeAskedHasNoDriver) {
  PreservedErrorStack keep;  // the failed query's errors are not this test's
  H5E_BEGIN_TRY { EXPECT_EQ(hdf5::DriverOf(H5I_INVALID_HID), std::nullopt); }
  H5E_END_TRY
}

}  // namespace
}  // namespace prescient::vol
