// Loading the connector against the libhdf5 that is already in the process.
//
// A pip wheel of h5py carries its own libhdf5 (renamed, e.g. libhdf5-8c29085d.so.310.5.1)
// and Python loads it privately (RTLD_LOCAL): a plugin linked against the system's libhdf5
// would bring a second HDF5 into the process, and a plugin with no libhdf5 dependency cannot
// see the wheel's symbols. So the connector is built a second time without a libhdf5
// dependency of its own ("unbound": its one DT_NEEDED entry is a long placeholder name), and
// this small plugin, which HDF5 finds on HDF5_PLUGIN_PATH, loads it when HDF5 asks for the
// connector: it finds the libhdf5 that is calling it, writes a copy of the unbound connector
// into an anonymous memory file with the placeholder replaced by that library's path, and
// opens the copy. The dynamic loader then resolves the connector's HDF5 symbols against
// exactly that library (already loaded: same file, so no second copy), and nothing is made
// global: other wheels that bundle their own HDF5 (netCDF4, PyTables) stay unaffected, which
// LD_PRELOAD or promoting the wheel's libhdf5 to RTLD_GLOBAL would not guarantee.
#ifndef PRESCIENT_VOL_LOADED_HDF5_BIND_H_
#define PRESCIENT_VOL_LOADED_HDF5_BIND_H_

#include <string>

namespace prescient::vol::loaded_hdf5 {

// What LoadBoundConnector found: the connector class (H5PLget_plugin_info's answer) or why
// there is none.
struct BindResult {
  const void* connector_info = nullptr;
  void* connector_handle = nullptr;  // dlopen's handle of the bound connector
  std::string hdf5_path;             // the libhdf5 that loads the plugin
  std::string error;                 // empty on success
};

// caller_address: an address inside the libhdf5 that called the plugin's entry point.
// unbound_path: the unbound connector (built with placeholder as its libhdf5 dependency).
// built_major/built_minor: the HDF5 series the connector was compiled for.
BindResult LoadBoundConnector(const void* caller_address, const std::string& unbound_path,
                              const std::string& placeholder, unsigned built_major,
                              unsigned built_minor);

// Replaces the one occurrence of placeholder in image with replacement (NUL-padded to the
// placeholder's length). Returns false when placeholder does not occur exactly once or the
// replacement does not fit. Pure; unit-tested.
bool ReplacePlaceholder(std::string& image, const std::string& placeholder,
                        const std::string& replacement);

}  // namespace prescient::vol::loaded_hdf5

#endif  // PRESCIENT_VOL_LOADED_HDF5_BIND_H_
