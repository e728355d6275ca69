// Process-shared synchronisation that survives the death of a participant.
//
// RobustMutex wraps a pthread mutex with PTHREAD_PROCESS_SHARED and
// PTHREAD_MUTEX_ROBUST living in the segment: when its owner dies, the next
// locker is told (kRecovered) and must repair the state it guards before
// using it. (Boost.Interprocess mutexes are not robust to owner death.)
//
// FutexWait/FutexWake block on a 32-bit word in shared memory (non-private
// futex) so waiters sleep instead of spinning and wake on change.
#ifndef PRESCIENT_CACHE_CORE_SHM_SYNC_H_
#define PRESCIENT_CACHE_CORE_SHM_SYNC_H_

#include <pthread.h>

#include <chrono>
#include <cstdint>

namespace prescient::cache::detail {

// REQUIRES: `mutex` is zeroed memory inside the shared mapping. Returns errno.
int InitRobustMutex(pthread_mutex_t* mutex) noexcept;

enum class LockOutcome {
  kLocked,     // ordinary acquisition
  kRecovered,  // acquired; the previous owner died inside its critical section
  kTimedOut,   // not acquired within the timeout
  kFailed,     // not acquired: unrecoverable mutex or another error
};

LockOutcome LockRobust(pthread_mutex_t* mutex, std::chrono::milliseconds timeout) noexcept;

// After kRecovered and a successful repair: mark the mutex usable again.
void MarkConsistent(pthread_mutex_t* mutex) noexcept;

void UnlockRobust(pthread_mutex_t* mutex) noexcept;

// Sleeps while *word == expected, at most `timeout` (spurious wake-ups happen:
// callers re-check their condition).
void FutexWait(std::uint32_t* word, std::uint32_t expected,
               std::chrono::milliseconds timeout) noexcept;

// Wakes every process and thread sleeping on `word`.
void FutexWakeAll(std::uint32_t* word) noexcept;

}  // namespace prescient::cache::detail

#endif  // PRESCIENT_CACHE_CORE_SHM_SYNC_H_
