// ResolutionMemo: a dataset one leader resolved through HDF5 is prepared by
// the next from the node's memo, identical and loading the same bytes; a file
// rewritten since is resolved anew; a damaged memo, or one that is not the
// user's own, is not used, and resolving still works. Real HDF5 and files.
#include "vol/serve/resolution_memo.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include "tests/unit/vol/int_rows_file.h"
#include "vol/schedule/dataset_resolver.h"
#include "vol/serve/cache_client.h"

namespace prescient::vol {
namespace {

class ResolutionMemoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!DatasetResolver::Available()) GTEST_SKIP() << "HDF5 is not thread-safe: no resolutions";
    CacheClient::Get();
    ASSERT_TRUE(file_.ok());
  }
  void TearDown() override {
    DatasetResolver::ReleaseFiles();
    std::error_code ignored;
    std::filesystem::remove(memo_path_, ignored);
  }

  // What a leader does: resolves `name` of the test file with `memo`.
  std::shared_ptr<CachedDataset> Resolve(ResolutionMemo& memo, const std::string& name = "x") {
    auto resolved = DatasetResolver::Resolve(file_.path(), name, false, &memo);
    EXPECT_TRUE(resolved.ok()) << resolved.status().message();
    return resolved.ok() ? resolved.value() : nullptr;
  }

  static std::vector<int> Rows(const CachedDataset& dataset, std::vector<std::uint64_t> rows) {
    std::vector<int> values(rows.size(), -1);
    std::vector<std::byte*> dest;
    for (int& v : values) dest.push_back(reinterpret_cast<std::byte*>(&v));
    LoadCounters counters;
    EXPECT_TRUE(dataset.LoadEntries(nullptr, rows, dest, &counters).ok());
    return values;
  }

  testing::IntRowsFile file_{"memo", 64};
  const std::string memo_path_ = (std::filesystem::temp_directory_path() /
                                  ("prescient-memo-" + std::to_string(getpid()) + ".resolved"))
                                     .string();
};

TEST_F(ResolutionMemoTest, TheNextLeaderPreparesAResolvedDatasetFromTheMemo) {
  ResolutionMemo first(memo_path_);
  const auto resolved = Resolve(first);
  ASSERT_NE(resolved, nullptr);
  EXPECT_EQ(first.tally().found, 0u);
  DatasetResolver::FlushMemo(first);
  struct stat st{};
  ASSERT_EQ(stat(memo_path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  ResolutionMemo next(memo_path_);  // a new worker's, with nothing loaded
  const auto remembered = Resolve(next);
  ASSERT_NE(remembered, nullptr);
  EXPECT_EQ(next.tally().records, 1u);
  EXPECT_EQ(next.tally().found, 1u);
  EXPECT_EQ(remembered->key(), resolved->key());
  EXPECT_EQ(remembered->description(), resolved->description());
  EXPECT_EQ(remembered->name(), resolved->name());
  EXPECT_EQ(remembered->path(), file_.path());
  EXPECT_EQ(remembered->num_rows(), 64u);
  EXPECT_EQ(remembered->row_bytes(), sizeof(int));
  EXPECT_EQ(remembered->chunk_rows(), resolved->chunk_rows());
  const auto& a = std::get<cache::io::ContiguousLayout>(*resolved->raw_layout());
  const auto& b = std::get<cache::io::ContiguousLayout>(*remembered->raw_layout());
  EXPECT_EQ(a.data_offset, b.data_offset);
  EXPECT_EQ(a.row_bytes, b.row_bytes);
  EXPECT_EQ(a.num_rows, b.num_rows);
  EXPECT_EQ(Rows(*remembered, {0, 5, 63}), (std::vector<int>{0, 5, 63}));
  EXPECT_EQ(Rows(*remembered, {7, 8}), Rows(*resolved, {7, 8}));
  // A dataset the memo does not hold is resolved through HDF5 as before.
  auto missing = DatasetResolver::Resolve(file_.path(), "no-such", false, &next);
  EXPECT_FALSE(missing.ok());
}

TEST_F(ResolutionMemoTest, AFileRewrittenSinceIsResolvedAnew) {
  ResolutionMemo first(memo_path_);
  ASSERT_NE(Resolve(first), nullptr);
  DatasetResolver::FlushMemo(first);
  DatasetResolver::ReleaseFiles();
  {
    // Same path, same dataset name, another file: 40 rows of 7.
    const hid_t f = H5Fcreate(file_.path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hsize_t dims[1] = {40};
    const hid_t space = H5Screate_simple(1, dims, nullptr);
    const hid_t d =
        H5Dcreate2(f, "x", H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const std::vector<int> values(40, 7);
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
    H5Dclose(d);
    H5Sclose(space);
    ASSERT_GE(H5Fclose(f), 0);
  }
  ResolutionMemo next(memo_path_);
  const auto after = Resolve(next);
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(next.tally().found, 0u);
  EXPECT_EQ(after->num_rows(), 40u);
  EXPECT_EQ(Rows(*after, {0, 39}), (std::vector<int>{7, 7}));
  // Remembered anew: the leader after that finds the new file's.
  DatasetResolver::FlushMemo(next);
  ResolutionMemo third(memo_path_);
  const auto again = Resolve(third);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(third.tally().found, 1u);
  EXPECT_EQ(again->num_rows(), 40u);
}

TEST_F(ResolutionMemoTest, ADamagedMemoIsNotUsedAndResolvingStillWorks) {
  ResolutionMemo first(memo_path_);
  ASSERT_NE(Resolve(first), nullptr);
  DatasetResolver::FlushMemo(first);
  {
    // One byte of the record's payload changed (a number in it).
    std::fstream f(memo_path_, std::ios::in | std::ios::out | std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const std::size_t at = bytes.find("rows ");
    ASSERT_NE(at, std::string::npos);
    f.seekp(static_cast<std::streamoff>(at + 5));
    f.put(bytes[at + 5] == '9' ? '8' : '9');
  }
  ResolutionMemo next(memo_path_);
  const auto resolved = Resolve(next);
  ASSERT_NE(resolved, nullptr);
  EXPECT_TRUE(next.tally().given_up);
  EXPECT_EQ(next.tally().found, 0u);
  EXPECT_EQ(resolved->row_bytes(), sizeof(int));
  EXPECT_EQ(Rows(*resolved, {3}), (std::vector<int>{3}));

  // Garbage in place of a record header: the same.
  ASSERT_TRUE(std::filesystem::remove(memo_path_));
  {
    std::ofstream(memo_path_) << std::string(64, 'z');
  }
  ASSERT_EQ(chmod(memo_path_.c_str(), 0600), 0);
  ResolutionMemo garbage(memo_path_);
  ASSERT_NE(Resolve(garbage), nullptr);
  EXPECT_TRUE(garbage.tally().given_up);
}

TEST_F(ResolutionMemoTest, ATornLastRecordIsSkippedTheOnesBeforeItAreUsed) {
  ResolutionMemo first(memo_path_);
  ASSERT_NE(Resolve(first), nullptr);
  DatasetResolver::FlushMemo(first);
  struct stat st{};
  ASSERT_EQ(stat(memo_path_.c_str(), &st), 0);
  const off_t whole = st.st_size;
  {
    // A second record cut short (a write into a full tmpfs).
    const int fd = open(memo_path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    std::string copy(static_cast<std::size_t>(whole), '\0');
    const int in = open(memo_path_.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_EQ(pread(in, copy.data(), copy.size(), 0), whole);
    close(in);
    ASSERT_EQ(write(fd, copy.data(), copy.size() / 2), static_cast<ssize_t>(copy.size() / 2));
    close(fd);
  }
  ResolutionMemo next(memo_path_);
  ASSERT_NE(Resolve(next), nullptr);
  EXPECT_FALSE(next.tally().given_up);
  EXPECT_EQ(next.tally().records, 1u);
  EXPECT_EQ(next.tally().found, 1u);
}

TEST_F(ResolutionMemoTest, AMemoOthersCouldWriteIsNeitherReadNorWritten) {
  ResolutionMemo first(memo_path_);
  ASSERT_NE(Resolve(first), nullptr);
  DatasetResolver::FlushMemo(first);
  ASSERT_EQ(chmod(memo_path_.c_str(), 0666), 0);
  struct stat before{};
  ASSERT_EQ(stat(memo_path_.c_str(), &before), 0);
  ResolutionMemo next(memo_path_);
  ASSERT_NE(Resolve(next), nullptr);
  EXPECT_EQ(next.tally().records, 0u);
  EXPECT_EQ(next.tally().found, 0u);
  DatasetResolver::FlushMemo(next);  // remembered, not written
  struct stat after{};
  ASSERT_EQ(stat(memo_path_.c_str(), &after), 0);
  EXPECT_EQ(after.st_size, before.st_size);

  // A symbolic link in its place is not followed either.
  const std::string target = memo_path_ + ".target";
  ASSERT_TRUE(std::filesystem::remove(memo_path_));
  {
    std::ofstream(target) << "";
  }
  ASSERT_EQ(chmod(target.c_str(), 0600), 0);
  std::filesystem::create_symlink(target, memo_path_);
  ResolutionMemo linked(memo_path_);
  ASSERT_NE(Resolve(linked), nullptr);
  DatasetResolver::FlushMemo(linked);
  EXPECT_EQ(std::filesystem::file_size(target), 0u);
  std::filesystem::remove(target);
}

}  // namespace
}  // namespace prescient::vol
