// DatasetResolver's answers, as the prefetch thread gets them: a dataset the
// file has is prepared; one it lacks (a label dataset looked for in a file of
// images, when a followed map's labels are in a file of their own) is an
// answer, not an error of the application's: nothing on stderr, nothing left
// on the thread's error stack, its printing setting as it was; a file the
// application reads is opened again, one it writes is not. Real HDF5.
#include "vol/schedule/dataset_resolver.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <string>
#include <thread>

#include "tests/unit/vol/int_rows_file.h"
#include "vol/objects/file_state.h"
#include "vol/serve/cache_client.h"

namespace prescient::vol {
namespace {

class DatasetResolverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!DatasetResolver::Available()) GTEST_SKIP() << "HDF5 is not thread-safe: no resolutions";
    CacheClient::Get();
    ASSERT_TRUE(file_.ok());
  }

  testing::IntRowsFile file_{"resolver", 16};
};

TEST_F(DatasetResolverTest, ADatasetTheFileHasIsPrepared) {
  const auto resolved = DatasetResolver::Resolve(file_.path(), "x");
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  EXPECT_NE(resolved.value(), nullptr);
}

// A group per sample keeps the datasets not opened yet in the file the
// application reads: such a file is opened again, apart. One the application
// writes may change under the prefetch thread: it is not.
TEST_F(DatasetResolverTest, AFileTheApplicationReadsIsOpenedAgainOneItWritesIsNot) {
  const std::shared_ptr<FileState> reading = FileState::Make(file_.path().c_str(), false);
  ASSERT_TRUE(reading->identity.valid);
  OpenFiles::Remember(reading);
  const auto resolved = DatasetResolver::Resolve(file_.path(), "x");
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  EXPECT_NE(resolved.value(), nullptr);

  testing::IntRowsFile written{"resolver-written", 16};
  ASSERT_TRUE(written.ok());
  const std::shared_ptr<FileState> writing = FileState::Make(written.path().c_str(), true);
  OpenFiles::Remember(writing);
  const auto refused = DatasetResolver::Resolve(written.path(), "x");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("open for writing in the application"),
            std::string::npos)
      << refused.status().message();
}

// On a thread of its own, as the prefetch thread: a new thread's HDF5 prints
// every failed call's error stack by default.
TEST_F(DatasetResolverTest, ADatasetTheFileLacksIsAnAnswerPrintedNowhere) {
  std::string message;
  std::string printed;
  bool printing_kept = false;
  ssize_t errors_left = -1;
  std::thread prefetch([&] {
    H5E_auto2_t before = nullptr;
    void* before_data = nullptr;
    H5Eget_auto2(H5E_DEFAULT, &before, &before_data);
    ::testing::internal::CaptureStderr();
    const auto resolved = DatasetResolver::Resolve(file_.path(), "labels");
    printed = ::testing::internal::GetCapturedStderr();
    if (!resolved.ok()) message = resolved.status().message();
    H5E_auto2_t after = nullptr;
    void* after_data = nullptr;
    H5Eget_auto2(H5E_DEFAULT, &after, &after_data);
    printing_kept = before != nullptr && after == before && after_data == before_data;
    errors_left = H5Eget_num(H5E_DEFAULT);
  });
  prefetch.join();
  EXPECT_NE(message.find("no dataset labels in " + file_.path()), std::string::npos) << message;
  EXPECT_EQ(printed, "");
  EXPECT_TRUE(printing_kept) << "the thread's error printing was not put back";
  EXPECT_EQ(errors_left, 0);
}

}  // namespace
}  // namespace prescient::vol
