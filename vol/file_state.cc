#include "vol/file_state.h"

#include <sys/stat.h>

namespace prescient::vol {

FileIdentity IdentifyFile(const std::string& path) {
  FileIdentity id;
  struct stat st{};
  if (path.empty() || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return id;
  id.valid = true;
  id.device = static_cast<std::uint64_t>(st.st_dev);
  id.inode = static_cast<std::uint64_t>(st.st_ino);
  id.size = static_cast<std::uint64_t>(st.st_size);
  id.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return id;
}

std::shared_ptr<FileState> FileState::Make(const char* name, bool writable, bool posix_driver) {
  auto state = std::make_shared<FileState>();
  state->name = name ? name : "";
  state->writable = writable;
  state->posix_driver = posix_driver;
  state->identity = IdentifyFile(state->name);
  return state;
}

}  // namespace prescient::vol
