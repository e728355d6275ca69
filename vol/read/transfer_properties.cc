#include "vol/read/transfer_properties.h"

#include "vol/hdf5_ids.h"

namespace prescient::vol {
namespace {

// True when `dxpl` carries a data transform. HDF5 has no query that answers
// this without failing when none is set ("data transform has not been set"),
// and reading the property generically would hand back a copy of the parsed
// expression that only HDF5's internals can free. So the failing query runs
// with automatic error printing off and its error records are cleared.
bool HasDataTransform(hid_t dxpl) {
  ssize_t length = -1;
  H5E_BEGIN_TRY { length = H5Pget_data_transform(dxpl, nullptr, 0); }
  H5E_END_TRY
  if (length < 0) H5Eclear2(H5E_DEFAULT);
  return length > 0;
}

TransferVerdict Inspect(hid_t dxpl) {
  H5T_conv_except_func_t conversion_callback = nullptr;
  void* conversion_data = nullptr;
  if (H5Pget_type_conv_cb(dxpl, &conversion_callback, &conversion_data) < 0)
    return TransferVerdict::kNotInspectable;
  if (conversion_callback != nullptr) return TransferVerdict::kConversionCallback;

  H5Z_cb_t filter_callback{};
  if (H5Pget(dxpl, "filter_cb", &filter_callback) < 0) return TransferVerdict::kNotInspectable;
  if (filter_callback.func != nullptr) return TransferVerdict::kFilterCallback;

  const H5Z_EDC_t checksums = H5Pget_edc_check(dxpl);
  if (checksums == H5Z_ERROR_EDC) return TransferVerdict::kNotInspectable;
  if (checksums == H5Z_DISABLE_EDC) return TransferVerdict::kChecksumsOff;

#ifdef H5_HAVE_PARALLEL
  H5FD_mpio_xfer_t mode = H5FD_MPIO_INDEPENDENT;
  if (H5Pget_dxpl_mpio(dxpl, &mode) < 0) return TransferVerdict::kNotInspectable;
  if (mode == H5FD_MPIO_COLLECTIVE) return TransferVerdict::kCollective;
#endif

  if (HasDataTransform(dxpl)) return TransferVerdict::kDataTransform;
  return TransferVerdict::kServable;
}

}  // namespace

TransferVerdict CheckTransfer(hid_t dxpl_id, hid_t file_space_id) noexcept {
  if (file_space_id == H5S_PLIST) return TransferVerdict::kPlistSelection;
  // The default list's id without H5open (hdf5_ids.h), on every read.
  if (dxpl_id == H5P_DEFAULT || dxpl_id == hdf5::DefaultTransferList())
    return TransferVerdict::kServable;
  return Inspect(dxpl_id);
}

std::string_view TransferVerdictName(TransferVerdict verdict) {
  switch (verdict) {
    case TransferVerdict::kServable:
      return "servable";
    case TransferVerdict::kDataTransform:
      return "a data transform (H5Pset_data_transform)";
    case TransferVerdict::kConversionCallback:
      return "a type-conversion callback (H5Pset_type_conv_cb)";
    case TransferVerdict::kFilterCallback:
      return "a filter callback (H5Pset_filter_callback)";
    case TransferVerdict::kChecksumsOff:
      return "checksums turned off (H5Pset_edc_check)";
    case TransferVerdict::kCollective:
      return "a collective MPI-IO transfer (H5Pset_dxpl_mpio)";
    case TransferVerdict::kPlistSelection:
      return "a dataset I/O selection in the transfer list (H5S_PLIST)";
    case TransferVerdict::kNotInspectable:
      return "a transfer property list that could not be inspected";
  }
  return "unknown";
}

}  // namespace prescient::vol
