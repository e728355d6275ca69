// Whether a read's dataset transfer property list lets the cache serve it.
//
// The cache hands back the stored bytes of whole rows: exactly what a read
// with the default transfer properties returns when the memory type is the
// stored type. A transfer property list can ask HDF5 for something else, and
// such reads are forwarded to the connector underneath:
//
//   - a data transform (H5Pset_data_transform) computes new values;
//   - a type-conversion exception callback (H5Pset_type_conv_cb) or a filter
//     callback (H5Pset_filter_callback) decides what happens when a value
//     overflows or a checksum fails;
//   - checksums turned off (H5Pset_edc_check(H5Z_DISABLE_EDC)) return data
//     from chunks whose Fletcher-32 check fails instead of an error;
//   - an MPI-IO collective transfer (H5Pset_dxpl_mpio) needs every rank to
//     take part in the same call: a rank served from the cache would leave
//     the others waiting;
//   - a dataset I/O selection (H5Pset_dataset_io_hyperslab_selection, used
//     with H5S_PLIST as the file space) replaces the file selection.
//
// The other properties (buffer sizes, B-tree split ratios, hyperslab vector
// size, selection I/O mode, vlen allocators for types the cache never serves)
// change how HDF5 works, not which bytes the caller gets.
//
// Cost: the default list (H5P_DEFAULT, which HDF5 hands to the connector as
// H5P_DATASET_XFER_DEFAULT, and which h5py's fast read path uses) is
// recognised by its id and costs nothing. Any other list is inspected on every
// read (about 0.8 us): its properties may change between two reads through
// the same id (h5py's `dset.collective` sets and resets the MPI-IO mode on the
// dataset's own list), and HDF5 offers no change counter to cache a verdict on.
#ifndef PRESCIENT_VOL_READ_TRANSFER_PROPERTIES_H_
#define PRESCIENT_VOL_READ_TRANSFER_PROPERTIES_H_

#include <cstdint>
#include <string_view>

#include "vol/hdf5_compat.h"

namespace prescient::vol {

enum class TransferVerdict : std::uint8_t {
  kServable,
  kDataTransform,
  kConversionCallback,
  kFilterCallback,
  kChecksumsOff,
  kCollective,
  kPlistSelection,
  kNotInspectable,  // the list could not be read: forwarded to be safe
};

// Never throws; never leaves anything on the HDF5 error stack.
TransferVerdict CheckTransfer(hid_t dxpl_id, hid_t file_space_id) noexcept;

// "data transform", "collective MPI-IO transfer", ...: for the log.
std::string_view TransferVerdictName(TransferVerdict verdict);

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_READ_TRANSFER_PROPERTIES_H_
