// Executors run the loader's tasks: InlineExecutor on the calling thread (for
// deterministic tests and for forked children without threads), ThreadPool
// on a fixed number of I/O threads. Callers take an Executor& so the choice
// is injected, as in tensorstore's util/executor.h.
//
// Fork: a ThreadPool starts its threads on the first Submit, so creating one
// costs nothing until it is used. A process that forks must not use the
// parent's pool in the child (its threads do not exist there): Submit returns
// false in the child, and the destructor there releases the pool's memory
// without joining. Create a new pool in the child instead.
#ifndef PRESCIENT_CACHE_IO_EXECUTOR_H_
#define PRESCIENT_CACHE_IO_EXECUTOR_H_

#include <functional>
#include <memory>

namespace prescient::cache::io {

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs `task` eventually, or returns false without running it (pool shut
  // down or used in a forked child). An exception escaping `task` is caught
  // and dropped: tasks report errors through their own channels.
  virtual bool Submit(std::function<void()> task) = 0;
};

class InlineExecutor final : public Executor {
 public:
  bool Submit(std::function<void()> task) override;
};

struct ThreadPoolOptions {
  // I/O threads (the VOL maps PRESCIENT_IO_THREADS here). 0 is treated as 1.
  unsigned threads = 2;
};

class ThreadPool final : public Executor {
 public:
  explicit ThreadPool(ThreadPoolOptions options = {});
  // Runs the queued tasks to completion, then joins the threads.
  ~ThreadPool() override;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  bool Submit(std::function<void()> task) override;
  unsigned threads() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_EXECUTOR_H_
