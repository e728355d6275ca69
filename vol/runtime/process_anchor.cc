#include "vol/runtime/process_anchor.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <string>

namespace prescient::vol {
namespace {

std::atomic<std::int32_t> anchor_pid{0};
std::atomic<std::uint64_t> anchor_start_time{0};

constexpr const char* kKeeperName = "prescient-cache-keeper";

// Ancestors looked at, at most: a worker of a forkserver is two steps from
// the training process; the rest is slack for wrappers.
constexpr int kMaxAncestors = 8;

// /proc/<pid>/cmdline, up to 4 KiB (the part that holds the markers);
// empty when unreadable.
std::string CommandLineOf(std::int32_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out(4096, '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

}  // namespace

bool StartedByMultiprocessing(std::string_view cmdline) noexcept {
  bool after_dash_c = false;
  while (!cmdline.empty()) {
    const std::size_t end = cmdline.find('\0');
    const std::string_view arg = cmdline.substr(0, end);
    if (arg == "--multiprocessing-fork") return true;
    if (after_dash_c && (arg.find("from multiprocessing.spawn import spawn_main") != arg.npos ||
                         arg.find("from multiprocessing.forkserver import main") != arg.npos)) {
      return true;
    }
    after_dash_c = arg == "-c";
    if (end == std::string_view::npos) break;
    cmdline.remove_prefix(end + 1);
  }
  return false;
}

cache::ProcessIdentity SegmentAnchor() noexcept {
  try {
    cache::ProcessIdentity anchor = ProcessAnchor();
    for (int step = 0; step < kMaxAncestors; ++step) {
      if (!StartedByMultiprocessing(CommandLineOf(anchor.pid))) return anchor;
      const cache::ProcessIdentity parent = cache::ParentOf(anchor);
      // Gone, or adopted by init: keep what we have (a keeper for a process
      // that already exited would only exit at once). An orphan adopted by a
      // subreaper would take that for its training process; DataLoader
      // workers exit when their training process does, so that is brief.
      if (parent.pid <= 1) return anchor;
      anchor = parent;
    }
    return anchor;
  } catch (...) {  // std::bad_alloc: no keeper for another process, as before
    return ProcessAnchor();
  }
}

void RecordProcessAnchor() noexcept {
  if (anchor_pid.load() != 0) return;
  const cache::ProcessIdentity self = cache::SelfIdentity();
  anchor_start_time.store(self.start_time);
  anchor_pid.store(self.pid);
}

cache::ProcessIdentity ProcessAnchor() noexcept {
  const std::int32_t pid = anchor_pid.load();
  if (pid == 0) return cache::SelfIdentityCached();
  return {pid, anchor_start_time.load()};
}

std::string KeeperExecutable() {
  Dl_info self{};
  if (dladdr(reinterpret_cast<const void*>(&RecordProcessAnchor), &self) == 0 ||
      self.dli_fname == nullptr) {
    return {};
  }
  std::string dir = self.dli_fname;
  dir.erase(dir.find_last_of('/') + 1);
  for (const std::string& candidate : {dir + kKeeperName, dir + "../" + kKeeperName}) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

}  // namespace prescient::vol
