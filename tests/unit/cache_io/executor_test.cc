#include "cache/io/executor.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#if defined(__SANITIZE_THREAD__)
#define PRESCIENT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PRESCIENT_TSAN 1
#endif
#endif

namespace prescient::cache::io {
namespace {

TEST(InlineExecutorTest, RunsNowAndSwallowsExceptions) {
  InlineExecutor executor;
  int runs = 0;
  EXPECT_TRUE(executor.Submit([&] { ++runs; }));
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(executor.Submit([] { throw 42; }));
}

TEST(ThreadPoolTest, RunsEveryTaskBeforeDestruction) {
  std::atomic<int> runs{0};
  {
    ThreadPool pool({.threads = 4});
    EXPECT_EQ(pool.threads(), 4u);
    for (int i = 0; i < 1000; ++i) ASSERT_TRUE(pool.Submit([&] { runs.fetch_add(1); }));
  }
  EXPECT_EQ(runs.load(), 1000);
}

TEST(ThreadPoolTest, UsesSeveralThreads) {
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> arrived{0};
  {
    ThreadPool pool({.threads = 3});
    for (int i = 0; i < 3; ++i) {
      pool.Submit([&] {
        {
          std::lock_guard lock(mu);
          ids.insert(std::this_thread::get_id());
        }
        // Hold every thread until all three tasks run at once.
        arrived.fetch_add(1);
        while (arrived.load() < 3) std::this_thread::yield();
      });
    }
  }
  EXPECT_EQ(ids.size(), 3u);
}

TEST(ThreadPoolTest, ThrowingTasksDoNotKillWorkers) {
  std::atomic<int> runs{0};
  {
    ThreadPool pool({.threads = 1});
    pool.Submit([] { throw std::runtime_error("task failure"); });
    pool.Submit([&] { runs.fetch_add(1); });
  }
  EXPECT_EQ(runs.load(), 1);
}

TEST(ThreadPoolTest, ZeroThreadsMeansOne) {
  ThreadPool pool({.threads = 0});
  EXPECT_EQ(pool.threads(), 1u);
}

TEST(ThreadPoolTest, ForkedChildRefusesParentPoolAndCanMakeItsOwn) {
  ThreadPool parent_pool({.threads = 2});
  std::atomic<int> runs{0};
  parent_pool.Submit([&] { runs.fetch_add(1); });  // threads now exist in the parent
  // Fork once the workers are idle again: a fork that catches a thread inside
  // the allocator (freeing the task it just ran) leaves the allocator's lock
  // held in the child under GCC's AddressSanitizer, whose allocator, unlike
  // glibc's malloc, is not made fork-safe, and the child's first allocation
  // then hangs. What this test checks is the child's view of the pool.
  while (runs.load() == 0) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: only this thread exists. The inherited pool must refuse work, a
    // new pool must work, and leaving the scope must not hang on join.
    int code = 0;
    if (parent_pool.Submit([] {})) code |= 1;
#ifndef PRESCIENT_TSAN  // TSan cannot start threads after a multi-threaded fork
    std::atomic<int> child_runs{0};
    {
      ThreadPool child_pool({.threads = 2});
      for (int i = 0; i < 10; ++i) child_pool.Submit([&] { child_runs.fetch_add(1); });
    }
    if (child_runs.load() != 10) code |= 2;
#endif
    parent_pool.~ThreadPool();  // runs the child-side destructor path
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace prescient::cache::io
