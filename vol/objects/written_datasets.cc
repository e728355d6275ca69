#include "vol/objects/written_datasets.h"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "cache/base/mutex.h"
#include "cache/base/thread_annotations.h"

namespace prescient::vol {
namespace {

using Token = std::array<std::uint8_t, H5O_MAX_TOKEN_SIZE>;

struct FileChanges {
  std::set<Token> datasets;
  // The latest status-change time the file had when a handle its changes
  // were made through was opened, or a read-only handle since.
  std::int64_t latest_ctime_ns = 0;
  // A writing handle's time was unknown: the changes are kept for good.
  bool time_unknown = false;
};

struct Registry {
  cache::Mutex mu;
  std::map<std::pair<std::uint64_t, std::uint64_t>, FileChanges> files GUARDED_BY(mu);
};

Registry& TheRegistry() {
  static auto* registry = new Registry;  // never destroyed: used until the process ends
  return *registry;
}

// A leaf lock (nothing is taken under it), held across fork() so that a child
// never inherits it held by a thread it does not have (the prefetch leader
// opens files too).
void LockBeforeFork() NO_THREAD_SAFETY_ANALYSIS { TheRegistry().mu.Lock(); }
void UnlockAfterFork() NO_THREAD_SAFETY_ANALYSIS { TheRegistry().mu.Unlock(); }

void LockAcrossFork() {
  static std::once_flag once;
  std::call_once(once,
                 [] { ::pthread_atfork(&LockBeforeFork, &UnlockAfterFork, &UnlockAfterFork); });
}

}  // namespace

std::atomic<std::uint32_t> WrittenDatasets::files_{0};

void WrittenDatasets::Note(const DatasetIdentity& identity) noexcept {
  try {
    LockAcrossFork();
    Registry& registry = TheRegistry();
    cache::MutexLock lock(&registry.mu);
    auto [it, fresh] = registry.files.try_emplace({identity.file_device, identity.file_inode});
    FileChanges& changes = it->second;
    changes.datasets.insert(identity.token);
    if (identity.file_ctime_ns == 0) {
      changes.time_unknown = true;
    } else {
      changes.latest_ctime_ns = std::max(changes.latest_ctime_ns, identity.file_ctime_ns);
    }
    if (fresh) files_.fetch_add(1, std::memory_order_release);
  } catch (...) {
    // Out of memory: the handle that wrote still knows (DatasetState::changed).
  }
}

bool WrittenDatasets::Contains(const DatasetIdentity& identity) noexcept {
  if (files_.load(std::memory_order_acquire) == 0) return false;
  Registry& registry = TheRegistry();
  cache::MutexLock lock(&registry.mu);
  const auto it = registry.files.find({identity.file_device, identity.file_inode});
  return it != registry.files.end() && it->second.datasets.count(identity.token) != 0;
}

std::optional<bool> WrittenDatasets::ChangedBefore(const FileIdentity& file) noexcept {
  Registry& registry = TheRegistry();
  cache::MutexLock lock(&registry.mu);
  const auto it = registry.files.find({file.device, file.inode});
  if (it == registry.files.end()) return std::nullopt;
  return !it->second.time_unknown && file.ctime_ns > it->second.latest_ctime_ns;
}

void WrittenDatasets::Settle(const FileIdentity& file, bool behind) noexcept {
  Registry& registry = TheRegistry();
  cache::MutexLock lock(&registry.mu);
  const auto it = registry.files.find({file.device, file.inode});
  if (it == registry.files.end()) return;
  FileChanges& changes = it->second;
  if (changes.time_unknown) return;
  if (!behind || file.ctime_ns <= changes.latest_ctime_ns) {
    changes.latest_ctime_ns = std::max(changes.latest_ctime_ns, file.ctime_ns);
    return;
  }
  registry.files.erase(it);
  files_.fetch_sub(1, std::memory_order_release);
}

}  // namespace prescient::vol
