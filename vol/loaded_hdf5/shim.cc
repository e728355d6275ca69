// The plugin HDF5 finds on HDF5_PLUGIN_PATH in a process whose libhdf5 is not the one
// Prescient was linked against (a pip wheel's): it links no libhdf5 and loads the connector
// bound to whichever libhdf5 calls it (bind.h). It includes HDF5's headers for their types
// and version macros only.
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "vol/hdf5_compat.h"
#include "vol/loaded_hdf5/bind.h"

namespace {

std::string UnboundConnectorPath() {
  Dl_info self{};
  if (dladdr(reinterpret_cast<const void*>(&UnboundConnectorPath), &self) == 0 ||
      self.dli_fname == nullptr)
    return {};
  std::string path = self.dli_fname;
  return path.substr(0, path.find_last_of('/') + 1) + PRESCIENT_UNBOUND_RELATIVE_PATH;
}

// The bound connector, once HDF5 has asked for it (the follower's entry points below
// forward to it).
std::atomic<void*> g_connector{nullptr};

template <typename Fn>
Fn Forwarded(const char* name) {
  void* connector = g_connector.load(std::memory_order_acquire);
  return connector == nullptr ? nullptr : reinterpret_cast<Fn>(dlsym(connector, name));
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) H5PL_type_t H5PLget_plugin_type(void) {
  return H5PL_TYPE_VOL;
}

// HDF5 calls this from the libhdf5 that is loading plugins: the return address says which.
__attribute__((visibility("default"), noinline)) const void* H5PLget_plugin_info(void) {
  const void* caller = __builtin_extract_return_addr(__builtin_return_address(0));
  static std::once_flag once;
  static const void* info = nullptr;
  std::call_once(once, [caller] {
    prescient::vol::loaded_hdf5::BindResult result =
        prescient::vol::loaded_hdf5::LoadBoundConnector(caller, UnboundConnectorPath(),
                                                        PRESCIENT_HDF5_PLACEHOLDER, H5_VERS_MAJOR,
                                                        H5_VERS_MINOR);
    if (!result.error.empty()) {
      std::fprintf(stderr, "prescient: the connector cannot run in this process: %s\n",
                   result.error.c_str());
      return;
    }
    info = result.connector_info;
    g_connector.store(result.connector_handle, std::memory_order_release);
  });
  return info;
}

// The Python follower's entry points (vol/passthrough/follow_exports.cc): the bound connector
// is in an anonymous memory file the follower cannot open, so this plugin forwards them. 0 and
// "" until HDF5 has loaded the connector.
__attribute__((visibility("default"))) int prescient_follow_begin(void) {
  auto begin = Forwarded<int (*)()>("prescient_follow_begin");
  return begin == nullptr ? 0 : begin();
}

__attribute__((visibility("default"))) const char* prescient_follow_end(void) {
  auto end = Forwarded<const char* (*)()>("prescient_follow_end");
  return end == nullptr ? "" : end();
}

}  // extern "C"
