#include "vol/objects/file_state.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <utility>

#include "cache/base/mutex.h"

namespace prescient::vol {

FileIdentity IdentifyFile(const std::string& path) {
  struct stat st{};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return {};
  return IdentityOf(st);
}

FileIdentity IdentityOf(const struct stat& st) {
  FileIdentity id;
  if (!S_ISREG(st.st_mode)) return id;
  id.valid = true;
  id.device = static_cast<std::uint64_t>(st.st_dev);
  id.inode = static_cast<std::uint64_t>(st.st_ino);
  id.size = static_cast<std::uint64_t>(st.st_size);
  id.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.ctime_ns = static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return id;
}

std::shared_ptr<FileState> FileState::Make(const char* name, bool writable, bool posix_driver,
                                           int hdf5_fd) {
  auto state = std::make_shared<FileState>();
  state->name = name ? name : "";
  state->writable = writable;
  state->posix_driver = posix_driver;
  struct stat st{};
  if (hdf5_fd >= 0 && ::fstat(hdf5_fd, &st) == 0) {
    state->identity = IdentityOf(st);
    if (state->identity.valid)
      state->hdf5_file = cache::io::PosixFile::Borrow(hdf5_fd, state->name);
  } else {
    state->identity = IdentifyFile(state->name);
  }
  state->identified_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  state->open_since_realtime_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count();
  return state;
}

namespace {

cache::Mutex g_open_files_mutex;
std::map<std::pair<std::uint64_t, std::uint64_t>, std::weak_ptr<FileState>>& OpenFileMap() {
  static auto* map =
      new std::map<std::pair<std::uint64_t, std::uint64_t>, std::weak_ptr<FileState>>;
  return *map;
}

}  // namespace

void OpenFiles::Remember(const std::shared_ptr<FileState>& file) {
  if (!file || !file->identity.valid) return;
  cache::MutexLock lock(&g_open_files_mutex);
  auto& map = OpenFileMap();
  for (auto it = map.begin(); it != map.end();)
    it = it->second.expired() ? map.erase(it) : std::next(it);
  std::weak_ptr<FileState>& slot = map[{file->identity.device, file->identity.inode}];
  if (const std::shared_ptr<FileState> earlier = slot.lock(); earlier && earlier != file) {
    file->open_since_realtime_ns =
        std::min(file->open_since_realtime_ns, earlier->open_since_realtime_ns);
  }
  slot = file;
}

std::shared_ptr<FileState> OpenFiles::Find(const FileIdentity& identity) {
  cache::MutexLock lock(&g_open_files_mutex);
  auto it = OpenFileMap().find({identity.device, identity.inode});
  return it == OpenFileMap().end() ? nullptr : it->second.lock();
}

}  // namespace prescient::vol
