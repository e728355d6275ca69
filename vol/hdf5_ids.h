// HDF5's default property lists, file drivers and file access flags, had
// without entering the library.
//
// The public macros for them (H5P_DATASET_XFER_DEFAULT, H5FD_SEC2,
// H5F_ACC_RDWR, ...) call H5open, H5FDperform_init or H5check_version at each
// use: a locked library entry of 340-650 instructions apiece. The connector
// used a dozen of them per file it opened, and one-sample-per-file loaders open
// a file per sample. Only for use inside callbacks and while the library is
// open (the defaults are its globals, set when it starts).
#ifndef PRESCIENT_VOL_HDF5_IDS_H_
#define PRESCIENT_VOL_HDF5_IDS_H_

#include <atomic>
#include <optional>

#include "vol/hdf5_compat.h"

namespace prescient::vol::hdf5 {

// H5P_DATASET_XFER_DEFAULT and H5P_FILE_ACCESS_DEFAULT.
inline hid_t DefaultTransferList() { return H5P_LST_DATASET_XFER_ID_g; }
inline hid_t DefaultFileAccessList() { return H5P_LST_FILE_ACCESS_ID_g; }

// The H5F_ACC_* flags a file open may carry, as HDF5's ABI fixes them
// (hdf5_ids_test compares them with the macros).
inline constexpr unsigned kFileReadWrite = 0x0001u;
inline constexpr unsigned kFileTruncate = 0x0002u;
inline constexpr unsigned kFileExclusive = 0x0004u;
inline constexpr unsigned kFileCreate = 0x0010u;
inline constexpr unsigned kFileSwmrRead = 0x0040u;

// The file driver a FAPL names, as far as the connector tells them apart.
enum class FileDriver { kPosix, kMpio, kOther };

namespace internal {
// A driver's id, registered at its first use and kept until the library
// closes: asked once per library session (ForgetDriverIds at the connector's
// initialisation and termination). `ask` evaluates the driver's public macro,
// which 1.14 implements as H5FDperform_init(H5FD_*_init) and 2.x as H5open
// plus a global: the macro is the one spelling both versions share.
inline std::atomic<hid_t> posix_driver_id{H5I_INVALID_HID};
inline std::atomic<hid_t> mpio_driver_id{H5I_INVALID_HID};
template <typename Ask>
hid_t DriverId(std::atomic<hid_t>& cached, Ask ask) {
  hid_t id = cached.load(std::memory_order_relaxed);
  if (id < 0) {
    id = ask();
    cached.store(id, std::memory_order_relaxed);
  }
  return id;
}
}  // namespace internal

inline void ForgetDriverIds() {
  internal::posix_driver_id.store(H5I_INVALID_HID, std::memory_order_relaxed);
  internal::mpio_driver_id.store(H5I_INVALID_HID, std::memory_order_relaxed);
}

// H5Pget_driver's answer for `fapl_id`, told apart with one library call;
// nullopt when the list cannot be asked (the caller keeps the error stack).
inline std::optional<FileDriver> DriverOf(hid_t fapl_id) {
  const hid_t driver = H5Pget_driver(fapl_id);
  if (driver < 0) return std::nullopt;
  if (driver == internal::DriverId(internal::posix_driver_id, [] { return H5FD_SEC2; })) {
    return FileDriver::kPosix;
  }
#ifdef H5_HAVE_PARALLEL
  if (driver == internal::DriverId(internal::mpio_driver_id, [] { return H5FD_MPIO; })) {
    return FileDriver::kMpio;
  }
#endif
  return FileDriver::kOther;
}

}  // namespace prescient::vol::hdf5

#endif  // PRESCIENT_VOL_HDF5_IDS_H_
