// The HDF5 headers the connector is written against, and the one place where
// the HDF5 versions it supports differ: 1.14.x and 2.x, serial or parallel.
//
// Both series implement VOL API version 3 (H5VL_VERSION), so the callback
// tables are the same; a future HDF5 with a changed callback ABI fails here, at
// compile time. What 2.0 changed in the public calls the connector makes is
// wrapped below, each with the version that changed it. The build side of the
// same differences (finding HDF5, MPI for a parallel HDF5) is hdf5_compat.cmake.
#ifndef PRESCIENT_VOL_HDF5_COMPAT_H_
#define PRESCIENT_VOL_HDF5_COMPAT_H_

#include <H5PLextern.h>
#include <H5VLconnector.h>
#include <H5VLconnector_passthru.h>
#include <H5VLnative.h>
#include <hdf5.h>

#include <cstddef>

static_assert(H5VL_VERSION == 3, "Prescient implements VOL API version 3 (HDF5 1.14 and 2.x)");
static_assert(H5_VERS_MAJOR > 1 || (H5_VERS_MAJOR == 1 && H5_VERS_MINOR >= 14),
              "Prescient needs HDF5 >= 1.14 (the VOL API of 1.14)");

namespace prescient::vol::hdf5 {

// A datatype from its H5Tencode form. HDF5 2.0 made H5Tdecode take the buffer's
// size (H5Tdecode2), so a truncated buffer is an error instead of a read past its end.
inline hid_t DecodeType(const void* buffer, size_t size) {
#if H5_VERSION_GE(2, 0, 0)
  return H5Tdecode2(buffer, size);
#else
  static_cast<void>(size);
  return H5Tdecode(buffer);
#endif
}

}  // namespace prescient::vol::hdf5

#endif  // PRESCIENT_VOL_HDF5_COMPAT_H_
