// The HDF5 headers the connector is written against, and the check that they
// are the VOL API this code implements (HDF5 1.14: H5VL_VERSION 3). A newer
// HDF5 with a changed callback ABI fails here, at compile time, in one place.
#ifndef PRESCIENT_VOL_HDF5_COMPAT_H_
#define PRESCIENT_VOL_HDF5_COMPAT_H_

#include <H5PLextern.h>
#include <H5VLconnector.h>
#include <H5VLconnector_passthru.h>
#include <H5VLnative.h>
#include <hdf5.h>

static_assert(H5VL_VERSION == 3, "Prescient implements the HDF5 1.14 VOL API (H5VL_VERSION 3)");

#endif  // PRESCIENT_VOL_HDF5_COMPAT_H_
