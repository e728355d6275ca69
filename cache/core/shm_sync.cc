#include "cache/core/shm_sync.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <optional>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PRESCIENT_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define PRESCIENT_TSAN 1
#endif
#ifdef PRESCIENT_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace prescient::cache::detail {
namespace {

constexpr int kPidBits = 22;  // pid_max is at most 2^22
constexpr std::uint64_t kStartMask = (std::uint64_t{1} << (64 - kPidBits)) - 1;

std::atomic_ref<std::uint64_t> Holder(SharedLock* lock) {
  return std::atomic_ref<std::uint64_t>(lock->holder);
}
std::atomic_ref<std::uint32_t> Seq(SharedLock* lock) {
  return std::atomic_ref<std::uint32_t>(lock->seq);
}
std::atomic_ref<std::uint32_t> Waiters(SharedLock* lock) {
  return std::atomic_ref<std::uint32_t>(lock->waiters);
}

void Acquired([[maybe_unused]] SharedLock* lock) {
#ifdef PRESCIENT_TSAN
  __tsan_mutex_post_lock(lock, 0, 0);
#endif
}

LockOutcome NotAcquired([[maybe_unused]] SharedLock* lock, LockOutcome outcome) {
#ifdef PRESCIENT_TSAN
  __tsan_mutex_post_lock(lock, __tsan_mutex_try_lock_failed, 0);
#endif
  return outcome;
}

// The last holder this process found stopped inside a lock (packed identity,
// 0 for none). Telling a stopped holder from a busy one takes
// kStoppedHolderLimit; a process that already waited that long for this
// holder does not wait again while the holder is still stopped, or every call
// of a training loop would (one agent stopped inside the lock made each read
// of its node wait 0.4 s). Process-wide, not per lock: an identity names one
// process, and the holder's state is checked again on every use.
std::atomic<std::uint64_t> known_stopped_holder{0};

// Is `holder` (a word a failed attempt read) the holder already found
// stopped, and still stopped?
bool StillTheStoppedHolder(std::uint64_t holder) noexcept {
  return holder != 0 && holder == known_stopped_holder.load(std::memory_order_relaxed) &&
         StatusOf(UnpackIdentity(holder)).stopped;
}

}  // namespace

std::uint64_t PackIdentity(const ProcessIdentity& id) noexcept {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(id.pid)) << (64 - kPidBits) |
         (id.start_time & kStartMask);
}

ProcessIdentity UnpackIdentity(std::uint64_t packed) noexcept {
  return {static_cast<std::int32_t>(packed >> (64 - kPidBits)), packed & kStartMask};
}

LockOutcome AcquireSharedLock(SharedLock* lock, std::chrono::milliseconds timeout) noexcept {
  const ProcessIdentity self = SelfIdentityCached();
  if (self.pid <= 0 || static_cast<std::uint64_t>(self.pid) >> kPidBits != 0 ||
      self.start_time == 0) {
    return LockOutcome::kFailed;
  }
  const std::uint64_t me = PackIdentity(self);
#ifdef PRESCIENT_TSAN
  __tsan_mutex_pre_lock(lock, 0);
#endif
  std::uint64_t seen = 0;
  if (Holder(lock).compare_exchange_strong(seen, me, std::memory_order_acquire)) {
    Acquired(lock);
    return LockOutcome::kLocked;
  }
  if (StillTheStoppedHolder(seen)) return NotAcquired(lock, LockOutcome::kHolderStopped);
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  std::uint64_t watched = seen;
  auto watched_since = Clock::now();
  std::optional<Clock::time_point> stopped_since;
  for (;;) {
    std::uint64_t h = Holder(lock).load(std::memory_order_relaxed);
    if (h == 0) {
      if (Holder(lock).compare_exchange_strong(h, me, std::memory_order_acquire)) {
        Acquired(lock);
        return LockOutcome::kLocked;
      }
      continue;
    }
    const auto now = Clock::now();
    if (h != watched) {
      watched = h;
      watched_since = now;
    }
    // The same holder for a check period: is it still there? (A holder that
    // is alive, even stopped, is never taken over.)
    if (now - watched_since >= kOwnerCheckPeriod) {
      const ProcessStatus holder = StatusOf(UnpackIdentity(h));
      if (!holder.alive) {
        if (Holder(lock).compare_exchange_strong(h, me, std::memory_order_acquire)) {
          Acquired(lock);
          return LockOutcome::kRecovered;
        }
        continue;  // someone else took it: watch the new holder
      }
      if (!holder.stopped) {
        stopped_since.reset();
      } else if (!stopped_since) {
        stopped_since = now;
      } else if (now - *stopped_since >= kStoppedHolderLimit) {
        known_stopped_holder.store(h, std::memory_order_relaxed);
        return NotAcquired(lock, LockOutcome::kHolderStopped);
      }
      watched_since = now;
    }
    if (now >= deadline) return NotAcquired(lock, LockOutcome::kTimedOut);
    // Sleep until a release bumps seq (or a check period passes). Announced
    // before re-checking the holder, so a release in between either sees us
    // waiting or is seen by the re-check (both sequentially consistent).
    Waiters(lock).fetch_add(1);
    const std::uint32_t s = Seq(lock).load();
    if (Holder(lock).load() == h) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
      FutexWait(&lock->seq, s,
                std::max(std::chrono::milliseconds(1), std::min(left, kOwnerCheckPeriod)));
    }
    Waiters(lock).fetch_sub(1);
  }
}

void ReleaseSharedLock(SharedLock* lock) noexcept {
#ifdef PRESCIENT_TSAN
  __tsan_mutex_pre_unlock(lock, 0);
#endif
  Holder(lock).store(0);
  Seq(lock).fetch_add(1);
  if (Waiters(lock).load() != 0) {
    syscall(SYS_futex, &lock->seq, FUTEX_WAKE, 1, nullptr, nullptr, 0);
  }
#ifdef PRESCIENT_TSAN
  __tsan_mutex_post_unlock(lock, 0);
#endif
}

void FutexWait(std::uint32_t* word, std::uint32_t expected,
               std::chrono::nanoseconds timeout) noexcept {
  timespec relative{};
  relative.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
  relative.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
  // Returns on wake, timeout, EAGAIN (word already changed) or a signal: all
  // mean "re-check".
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &relative, nullptr, 0);
}

void FutexWakeAll(std::uint32_t* word) noexcept {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace prescient::cache::detail
