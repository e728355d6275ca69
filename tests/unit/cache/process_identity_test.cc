// Telling a live peer from a gone one (process_identity.h): every takeover
// and reclaim of the node cache rests on it, so it is checked against real
// processes in the states that look alike in /proc/<pid>/stat.
#include "cache/core/process_identity.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "tests/unit/cache/test_support.h"

namespace prescient::cache {
namespace {

using testing::ForkChild;
using testing::WaitExitCode;

// The state letter of /proc/<pid>/stat ('?' when it cannot be read).
char StateOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() ? '?' : line[close + 2];
}

bool WaitForState(pid_t pid, char state) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (StateOf(pid) != state) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

TEST(ProcessIdentity, AProcessWhoseMainThreadLeftLivesOnInItsOtherThreads) {
  const pid_t child = ForkChild([] {
    pthread_t worker;
    pthread_create(
        &worker, nullptr,
        [](void*) -> void* {
          for (;;) pause();
        },
        nullptr);
    // The first thread leaves alone (pthread_exit, without unwinding through
    // the test framework's frames): it becomes a zombie, the process runs on.
    syscall(SYS_exit, 0);
    return 0;
  });
  ASSERT_GT(child, 0);
  ASSERT_TRUE(WaitForState(child, 'Z'));
  const ProcessIdentity identity = IdentityOf(child);
  EXPECT_EQ(identity.pid, child);
  EXPECT_TRUE(IsAlive(identity));
  EXPECT_TRUE(StatusOf(identity).alive);
  kill(child, SIGKILL);
  EXPECT_EQ(WaitExitCode(child), 128 + SIGKILL);
  EXPECT_FALSE(IsAlive(identity));
  EXPECT_EQ(IdentityOf(child).pid, 0);
}

TEST(ProcessIdentity, AZombieWaitingForItsParentIsGone) {
  const pid_t child = ForkChild([] { return 0; });
  ASSERT_GT(child, 0);
  const ProcessIdentity identity = IdentityOf(child);
  ASSERT_TRUE(WaitForState(child, 'Z'));  // exited, not reaped yet
  // Under TSan the child has a second thread, which leaves a moment later.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (IsAlive(identity) && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_FALSE(IsAlive(identity));
  EXPECT_FALSE(StatusOf(identity).alive);
  EXPECT_EQ(IdentityOf(child).pid, 0);
  EXPECT_EQ(WaitExitCode(child), 0);
}

TEST(ProcessIdentity, AReusedPidIsAnotherProcess) {
  const ProcessIdentity self = SelfIdentity();
  EXPECT_TRUE(IsAlive(self));
  EXPECT_FALSE(IsAlive({self.pid, self.start_time + 1}));
  EXPECT_FALSE(StatusOf({self.pid, self.start_time + 1}).alive);
}

}  // namespace
}  // namespace prescient::cache
