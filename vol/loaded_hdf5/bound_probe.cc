// Linked into the unbound connector only: where its reference to H5open resolved, so the
// loader (bind.cc) can check that the connector's HDF5 is the process's.
#include "vol/hdf5_compat.h"

extern "C" __attribute__((visibility("default"))) const void* prescient_vol_bound_hdf5(void) {
  return reinterpret_cast<const void*>(&H5open);
}
