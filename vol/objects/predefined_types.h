// HDF5's predefined numeric types (H5T_NATIVE_*, H5T_STD_*, H5T_IEEE_*).
//
// h5py reads with a predefined memory type (H5T_NATIVE_FLOAT for `<f4`). These
// types are immutable, so whether one equals a dataset's stored type never
// changes: it is decided once per dataset and type instead of with a dozen
// H5Tget_* calls (each a locked library entry) on every read.
#ifndef PRESCIENT_VOL_OBJECTS_PREDEFINED_TYPES_H_
#define PRESCIENT_VOL_OBJECTS_PREDEFINED_TYPES_H_

#include <vector>

#include "vol/hdf5_compat.h"

namespace prescient::vol {

// How many predefined types PredefinedTypeIndex knows.
inline constexpr int kPredefinedTypes = 40;

// The index (0 .. kPredefinedTypes - 1) of `type` among the predefined types
// of the library as it is now (the ids are read from its globals each time,
// so a library closed and reopened cannot leave stale ids behind), or -1.
// No library call.
int PredefinedTypeIndex(hid_t type) noexcept;
// The library's id of predefined type `index` (0 .. kPredefinedTypes - 1).
hid_t PredefinedTypeId(int index) noexcept;

// The index of a predefined type equal (H5Tequal) to the type encoded in
// `encoded` (H5Tencode's bytes), or -1. Decided once per process and encoding.
int EquivalentPredefinedType(const std::vector<unsigned char>& encoded);

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_OBJECTS_PREDEFINED_TYPES_H_
