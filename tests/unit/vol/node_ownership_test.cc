// The node agent's ownership file (vol/schedule/node_ownership.h): read by the
// node's processes only while the agent that wrote it lives, for their node and
// their schedule; and the keys it gives rows.
#include "vol/schedule/node_ownership.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace prescient::vol {
namespace {

class NodeOwnershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("prescient-ownership-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "node.owners").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Samples 1 and 64 of 100 owned.
  static std::vector<std::uint64_t> Bits() {
    std::vector<std::uint64_t> bits(2, 0);
    bits[0] = 1u << 1;
    bits[1] = 1u;
    return bits;
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(NodeOwnershipTest, ALiveAgentsFileSaysWhichSamplesTheNodeOwns) {
  ASSERT_TRUE(NodeOwnership::Publish(path_, 2, 100, Bits(), cache::SelfIdentity()).ok());
  EXPECT_EQ(std::filesystem::status(path_).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const NodeOwnership ownership(path_, 2, 100);
  EXPECT_EQ(ownership.Owned(1), std::optional<bool>(true));
  EXPECT_EQ(ownership.Owned(64), std::optional<bool>(true));
  EXPECT_EQ(ownership.Owned(0), std::optional<bool>(false));
  EXPECT_EQ(ownership.Owned(99), std::optional<bool>(false));
  EXPECT_EQ(ownership.Owned(100), std::nullopt);  // past the schedule
}

TEST_F(NodeOwnershipTest, AnotherNodesOrScheduleSFileOrNoneIsIgnored) {
  EXPECT_EQ(NodeOwnership(path_, 2, 100).Owned(1), std::nullopt);  // no file
  ASSERT_TRUE(NodeOwnership::Publish(path_, 2, 100, Bits(), cache::SelfIdentity()).ok());
  EXPECT_EQ(NodeOwnership(path_, 3, 100).Owned(1), std::nullopt);  // another node
  EXPECT_EQ(NodeOwnership(path_, 2, 101).Owned(1), std::nullopt);  // another schedule
  std::filesystem::resize_file(path_, 20);                         // truncated
  EXPECT_EQ(NodeOwnership(path_, 2, 100).Owned(1), std::nullopt);
  EXPECT_FALSE(NodeOwnership::Publish(path_, 2, 100, std::vector<std::uint64_t>(3),
                                      cache::SelfIdentity())
                   .ok());  // a bitset of the wrong size
}

TEST_F(NodeOwnershipTest, ADeadAgentsFileIsIgnoredAndOnlyItsOwnIsWithdrawn) {
  // A real process that wrote the file and exited.
  const pid_t child = ::fork();
  if (child == 0) {
    const bool ok = NodeOwnership::Publish(path_, 0, 100, Bits(), cache::SelfIdentity()).ok();
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(NodeOwnership(path_, 0, 100).Owned(1), std::nullopt);
  // Withdrawn only by its writer.
  NodeOwnership::Withdraw(path_, cache::SelfIdentity());
  EXPECT_TRUE(std::filesystem::exists(path_));
  ASSERT_TRUE(NodeOwnership::Publish(path_, 0, 100, Bits(), cache::SelfIdentity()).ok());
  NodeOwnership::Withdraw(path_, cache::SelfIdentity());
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST(HeldKey, OwnedRowsAreEvictedAfterEveryRowOwnedElsewhere) {
  constexpr std::uint64_t kNever = cache::NextUseOracle::kNever;
  // Owned: the next use itself; never again on this node: still below the rest.
  EXPECT_EQ(HeldKey(7, true), 7u);
  EXPECT_LT(HeldKey(kNever, true), HeldKey(0, false));
  EXPECT_LT(HeldKey(1'000'000, true), HeldKey(0, false));
  // Owned elsewhere: Belady among themselves, above every owned row.
  EXPECT_LT(HeldKey(5, false), HeldKey(6, false));
  EXPECT_EQ(HeldKey(kNever, false), kNever);
  EXPECT_LE(HeldKey(1'000'000, false), cache::NextUseOracle::kMaxStep);
}

}  // namespace
}  // namespace prescient::vol
