// DatasetResolver's answers, as the prefetch thread gets them: a dataset the
// file has is prepared; one it lacks (a label dataset looked for in a file of
// images, when a followed map's labels are in a file of their own) is an
// answer, not an error of the application's: nothing on stderr, nothing left
// on the thread's error stack, its printing setting as it was; a file the
// application reads is opened again, one it writes is not; a file kept open
// between resolutions can be rewritten and is then resolved anew, and a
// forked child opens its own. Real HDF5.
#include "vol/schedule/dataset_resolver.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/io/coalescing_planner.h"
#include "cache/io/raw_loader.h"
#include "tests/unit/vol/int_rows_file.h"
#include "tests/unit/vol/virtual_files.h"
#include "vol/objects/file_state.h"
#include "vol/objects/scoped_id.h"
#include "vol/serve/cache_client.h"
#include "vol/serve/resolution_memo.h"

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

// A file the application reads as a SWMR reader (h5py's swmr=True) may be
// changed by a SWMR writer at any time: its datasets, resolved here or
// remembered, look at the file at every read, so a change is seen at the
// very next read, not up to a change-check interval later. Other files'
// datasets keep the interval.
TEST_F(DatasetResolverTest, ADatasetOfAFileReadAsASwmrReaderChecksItAtEveryRead) {
  const auto plain = DatasetResolver::Resolve(file_.path(), "x");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_FALSE(plain.value()->checks_every_read());

  testing::IntRowsFile swmr_file{"resolver-swmr", 16};
  ASSERT_TRUE(swmr_file.ok());
  const std::shared_ptr<FileState> reading = FileState::Make(swmr_file.path().c_str(), false);
  reading->swmr_read = true;
  OpenFiles::Remember(reading);
  const std::string memo_path = (std::filesystem::temp_directory_path() /
                                 ("prescient-resolver-swmr-memo-" + std::to_string(getpid())))
                                    .string();
  ResolutionMemo memo(memo_path);
  const auto resolved = DatasetResolver::Resolve(swmr_file.path(), "x", false, &memo);
  const auto remembered = DatasetResolver::Resolve(swmr_file.path(), "x", false, &memo);
  std::filesystem::remove(memo_path);
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  ASSERT_TRUE(remembered.ok()) << remembered.status().message();
  EXPECT_TRUE(remembered.value()->checks_every_read());
  const std::shared_ptr<CachedDataset> dataset = resolved.value();
  EXPECT_TRUE(dataset->checks_every_read());
  EXPECT_FALSE(dataset->FileChanged());

  {  // a writer's bytes appended: the size and times change
    std::FILE* append = std::fopen(swmr_file.path().c_str(), "ab");
    ASSERT_NE(append, nullptr);
    ASSERT_EQ(std::fputc(0, append), 0);
    ASSERT_EQ(std::fclose(append), 0);
  }
  EXPECT_TRUE(dataset->FileChanged()) << "not seen at the next read";
  DatasetResolver::ReleaseFiles();
}

// The resolver keeps the file open for the next resolutions. That must not
// stop the application from rewriting it (HDF5's file lock, were it held,
// would make H5Fcreate fail in this very process), and a resolution after
// the rewrite sees the new file, not the kept handle's old one.
TEST_F(DatasetResolverTest, AKeptFileCanBeRewrittenAndIsResolvedAnew) {
  const auto before = DatasetResolver::Resolve(file_.path(), "x");
  ASSERT_TRUE(before.ok()) << before.status().message();
  EXPECT_EQ(before.value()->num_rows(), 16u);

  {
    testing::IntRowsFile same_path_is_not_it{"resolver-other", 1};  // a second kept file
    ASSERT_TRUE(same_path_is_not_it.ok());
    ASSERT_TRUE(DatasetResolver::Resolve(same_path_is_not_it.path(), "x").ok());
  }
  const hid_t rewritten = H5Fcreate(file_.path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(rewritten, 0) << "the kept file blocked the application's rewrite";
  const hsize_t dims[1] = {40};
  const hid_t space = H5Screate_simple(1, dims, nullptr);
  const hid_t dataset =
      H5Dcreate2(rewritten, "x", H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(dataset, 0);
  const std::vector<int> values(40, 7);
  ASSERT_GE(H5Dwrite(dataset, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
  H5Dclose(dataset);
  H5Sclose(space);
  ASSERT_GE(H5Fclose(rewritten), 0);

  const auto after = DatasetResolver::Resolve(file_.path(), "x");
  ASSERT_TRUE(after.ok()) << after.status().message();
  EXPECT_EQ(after.value()->num_rows(), 40u);
  DatasetResolver::ReleaseFiles();
  const auto released = DatasetResolver::Resolve(file_.path(), "x");
  ASSERT_TRUE(released.ok()) << released.status().message();
  EXPECT_EQ(released.value()->num_rows(), 40u);
  DatasetResolver::ReleaseFiles();
}

// The descriptors of this process open on `path`.
std::set<int> DescriptorsOf(const std::string& path) {
  std::set<int> found;
  const std::filesystem::path target = std::filesystem::canonical(path);
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    if (std::filesystem::read_symlink(entry.path(), error) == target) {
      found.insert(std::stoi(entry.path().filename().string()));
    }
  }
  return found;
}

// A DataLoader worker inherits the files its parent's resolutions keep open,
// on descriptors whose offset both share (the stdio driver seeks, then
// reads). Nothing the child does may move the parent's offset: here it
// moves the inherited descriptor's, resolves, moves the offset of every
// descriptor it has on the file, and closes its files.
TEST_F(DatasetResolverTest, AForkedChildNeverMovesItsParentsFileOffsets) {
  ASSERT_TRUE(DatasetResolver::Resolve(file_.path(), "x").ok());
  const std::set<int> parents = DescriptorsOf(file_.path());
  ASSERT_EQ(parents.size(), 1u) << "the resolver keeps the file open";
  const int parent_fd = *parents.begin();
  const off_t parent_offset = lseek(parent_fd, 0, SEEK_CUR);
  constexpr off_t kMoved = 12345;
  ASSERT_NE(parent_offset, kMoved);

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // What glibc's fclose of the inherited stream does to the offset (it
    // did under HDF5 2.x): the descriptor must be the child's own by now.
    (void)lseek(parent_fd, kMoved, SEEK_SET);
    int code = 0;
    {
      const auto resolved = DatasetResolver::Resolve(file_.path(), "x");
      if (!resolved.ok() || resolved.value()->num_rows() != 16) code = 1;
    }
    // Every descriptor the child has on the file, inherited or its own.
    for (const int fd : DescriptorsOf(file_.path())) (void)lseek(fd, kMoved, SEEK_SET);
    DatasetResolver::ReleaseFiles();
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child could not resolve the file";
  EXPECT_EQ(lseek(parent_fd, 0, SEEK_CUR), parent_offset)
      << "the child moved the offset of the parent's open file";
  EXPECT_EQ(DescriptorsOf(file_.path()), parents);
  const auto again = DatasetResolver::Resolve(file_.path(), "x");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again.value()->num_rows(), 16u);
  DatasetResolver::ReleaseFiles();
  EXPECT_TRUE(DescriptorsOf(file_.path()).empty());
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

// A virtual dataset the application has not opened is prepared as its open
// would prepare it: its rows read raw from its sources (chunked and
// compressed here), so the prefetch thread loads them with pread, without
// HDF5. Done on a thread of its own, as the prefetch thread does it.
TEST_F(DatasetResolverTest, AVirtualDatasetIsPreparedToReadItsSourcesRaw) {
  testing::VirtualFiles files("resolver-vds");
  const testing::Storage gzipped{.chunked = true, .chunk_rows = 2, .deflate = true};
  files.WriteSource("a.h5", 4, 0, gzipped);
  files.WriteSource("b.h5", 6, 100, gzipped);
  files.WriteVirtual(10, {{"b.h5", 0, 6, 0}, {"a.h5", 6, 4, 0}});
  // Sources written this long before are not "changed while it was open"
  // (VirtualSources allows for coarse file timestamps).
  std::this_thread::sleep_for(std::chrono::milliseconds(60));

  cache::io::Result<std::shared_ptr<CachedDataset>> resolved =
      cache::io::Status::Internal("not resolved");
  std::thread prefetch([&] { resolved = DatasetResolver::Resolve(files.Path("vds.h5"), "v"); });
  prefetch.join();
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  const CachedDataset& dataset = *resolved.value();
  EXPECT_TRUE(dataset.virtual_dataset());
  ASSERT_NE(dataset.raw_layout(), nullptr) << dataset.raw_reason();
  ASSERT_NE(dataset.source(), nullptr);

  std::vector<int> native(10 * testing::kColumns), raw(native.size(), -1);
  {
    ScopedId file(H5Fopen(files.Path("vds.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), &H5Fclose);
    ScopedId vds(H5Dopen2(file.get(), "v", H5P_DEFAULT), &H5Dclose);
    ASSERT_GE(H5Dread(vds.get(), H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, native.data()), 0);
  }
  const std::vector<std::uint64_t> rows = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto plan = cache::io::PlanReads(*dataset.raw_layout(), rows, cache::io::kNoCoalescing);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  for (const cache::io::ReadTask& task : plan.value().tasks) {
    const cache::io::Status loaded =
        cache::io::LoadTask(*dataset.raw_layout(), *dataset.source(), task, [&](std::uint64_t r) {
          return reinterpret_cast<std::byte*>(raw.data() + r * testing::kColumns);
        });
    ASSERT_TRUE(loaded.ok()) << loaded.message();
  }
  EXPECT_EQ(raw, native);
}

}  // namespace
}  // namespace prescient::vol
