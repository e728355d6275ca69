// A prefetch round and the node's prefetch leadership (vol/schedule/
// prefetch_round.h): a leader reads what it claimed; a leader demoted between
// its claims and its reads (the node agent took the node's prefetching)
// releases every claim unread and counts it, so the rows are the new
// leader's or the readers' to load, not read twice. Real HDF5, a real segment,
// a real second process taking the leadership.
#include "vol/schedule/prefetch_round.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/cache/test_support.h"
#include "vol/runtime/runtime.h"
#include "vol/schedule/dataset_resolver.h"
#include "vol/serve/cache_client.h"

namespace prescient::vol {
namespace {

constexpr hsize_t kRows = 64;
constexpr hsize_t kRowInts = 4096;  // 16 KiB rows: cached a row to an entry
constexpr std::uint64_t kWanted = 32;

// Runs tasks on the caller's thread; before the first one, `before_first`:
// the moment between a round's claims and its reads.
class HookedExecutor final : public cache::io::Executor {
 public:
  explicit HookedExecutor(std::function<void()> before_first)
      : before_first_(std::move(before_first)) {}
  bool Submit(std::function<void()> task) override {
    if (before_first_) std::exchange(before_first_, nullptr)();
    task();
    return true;
  }

 private:
  std::function<void()> before_first_;
};

class PrefetchRoundTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!DatasetResolver::Available()) GTEST_SKIP() << "HDF5 is not thread-safe: no resolutions";
    ASSERT_TRUE(WriteFile());
    auto opened = cache::NodeCache::Open(name_.options());
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    segment_ = opened.value().get();
    (void)CacheClient::Get().ExchangeSegmentForTesting(std::move(opened.value()));
    auto resolved = DatasetResolver::Resolve(path_, "x");
    ASSERT_TRUE(resolved.ok()) << resolved.status().message();
    dataset_ = std::move(resolved.value());
    ASSERT_NE(dataset_, nullptr);
    const Options& options = Runtime::Get().options();
    const cache::Status registered =
        dataset_->Register(*segment_, options.cache.block_bytes, options.coalesce_gap);
    ASSERT_TRUE(registered.ok()) << registered.message();
    ASSERT_EQ(dataset_->rows_per_entry(), 1u);
  }

  void TearDown() override {
    dataset_.reset();
    if (segment_ != nullptr) CacheClient::Get().ExchangeSegmentForTesting(nullptr).reset();
    ::unlink(name_.path().c_str());
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }

  bool WriteFile() {
    const hid_t file = H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) return false;
    const hsize_t dims[2] = {kRows, kRowInts};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    const hid_t dataset =
        H5Dcreate2(file, "x", H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    std::vector<int> values(kRows * kRowInts);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int>(i);
    const bool written =
        H5Dwrite(dataset, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0;
    H5Dclose(dataset);
    H5Sclose(space);
    return H5Fclose(file) >= 0 && written;
  }

  // A round over `rows`, wanted in the order given (the first soonest).
  RoundTally RunRound(cache::io::Executor& executor, const std::vector<std::uint64_t>& rows) {
    PrefetchRound round(
        *segment_, nullptr, executor, [](const CachedDataset&) { return std::nullopt; },
        [](const CachedDataset&, std::uint64_t, std::uint64_t step) { return step; });
    std::vector<WantedRow> wanted;
    for (std::uint64_t step = 0; step < rows.size(); ++step)
      wanted.push_back({.dataset = dataset_.get(), .row = rows[step], .step = step});
    return round.Run(std::move(wanted));
  }

  RoundTally RunRound(cache::io::Executor& executor) {
    std::vector<std::uint64_t> rows;
    for (std::uint64_t row = 0; row < kWanted; ++row) rows.push_back(row);
    return RunRound(executor, rows);
  }

  std::size_t ResidentRows() {
    std::vector<std::uint64_t> rows;
    for (std::uint64_t row = 0; row < kRows; ++row) rows.push_back(row);
    std::vector<std::uint8_t> resident(rows.size());
    return segment_->Resident(dataset_->slot(), rows, resident);
  }

  cache::testing::ScopedSegmentName name_;
  std::string path_ = (std::filesystem::temp_directory_path() /
                       ("prescient-round-" + std::to_string(getpid()) + ".h5"))
                          .string();
  cache::NodeCache* segment_ = nullptr;
  std::shared_ptr<CachedDataset> dataset_;
};

TEST_F(PrefetchRoundTest, ALeaderReadsWhatItClaimed) {
  ASSERT_TRUE(segment_->TryBecomeLeader());
  HookedExecutor executor(nullptr);
  const RoundTally tally = RunRound(executor);
  EXPECT_EQ(tally.rows_given_up, 0u);
  EXPECT_EQ(tally.failed_tasks, 0u);
  EXPECT_GE(tally.rows_prefetched, kWanted);
  EXPECT_EQ(ResidentRows(), tally.rows_prefetched);
}

// Rows the cache holds are dropped before the round claims or reads: a round
// over every row, half of them resident and wanted in descending order, stores
// exactly the others, and a round over resident rows only reads nothing.
TEST_F(PrefetchRoundTest, ARoundReadsOnlyTheRowsTheCacheLacks) {
  ASSERT_TRUE(segment_->TryBecomeLeader());
  HookedExecutor executor(nullptr);
  const RoundTally first = RunRound(executor);
  ASSERT_EQ(first.failed_tasks, 0u);
  const std::size_t resident_before = ResidentRows();
  ASSERT_GE(resident_before, kWanted);

  std::vector<std::uint64_t> descending;
  for (std::uint64_t row = kRows; row-- > 0;) descending.push_back(row);
  const RoundTally second = RunRound(executor, descending);
  EXPECT_EQ(second.failed_tasks, 0u);
  EXPECT_EQ(second.rows_given_up, 0u);
  EXPECT_EQ(second.rows_prefetched, kRows - resident_before);
  EXPECT_EQ(ResidentRows(), kRows);

  const RoundTally third = RunRound(executor, descending);
  EXPECT_EQ(third.rows_prefetched, 0u);
  EXPECT_EQ(third.storage_reads, 0u);
  EXPECT_EQ(third.storage_bytes, 0u);
}

TEST_F(PrefetchRoundTest, ALeaderDemotedMidRoundReleasesItsClaimsUnread) {
  ASSERT_TRUE(segment_->TryBecomeLeader());
  // Another process takes the node's prefetching (as the node agent does),
  // after this round claimed its rows and before it reads them.
  int taker_status = -1;
  HookedExecutor executor([&] {
    const pid_t taker = fork();
    if (taker == 0) _exit(segment_->TakeLeadership() ? 0 : 1);
    if (taker > 0) ::waitpid(taker, &taker_status, 0);
  });
  const RoundTally tally = RunRound(executor);
  ASSERT_TRUE(WIFEXITED(taker_status) && WEXITSTATUS(taker_status) == 0)
      << "the second process could not take the leadership";
  EXPECT_FALSE(segment_->IsLeader());
  EXPECT_EQ(tally.rows_prefetched, 0u);
  EXPECT_EQ(tally.storage_reads, 0u);
  EXPECT_EQ(tally.failed_tasks, 0u);
  EXPECT_GE(tally.rows_given_up, kWanted);
  EXPECT_EQ(ResidentRows(), 0u);
  // Released, not left claimed: the rows can be claimed again at once.
  std::vector<std::uint64_t> rows;
  for (std::uint64_t row = 0; row < kWanted; ++row) rows.push_back(row);
  auto claimed = segment_->Claim(dataset_->slot(), rows, nullptr);
  ASSERT_TRUE(claimed.ok()) << claimed.status().message();
  EXPECT_EQ(claimed.value(), rows);
  for (std::uint64_t row : claimed.value()) (void)segment_->Abandon(dataset_->slot(), row);
}

}  // namespace
}  // namespace prescient::vol
