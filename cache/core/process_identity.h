// ProcessIdentity: a process named so that pid reuse cannot fool a liveness
// check. (pid, start time in clock ticks since boot) is unique for the life of
// the machine; a zombie (killed, not yet reaped) counts as dead, because it
// will never release anything it held.
#ifndef PRESCIENT_CACHE_CORE_PROCESS_IDENTITY_H_
#define PRESCIENT_CACHE_CORE_PROCESS_IDENTITY_H_

#include <cstdint>

namespace prescient::cache {

struct ProcessIdentity {
  std::int32_t pid = 0;          // 0 = nobody
  std::uint64_t start_time = 0;  // /proc/<pid>/stat field 22

  friend bool operator==(const ProcessIdentity&, const ProcessIdentity&) = default;
};

// The calling process (re-read after fork: no caching).
ProcessIdentity SelfIdentity() noexcept;

// SelfIdentity() read once per process (the start time costs a read of /proc),
// renewed in a forked child like CurrentPid().
ProcessIdentity SelfIdentityCached() noexcept;

// The process `pid` now; pid 0 when it does not exist (or has exited and
// waits for its reaper). A process lives while any of its threads does.
ProcessIdentity IdentityOf(std::int32_t pid) noexcept;

// The parent of `process` now (after its parent exited: the reaper that
// adopted it); pid 0 when `process` is gone or its pid names another process.
ProcessIdentity ParentOf(const ProcessIdentity& process) noexcept;

// getpid(), without a system call: the pid is kept in a MADV_WIPEONFORK page,
// which the kernel zeroes in a forked child, so the child reads its own pid on
// first use. (A pid cache refreshed by a pthread_atfork handler went stale
// when its first use, and so the handler's registration, happened inside
// another prepare handler of the same fork, which is exactly when the
// connector first opens the cache in a DataLoader's main process; the child
// then acted under its parent's identity.) Falls back to getpid() where the
// kernel lacks MADV_WIPEONFORK.
std::int32_t CurrentPid() noexcept;

// What a live process is doing, for telling a stuck peer from a busy one.
struct ProcessStatus {
  bool alive = false;           // as IsAlive
  bool stopped = false;         // SIGSTOP, a debugger stop, or ptrace ('T'/'t')
  std::uint64_t cpu_ticks = 0;  // user + system CPU time so far (clock ticks)
};
ProcessStatus StatusOf(const ProcessIdentity& process) noexcept;

// False when the process is gone, has exited (a zombie: all its threads are
// gone; a first thread that left with pthread_exit is not enough), or its pid
// now names another process. Needs /proc of the same pid namespace (true for
// all processes on a node that share /dev/shm, except across containers with
// private pid namespaces, which the README documents as unsupported).
bool IsAlive(const ProcessIdentity& process) noexcept;

}  // namespace prescient::cache

#endif  // PRESCIENT_CACHE_CORE_PROCESS_IDENTITY_H_
