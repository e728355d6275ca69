// The only symbols the plugin exports: HDF5's plugin loader finds the
// connector through these two functions (HDF5_PLUGIN_PATH).
#include "vol/hdf5_compat.h"
#include "vol/passthrough/callbacks.h"

extern "C" {

__attribute__((visibility("default"))) H5PL_type_t H5PLget_plugin_type(void) {
  return H5PL_TYPE_VOL;
}

__attribute__((visibility("default"))) const void* H5PLget_plugin_info(void) {
  return &prescient::vol::ConnectorClass();
}

}  // extern "C"
