#include "vol/runtime/process_anchor.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <string>

namespace prescient::vol {
namespace {

std::atomic<std::int32_t> anchor_pid{0};
std::atomic<std::uint64_t> anchor_start_time{0};

constexpr const char* kKeeperName = "prescient-cache-keeper";

}  // namespace

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
