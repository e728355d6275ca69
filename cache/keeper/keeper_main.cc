// prescient-cache-keeper: holds a node's cache segment while an anchor process
// lives (see cache/core/segment_keeper.h for why).
//
//   prescient-cache-keeper <anchor pid> <anchor start time> <registry path>
//
// Descriptor 3 is the segment. The keeper maps nothing and reads nothing of
// it; it waits for the anchor to exit (a pidfd where the kernel has one,
// else a check every second) and checks every few seconds that the registry
// still names its segment (a job that replaced the segment, e.g. with another
// size, must not find the old one held until its anchor exits). When the
// anchor has exited and nobody else holds the segment, it removes the registry
// too: the workers that opened the cache ended without closing it, so nobody
// else would, and a file per job would pile up in the user's directory. It
// exits 0 in either case, and 2 on bad arguments.
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cache/core/process_identity.h"
#include "cache/core/segment_keeper.h"
#include "cache/core/segment_registry.h"

namespace {

using prescient::cache::IsAlive;
using prescient::cache::ProcessIdentity;
using prescient::cache::detail::kKeeperSegmentFd;
using prescient::cache::detail::SegmentRegistry;

constexpr int kPollMs = 1000;
constexpr int kRegistryCheckEvery = 5;  // polls
constexpr std::chrono::milliseconds kRegistryLockTimeout{2000};

void CloseAllBut(int keep_up_to) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, keep_up_to + 1, ~0U, 0) == 0) return;
#endif
  const long max = sysconf(_SC_OPEN_MAX);
  for (long fd = keep_up_to + 1; fd < (max > 0 ? max : 1024); ++fd) close(static_cast<int>(fd));
}

// A descriptor that becomes readable when `pid` exits, or -1.
int OpenPidfd(std::int32_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

bool ParseNumber(const char* text, std::uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  *out = std::strtoull(text, &end, 10);
  return errno == 0 && end != text && *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
  CloseAllBut(kKeeperSegmentFd);
  std::uint64_t pid = 0, start = 0;
  struct stat segment{};
  if (argc != 4 || !ParseNumber(argv[1], &pid) || !ParseNumber(argv[2], &start) || pid == 0 ||
      fstat(kKeeperSegmentFd, &segment) != 0) {
    return 2;
  }
  const ProcessIdentity anchor{static_cast<std::int32_t>(pid), start};
  const std::string registry = argv[3];
  auto anchor_exited = [&] {
    SegmentRegistry::RemoveIfAbandoned(registry, segment.st_dev, segment.st_ino,
                                       prescient::cache::SelfIdentity(), kRegistryLockTimeout);
    return 0;
  };
  // The pidfd is opened after the identity check below succeeds once, so a
  // reused pid cannot be waited on.
  if (!IsAlive(anchor)) return anchor_exited();
  const int pidfd = OpenPidfd(anchor.pid);
  for (int round = 1;; ++round) {
    if (pidfd >= 0) {
      struct pollfd p{pidfd, POLLIN, 0};
      if (poll(&p, 1, kPollMs) > 0) return anchor_exited();
    } else {
      sleep(1);
    }
    if (!IsAlive(anchor)) return anchor_exited();
    if (round % kRegistryCheckEvery == 0 &&
        !SegmentRegistry::StillNames(registry, segment.st_dev, segment.st_ino)) {
      return 0;
    }
  }
}
