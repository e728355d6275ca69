#include "vol/loaded_hdf5/bind.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace prescient::vol::loaded_hdf5 {
namespace {

std::string DlError() {
  const char* message = dlerror();
  return message ? message : "unknown dynamic loader error";
}

bool ReadFile(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  out = buffer.str();
  return static_cast<bool>(in) || in.eof();
}

// Writes image to an anonymous memory file; returns its descriptor or -1 (errno set).
int MemoryFile(const std::string& image) {
  int fd = memfd_create("prescient-vol-bound", MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < image.size()) {
    ssize_t n = write(fd, image.data() + done, image.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int saved = errno;
      close(fd);
      errno = saved;
      return -1;
    }
    done += static_cast<size_t>(n);
  }
  return fd;
}

}  // namespace

bool ReplacePlaceholder(std::string& image, const std::string& placeholder,
                        const std::string& replacement) {
  if (placeholder.empty() || replacement.size() >= placeholder.size()) return false;
  size_t at = image.find(placeholder);
  if (at == std::string::npos || image.find(placeholder, at + 1) != std::string::npos) return false;
  image.replace(at, placeholder.size(),
                replacement + std::string(placeholder.size() - replacement.size(), '\0'));
  return true;
}

BindResult LoadBoundConnector(const void* caller_address, const std::string& unbound_path,
                              const std::string& placeholder, unsigned built_major,
                              unsigned built_minor) {
  BindResult result;
  Dl_info caller{};
  if (dladdr(caller_address, &caller) == 0 || caller.dli_fname == nullptr ||
      caller.dli_fname[0] == '\0') {
    result.error = "cannot tell which libhdf5 is loading the plugin";
    return result;
  }
  result.hdf5_path = caller.dli_fname;

  // The caller must be a libhdf5 of the series the connector was compiled for: the VOL
  // callback structures are those of its headers. RTLD_NOLOAD only looks the library up.
  void* hdf5 = dlopen(caller.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (hdf5 == nullptr) {
    result.error = "cannot look up " + result.hdf5_path + ": " + DlError();
    return result;
  }
  using VersionFn = int (*)(unsigned*, unsigned*, unsigned*);
  auto version = reinterpret_cast<VersionFn>(dlsym(hdf5, "H5get_libversion"));
  unsigned major = 0, minor = 0, release = 0;
  if (version == nullptr || version(&major, &minor, &release) < 0) {
    dlclose(hdf5);
    result.error = result.hdf5_path + " is not a libhdf5 (no H5get_libversion)";
    return result;
  }
  dlclose(hdf5);
  if (major != built_major || minor != built_minor) {
    std::ostringstream message;
    message << "the process's HDF5 is " << major << "." << minor << "." << release << " ("
            << result.hdf5_path << ") but this plugin was built for HDF5 " << built_major << "."
            << built_minor << ".x: build Prescient against HDF5 " << major << "." << minor;
    result.error = message.str();
    return result;
  }

  std::string image;
  if (!ReadFile(unbound_path, image)) {
    result.error = "cannot read the connector " + unbound_path + ": " + std::strerror(errno);
    return result;
  }
  if (!ReplacePlaceholder(image, placeholder, result.hdf5_path)) {
    result.error = "cannot bind " + unbound_path + " to " + result.hdf5_path +
                   " (no single placeholder, or a path longer than " +
                   std::to_string(placeholder.size() - 1) + " characters)";
    return result;
  }
  int fd = MemoryFile(image);
  if (fd < 0) {
    result.error =
        std::string("cannot create a memory file for the connector: ") + std::strerror(errno);
    return result;
  }
  // The loader opens the placeholder's replacement, finds it is the libhdf5 already mapped
  // (same device and inode) and binds the connector's HDF5 symbols to it.
  std::string fd_path = "/proc/self/fd/" + std::to_string(fd);
  void* connector = dlopen(fd_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  close(fd);  // the mapping keeps the memory file alive
  if (connector == nullptr) {
    result.error = "cannot load the connector bound to " + result.hdf5_path + ": " + DlError();
    return result;
  }

  // Proof that the binding took: the connector's own reference to H5open lies in the caller.
  using ProbeFn = const void* (*)();
  auto probe = reinterpret_cast<ProbeFn>(dlsym(connector, "prescient_vol_bound_hdf5"));
  Dl_info bound{};
  if (probe == nullptr || dladdr(probe(), &bound) == 0 || bound.dli_fbase != caller.dli_fbase) {
    result.error = "the connector did not bind to " + result.hdf5_path +
                   " (its HDF5 calls resolve to " +
                   (bound.dli_fname ? bound.dli_fname : "nothing") + ")";
    return result;  // leave it loaded: its constructors ran; unloading gains nothing
  }
  result.connector_handle = connector;
  using InfoFn = const void* (*)();
  auto info = reinterpret_cast<InfoFn>(dlsym(connector, "H5PLget_plugin_info"));
  if (info == nullptr) {
    result.error = "the connector has no H5PLget_plugin_info";
    return result;
  }
  result.connector_info = info();
  return result;
}

}  // namespace prescient::vol::loaded_hdf5
