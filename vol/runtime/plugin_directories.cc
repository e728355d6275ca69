#include "vol/runtime/plugin_directories.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "vol/hdf5_compat.h"
#include "vol/runtime/runtime.h"

namespace prescient::vol {
namespace {

std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : std::string();
}

// The directory of the libhdf5 this process's H5open lives in.
std::string RunningLibraryDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&H5open), &info) == 0 || info.dli_fname == nullptr)
    return {};
  const std::string library = RealPath(info.dli_fname);
  const std::size_t slash = library.rfind('/');
  return slash == std::string::npos ? std::string() : library.substr(0, slash);
}

std::vector<std::string> SearchedDirectories() {
  std::vector<std::string> searched;
  unsigned count = 0;
  if (H5PLsize(&count) < 0) return searched;
  for (unsigned i = 0; i < count; ++i) {
    char path[PATH_MAX];
    if (H5PLget(i, path, sizeof(path)) > 0) searched.push_back(RealPath(path));
  }
  return searched;
}

bool IsDirectory(const std::string& path) {
  struct stat st{};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void KeepOnce() {
#ifdef H5_DEFAULT_PLUGINDIR
  const std::string library_directory = RunningLibraryDirectory();
  if (library_directory.empty()) return;
  const std::vector<std::string> searched = SearchedDirectories();
  const std::string defaults = H5_DEFAULT_PLUGINDIR;
  for (std::size_t start = 0; start <= defaults.size();) {
    std::size_t end = defaults.find(':', start);
    if (end == std::string::npos) end = defaults.size();
    const std::string directory = RealPath(defaults.substr(start, end - start));
    start = end + 1;
    if (directory.empty() || !IsDirectory(directory)) continue;
    // Another libhdf5's default is not this one's (see the header).
    if (directory.rfind(library_directory + "/", 0) != 0) continue;
    bool present = false;
    for (const std::string& s : searched) present = present || s == directory;
    if (present) continue;
    if (H5PLappend(directory.c_str()) < 0) {
      H5Eclear2(H5E_DEFAULT);
      continue;
    }
    Runtime::Get().Log(LogLevel::kInfo,
                       "HDF5_PLUGIN_PATH replaced HDF5's plugin directory " + directory +
                           "; appended again so that its filter plugins stay available");
  }
#endif
}

}  // namespace

void KeepHdf5DefaultPluginDirectories() {
  static std::once_flag once;
  std::call_once(once, KeepOnce);
}

}  // namespace prescient::vol
