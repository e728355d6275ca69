// Which process the node's segment is kept for: the command lines Python's
// multiprocessing gives the processes it starts, and the parent lookup the
// walk to the training process relies on. (End to end, with real spawned and
// forkserver DataLoader workers: tests/python/vol/test_vol_fork.py.)
#include "vol/runtime/process_anchor.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <string_view>

namespace prescient::vol {
namespace {

using namespace std::string_view_literals;

TEST(StartedByMultiprocessing, KnowsSpawnedChildrenAndForkservers) {
  // Python 3.13 and 3.14: spawn.get_command_line().
  EXPECT_TRUE(StartedByMultiprocessing(
      "/usr/bin/python3\0-c\0from multiprocessing.spawn import spawn_main; "
      "spawn_main(tracker_fd=5, pipe_handle=7)\0--multiprocessing-fork\0"sv));
  // A frozen executable's spawned child.
  EXPECT_TRUE(StartedByMultiprocessing("/opt/app/train\0--multiprocessing-fork\0tracker_fd=5\0"sv));
  // Python 3.13's forkserver (and every child it forks: they keep its command line).
  EXPECT_TRUE(
      StartedByMultiprocessing("/usr/bin/python3\0-c\0from multiprocessing.forkserver import main; "
                               "main(8, 9, ['__main__'], **{})\0"sv));
  // Python 3.14's forkserver: interpreter flags first, the parent's argv after the command.
  EXPECT_TRUE(StartedByMultiprocessing(
      "/usr/bin/python3.14\0-I\0-c\0import sys; from multiprocessing.forkserver import main; "
      "main(8, 9, [], sys_argv=sys.argv[1:], **{})\0train.py\0--epochs\0"sv));
}

TEST(StartedByMultiprocessing, LeavesOtherProcessesAlone) {
  EXPECT_FALSE(StartedByMultiprocessing("python3\0train.py\0--epochs\0003\0"sv));
  EXPECT_FALSE(StartedByMultiprocessing("torchrun\0--nproc-per-node\0002\0train.py\0"sv));
  // The marker as a script's data, not as the command of -c.
  EXPECT_FALSE(StartedByMultiprocessing(
      "python3\0train.py\0from multiprocessing.spawn import spawn_main\0"sv));
  EXPECT_FALSE(StartedByMultiprocessing(""sv));
  EXPECT_FALSE(StartedByMultiprocessing("-c"sv));
}

TEST(SegmentAnchor, IsThisProcessWhenNothingStartedItForAnother) {
  EXPECT_EQ(SegmentAnchor(), cache::SelfIdentity());
}

TEST(ParentOf, NamesTheParentWhileTheChildLives) {
  const cache::ProcessIdentity self = cache::SelfIdentity();
  int to_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(to_child[1]);
    char byte;
    (void)!read(to_child[0], &byte, 1);  // until the parent has looked
    _exit(0);
  }
  close(to_child[0]);
  const cache::ProcessIdentity identity = cache::IdentityOf(child);
  EXPECT_EQ(cache::ParentOf(identity), self);
  // A stale identity (another start time) names nobody's child.
  EXPECT_EQ(cache::ParentOf({identity.pid, identity.start_time + 1}).pid, 0);
  close(to_child[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(cache::ParentOf(identity).pid, 0);  // reaped: gone
}

}  // namespace
}  // namespace prescient::vol
