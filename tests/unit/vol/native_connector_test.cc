// The native connector's class, asked once per library session for calling
// its callbacks directly (vol/native_connector.h).
#include "vol/native_connector.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "vol/runtime/error.h"

namespace prescient::vol {
namespace {

class NativeConnectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "/tmp/prescient_native_connector_test_" + std::to_string(::getpid()) + ".h5";
    file_ = H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(file_, 0);
    ForgetNativeClass();
  }
  void TearDown() override {
    ForgetNativeClass();
    H5Fclose(file_);
    ::unlink(path_.c_str());
  }
  std::string path_;
  hid_t file_ = H5I_INVALID_HID;
};

TEST_F(NativeConnectorTest, IsTheNativeClassInA114Library) {
  unsigned major = 0, minor = 0, release = 0;
  ASSERT_GE(H5get_libversion(&major, &minor, &release), 0);
  const H5VL_class_t* native = NativeClassOf(H5VLobject(file_), H5VL_NATIVE);
  if (major == 1 && minor == 14) {
    ASSERT_NE(native, nullptr);
    EXPECT_EQ(native->value, H5_VOL_NATIVE);
    EXPECT_NE(native->dataset_cls.get, nullptr);
    EXPECT_EQ(NativeClassOf(H5VLobject(file_), H5VL_NATIVE), native);  // the answer kept
  } else {
    EXPECT_EQ(native, nullptr);  // HDF5 2.x: through the public functions
  }
}

// A file open has no object to ask by: it takes the direct path only once
// another call has found the class, and only for the native connector.
TEST_F(NativeConnectorTest, KnownOnlyOnceAskedAndOnlyForTheNativeConnector) {
  EXPECT_EQ(KnownNativeClass(H5VL_NATIVE), nullptr);  // not asked yet
  const H5VL_class_t* native = NativeClassOf(H5VLobject(file_), H5VL_NATIVE);
  EXPECT_EQ(KnownNativeClass(H5VL_NATIVE), native);  // null in HDF5 2.x
  EXPECT_EQ(KnownNativeClass(H5VL_PASSTHRU), nullptr);
  ForgetNativeClass();
  EXPECT_EQ(KnownNativeClass(H5VL_NATIVE), nullptr);
}

TEST_F(NativeConnectorTest, NoClassForAnotherConnectorOrNoObject) {
  EXPECT_EQ(NativeClassOf(H5VLobject(file_), H5VL_PASSTHRU), nullptr);  // HDF5's own
  EXPECT_EQ(NativeClassOf(nullptr, H5VL_NATIVE), nullptr);
}

// The connector id a file access list hands out is another id of the native
// connector in HDF5 2.x: the descriptor borrowed at a file open depends on
// telling it so (the registered id alone is not enough there).
TEST_F(NativeConnectorTest, TellsTheNativeConnectorUnderAnyOfItsIds) {
  EXPECT_TRUE(IsNativeConnector(H5VL_NATIVE));
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  ASSERT_GE(fapl, 0);
  hid_t from_list = H5I_INVALID_HID;
  ASSERT_GE(H5Pget_vol_id(fapl, &from_list), 0);
  EXPECT_TRUE(IsNativeConnector(from_list));
  EXPECT_EQ(NativeClassOf(H5VLobject(file_), from_list),
            NativeClassOf(H5VLobject(file_), H5VL_NATIVE));  // the same answer
  H5VLclose(from_list);
  H5Pclose(fapl);
}

TEST_F(NativeConnectorTest, AnotherConnectorOrNoConnectorIsNotNativeAndLeavesNoError) {
  EXPECT_FALSE(IsNativeConnector(H5VL_PASSTHRU));
  const hid_t space = H5Screate(H5S_SCALAR);  // not a connector id at all
  const ssize_t before = H5Eget_num(H5E_DEFAULT);
  EXPECT_FALSE(IsNativeConnector(space));
  EXPECT_FALSE(IsNativeConnector(H5I_INVALID_HID));
  EXPECT_EQ(H5Eget_num(H5E_DEFAULT), before);
  H5Sclose(space);
}

TEST_F(NativeConnectorTest, AskingKeepsTheCallersErrors) {
  void* native_file = H5VLobject(file_);  // a public function: it empties the stack
  PushError("test", "an error the caller is about to report");
  const ssize_t before = H5Eget_num(H5E_DEFAULT);
  ASSERT_GT(before, 0);
  (void)NativeClassOf(native_file, H5VL_NATIVE);  // asks the library: H5get_libversion
  EXPECT_EQ(H5Eget_num(H5E_DEFAULT), before);
  H5Eclear2(H5E_DEFAULT);
}

TEST_F(NativeConnectorTest, ASlotTheClassLacksGoesThroughThePublicFunction) {
  H5VL_class_t without{};
  int via_api = 0;
  const int result = CallNativeOr<PRESCIENT_SLOT(dataset_cls.get)>(
      &without, [&] { return ++via_api; }, nullptr, nullptr, H5P_DEFAULT, nullptr);
  EXPECT_EQ(result, 1);
  EXPECT_EQ(via_api, 1);
}

}  // namespace
}  // namespace prescient::vol
