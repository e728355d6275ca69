#include "vol/schedule/task_group.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

namespace prescient::vol {
namespace {

TEST(TaskGroup, WaitReturnsWhenTasksThrow) {
  cache::io::ThreadPool pool({.threads = 2});
  std::atomic<int> ran{0};
  TaskGroup group(pool);
  for (int i = 0; i < 40; ++i) {
    group.Run([&, i] {
      ++ran;
      if (i % 3 == 0) throw std::runtime_error("a failing prefetch read");
    });
  }
  group.Wait();  // before the fix this blocked forever
  EXPECT_EQ(ran.load(), 40);
  EXPECT_EQ(group.failures(), 14u);
}

TEST(TaskGroup, RunsInlineWhenTheExecutorRefuses) {
  struct Refusing final : cache::io::Executor {
    bool Submit(std::function<void()>) override { return false; }
  } refusing;
  int ran = 0;
  TaskGroup group(refusing);
  group.Run([&] { ++ran; });
  group.Run([&] { throw 1; });
  group.Wait();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(group.failures(), 1u);
}

}  // namespace
}  // namespace prescient::vol
