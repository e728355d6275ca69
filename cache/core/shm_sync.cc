#include "cache/core/shm_sync.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PRESCIENT_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define PRESCIENT_TSAN 1
#endif

namespace prescient::cache::detail {
namespace {

#ifdef PRESCIENT_TSAN
// ThreadSanitizer's pthread_mutex_timedlock interceptor ignores EOWNERDEAD
// (its lock and trylock interceptors handle it), so a recovered lock would
// look unowned to it. Under TSan only, wait by polling trylock instead.
int TimedLock(pthread_mutex_t* mutex, std::chrono::milliseconds timeout) {
  const timespec pause{0, 200000};
  for (auto waited = std::chrono::microseconds(0); waited < timeout;
       waited += std::chrono::microseconds(200)) {
    const int rc = pthread_mutex_trylock(mutex);
    if (rc != EBUSY) return rc;
    nanosleep(&pause, nullptr);
  }
  return ETIMEDOUT;
}
#else
int TimedLock(pthread_mutex_t* mutex, std::chrono::milliseconds timeout) {
  // timedlock takes CLOCK_REALTIME; a clock jump only stretches or shortens
  // the (generous) timeout.
  timespec deadline{};
  clock_gettime(CLOCK_REALTIME, &deadline);
  const auto ms = timeout.count();
  deadline.tv_sec += static_cast<time_t>(ms / 1000);
  deadline.tv_nsec += static_cast<long>((ms % 1000) * 1000000);
  if (deadline.tv_nsec >= 1000000000) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000;
  }
  int rc;
  do {
    rc = pthread_mutex_timedlock(mutex, &deadline);
  } while (rc == EINTR);
  return rc;
}
#endif

}  // namespace

int InitRobustMutex(pthread_mutex_t* mutex) noexcept {
  pthread_mutexattr_t attr;
  int rc = pthread_mutexattr_init(&attr);
  if (rc != 0) return rc;
  rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  if (rc == 0) rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  // Error checking makes a relock by the owner fail instead of deadlocking.
  if (rc == 0) rc = pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
  if (rc == 0) rc = pthread_mutex_init(mutex, &attr);
  pthread_mutexattr_destroy(&attr);
  return rc;
}

LockOutcome LockRobust(pthread_mutex_t* mutex, std::chrono::milliseconds timeout) noexcept {
  int rc = pthread_mutex_trylock(mutex);
  if (rc == EBUSY) rc = TimedLock(mutex, timeout);
  switch (rc) {
    case 0:
      return LockOutcome::kLocked;
    case EOWNERDEAD:
      return LockOutcome::kRecovered;
    case ETIMEDOUT:
      return LockOutcome::kTimedOut;
    default:
      return LockOutcome::kFailed;
  }
}

void MarkConsistent(pthread_mutex_t* mutex) noexcept { pthread_mutex_consistent(mutex); }

void UnlockRobust(pthread_mutex_t* mutex) noexcept { pthread_mutex_unlock(mutex); }

void FutexWait(std::uint32_t* word, std::uint32_t expected,
               std::chrono::milliseconds timeout) noexcept {
  timespec relative{};
  relative.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  relative.tv_nsec = static_cast<long>((timeout.count() % 1000) * 1000000);
  // Returns on wake, timeout, EAGAIN (word already changed) or a signal: all
  // mean "re-check".
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &relative, nullptr, 0);
}

void FutexWakeAll(std::uint32_t* word) noexcept {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace prescient::cache::detail
