// Process-shared synchronisation that survives the death of a participant and
// any bytes written into it.
//
// SharedLock is a mutex in the segment whose lock word is the holder's
// identity (pid and start time packed in 64 bits, 0 when free), taken by one
// compare-and-swap, so the holder is named exactly from the instant it holds
// the lock. Waiters sleep on a separate 32-bit sequence word (FUTEX_WAIT, no
// spinning) and, every kOwnerCheckPeriod they wait, check the holder: if that
// process is gone, a zombie, or the word names no such process (garbage), the
// waiter takes the lock over by compare-and-swap and is told so (kRecovered):
// it must repair what the lock guards before using it. A live holder is never
// taken over (a stopped one makes waiters time out instead).
//
// Why not a robust pthread mutex (this project used one before): glibc links
// held robust mutexes into a per-thread list through pointers stored in the
// mutex itself and follows them on unlock, so bytes written into the segment
// while a process holds the lock send its unlock through wild pointers (the
// fuzz test did exactly that), and a corrupted lock word can make a robust
// mutex wait forever. Here every value read from the segment is only
// compared, never dereferenced.
//
// FutexWait/FutexWake block on a 32-bit word in shared memory (non-private
// futex) so waiters sleep instead of spinning and wake on change.
#ifndef PRESCIENT_CACHE_CORE_SHM_SYNC_H_
#define PRESCIENT_CACHE_CORE_SHM_SYNC_H_

#include <chrono>
#include <cstdint>

#include "cache/core/process_identity.h"

namespace prescient::cache::detail {

// Lives in the segment; all-zero is a free lock.
struct SharedLock {
  std::uint64_t holder;   // PackIdentity(holder), 0 when free
  std::uint32_t seq;      // futex word: bumped on every release
  std::uint32_t waiters;  // processes/threads asleep on seq (a hint: waits are bounded)
};

// How often a waiter checks that the holder still exists.
inline constexpr std::chrono::milliseconds kOwnerCheckPeriod{10};
// A holder stopped this long makes waiters give up at once instead of
// waiting for the whole timeout (it holds the lock for microseconds when
// running; stopped inside, it may stay stopped for hours). A process waits
// this long once per stopped holder: its later attempts give up at once
// while that holder still holds a lock and is still stopped.
inline constexpr std::chrono::milliseconds kStoppedHolderLimit{200};

enum class LockOutcome {
  kLocked,         // ordinary acquisition
  kRecovered,      // acquired from a holder that died (or a garbage holder word): repair first
  kTimedOut,       // not acquired within the timeout (a live holder is stuck)
  kHolderStopped,  // not acquired: the holder is stopped (SIGSTOP, debugger), seen for 200 ms
  kFailed,         // this process has no usable identity (/proc unreadable, pid out of range)
};

// Acquires `lock` for this process (any thread; not recursive).
LockOutcome AcquireSharedLock(SharedLock* lock, std::chrono::milliseconds timeout) noexcept;
// Releases it; wakes one waiter if any sleeps.
void ReleaseSharedLock(SharedLock* lock) noexcept;

// pid (22 bits) and start time (42 bits) in one word.
std::uint64_t PackIdentity(const ProcessIdentity& id) noexcept;
ProcessIdentity UnpackIdentity(std::uint64_t packed) noexcept;

// Sleeps while *word == expected, at most `timeout` (spurious wake-ups happen:
// callers re-check their condition).
void FutexWait(std::uint32_t* word, std::uint32_t expected,
               std::chrono::nanoseconds timeout) noexcept;

// Wakes every process and thread sleeping on `word`.
void FutexWakeAll(std::uint32_t* word) noexcept;

}  // namespace prescient::cache::detail

#endif  // PRESCIENT_CACHE_CORE_SHM_SYNC_H_
