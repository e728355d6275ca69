// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with
// clang thread-safety annotations (libstdc++'s own types carry none, so clang
// could not check GUARDED_BY members locked through them).
//
//   Mutex mu_;
//   int pending_ GUARDED_BY(mu_) = 0;
//   CondVar done_;
//   ...
//   MutexLock lock(&mu_);
//   while (pending_ > 0) done_.Wait(&mu_);  // an explicit loop: clang cannot
//                                           // see into a predicate lambda
#ifndef PRESCIENT_CACHE_BASE_MUTEX_H_
#define PRESCIENT_CACHE_BASE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "cache/base/thread_annotations.h"

namespace prescient::cache {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // Tells the analysis the lock is held where it cannot see it.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for a scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable; every Wait on one CondVar must pass the same Mutex.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `mu` while asleep and holds it again on return; spurious
  // wake-ups happen: wait in a loop on the condition.
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held, by the caller
  }
  // Wait, for at most `timeout`.
  template <typename Rep, typename Period>
  void WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait_for(lock, timeout);
    lock.release();
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace prescient::cache

#endif  // PRESCIENT_CACHE_BASE_MUTEX_H_
