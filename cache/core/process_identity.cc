#include "cache/core/process_identity.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace prescient::cache {
namespace {

struct StatLine {
  bool ok = false;
  char state = '?';
  std::int32_t parent = 0;      // ppid
  std::uint64_t cpu_ticks = 0;  // utime + stime
  std::uint64_t start_time = 0;
};

// Reads /proc/<pid>/<name> into `buf` (NUL-terminated; what fits in `size` -
// 1 bytes); false when it cannot be read. Plain read(2): no stdio
// allocation, safe in forked children.
bool ReadProcFile(std::int32_t pid, const char* name, char* buf, std::size_t size) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n;
  do {
    n = ::read(fd, buf, size - 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}

// Reads state (field 3), ppid (4), utime and stime (14, 15) and starttime (22)
// of /proc/<pid>/stat. The command name (field 2) may hold spaces and
// parentheses, so parse after the last ')'.
StatLine ReadStat(std::int32_t pid) {
  StatLine out;
  char buf[1024];
  if (!ReadProcFile(pid, "stat", buf, sizeof(buf))) return out;
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr || p[1] != ' ') return out;
  p += 2;
  out.state = *p;
  // After ')': field 3 is state; then one field per space.
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p, ' ');
    if (p == nullptr) return out;
    ++p;
    if (field + 1 == 4) out.parent = static_cast<std::int32_t>(std::strtol(p, nullptr, 10));
    if (field + 1 == 14 || field + 1 == 15) out.cpu_ticks += std::strtoull(p, nullptr, 10);
  }
  out.start_time = std::strtoull(p, nullptr, 10);
  out.ok = true;
  return out;
}

// The number of threads of `pid`'s thread group (the Threads: line of
// /proc/<pid>/status), 0 when it cannot be read.
std::uint32_t ThreadCount(std::int32_t pid) {
  char buf[4096];
  if (!ReadProcFile(pid, "status", buf, sizeof(buf))) return 0;
  const char* p = std::strstr(buf, "\nThreads:");
  if (p == nullptr) return 0;
  return static_cast<std::uint32_t>(std::strtoul(p + 9, nullptr, 10));
}

// Whether the process of `stat` has exited. A zombie first thread is not
// enough: a process whose main thread called pthread_exit lives on in its
// other threads (and a SIGKILLed one still holds its mappings until they are
// gone), so it has exited when it is the last thread of its group.
bool Exited(std::int32_t pid, const StatLine& stat) {
  if (stat.state == 'X' || stat.state == 'x') return true;
  return stat.state == 'Z' && ThreadCount(pid) <= 1;
}

// This process's pid and start time, kept in a page the kernel zeroes in a
// forked child (MADV_WIPEONFORK): a child re-reads its own identity on first
// use, whatever at-fork handlers ran and in which order. Null where the
// kernel lacks MADV_WIPEONFORK (then nothing is cached).
struct IdentityPage {
  std::int32_t pid;
  std::uint64_t start_time;
};

IdentityPage* WipeOnForkPage() {
  static IdentityPage* const page = []() -> IdentityPage* {
    void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
#ifdef MADV_WIPEONFORK
    if (::madvise(p, 4096, MADV_WIPEONFORK) == 0) return static_cast<IdentityPage*>(p);
#endif
    ::munmap(p, 4096);
    return nullptr;
  }();
  return page;
}

}  // namespace

std::int32_t CurrentPid() noexcept {
  IdentityPage* page = WipeOnForkPage();
  if (page == nullptr) return static_cast<std::int32_t>(::getpid());
  std::int32_t pid = __atomic_load_n(&page->pid, __ATOMIC_RELAXED);
  if (pid == 0) {
    pid = static_cast<std::int32_t>(::getpid());
    __atomic_store_n(&page->pid, pid, __ATOMIC_RELAXED);
  }
  return pid;
}

ProcessIdentity SelfIdentityCached() noexcept {
  IdentityPage* page = WipeOnForkPage();
  if (page == nullptr) return SelfIdentity();
  const std::int32_t pid = CurrentPid();
  std::uint64_t start = __atomic_load_n(&page->start_time, __ATOMIC_ACQUIRE);
  if (start == 0) {
    start = ReadStat(pid).start_time;
    __atomic_store_n(&page->start_time, start, __ATOMIC_RELEASE);
  }
  return {pid, start};
}

ProcessIdentity SelfIdentity() noexcept {
  ProcessIdentity self;
  self.pid = static_cast<std::int32_t>(::getpid());
  self.start_time = ReadStat(self.pid).start_time;
  return self;
}

ProcessIdentity IdentityOf(std::int32_t pid) noexcept {
  if (pid <= 0) return {};
  const StatLine stat = ReadStat(pid);
  if (!stat.ok || Exited(pid, stat)) return {};
  return {pid, stat.start_time};
}

ProcessIdentity ParentOf(const ProcessIdentity& process) noexcept {
  if (process.pid <= 0) return {};
  const StatLine stat = ReadStat(process.pid);
  if (!stat.ok || stat.start_time != process.start_time) return {};
  return IdentityOf(stat.parent);
}

ProcessStatus StatusOf(const ProcessIdentity& process) noexcept {
  ProcessStatus out;
  if (process.pid <= 0) return out;
  const StatLine stat = ReadStat(process.pid);
  if (!stat.ok || stat.start_time != process.start_time) return out;
  if (Exited(process.pid, stat)) return out;
  out.alive = true;
  out.stopped = stat.state == 'T' || stat.state == 't';
  out.cpu_ticks = stat.cpu_ticks;
  return out;
}

bool IsAlive(const ProcessIdentity& process) noexcept {
  if (process.pid <= 0) return false;
  const StatLine stat = ReadStat(process.pid);
  if (!stat.ok) return false;
  if (stat.start_time != process.start_time) return false;
  return !Exited(process.pid, stat);
}

}  // namespace prescient::cache
