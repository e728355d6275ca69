// Reading a dataspace selection out of HDF5 into a SelectionInput, and the
// memory-side checks that make a read "simple" (servable row by row).
#ifndef PRESCIENT_VOL_READ_SELECTION_HDF5_H_
#define PRESCIENT_VOL_READ_SELECTION_HDF5_H_

#include <optional>
#include <vector>

#include "vol/hdf5_compat.h"
#include "vol/read/selection.h"

namespace prescient::vol {

// The file selection of a read. `file_space` may be H5S_ALL, which means the
// whole dataset of extent `dataset_dims`. Returns nullopt for dataspace ids
// this code does not interpret (H5S_BLOCK / H5S_PLIST on the file side).
std::optional<SelectionInput> DescribeFileSelection(hid_t file_space,
                                                    const std::vector<hsize_t>& dataset_dims);

// True when the memory side of a read is one contiguous run of `elements`
// elements in selection order: H5S_BLOCK, or a dataspace whose selection is
// ALL and has that many elements. (H5S_ALL on the memory side means "shaped
// like the file selection", contiguous only when the file side is ALL too.)
bool MemoryIsContiguous(hid_t mem_space, hid_t file_space, std::uint64_t elements);

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_READ_SELECTION_HDF5_H_
