// What Prescient knows about an open dataset: an identity that survives
// closing and reopening it, its shape and stored type, and whether it was
// changed through this process.
//
// Identity = file identity (device, inode, size, mtime) + object token + shape
// + datatype. Two opens of the same, unchanged dataset get the same identity,
// in this process or another; any change to the file, the dataset's extent or
// its type gives a different one. A dataset written to or resized through the
// connector is marked changed (keyed by file and token, so the mark also
// reaches other handles to it) and is never served from a cache.
#ifndef PRESCIENT_VOL_DATASET_STATE_H_
#define PRESCIENT_VOL_DATASET_STATE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vol/hdf5_compat.h"
#include "vol/object.h"

namespace prescient::vol {

struct DatasetIdentity {
  std::array<std::uint64_t, 2> hash{};  // over everything below
  std::array<std::uint8_t, H5O_MAX_TOKEN_SIZE> token{};
  std::uint64_t file_device = 0, file_inode = 0;
  std::string description;  // human-readable, for logs
};

class DatasetState {
 public:
  // Queries the under connector for shape, type and token (on the caller's
  // thread, inside the open callback). Returns null if any query fails; the
  // dataset is then simply forwarded.
  static std::shared_ptr<DatasetState> Identify(const VolObject& dataset);
  // Identify() for use right after a successful open: never throws (an open
  // must not fail because Prescient could not learn about the dataset).
  static std::shared_ptr<DatasetState> TryIdentify(const VolObject& dataset) noexcept;
  ~DatasetState();

  const DatasetIdentity& identity() const { return identity_; }
  const std::vector<hsize_t>& dims() const { return dims_; }
  hid_t file_type() const { return file_type_; }
  std::size_t type_size() const { return type_size_; }
  // Fixed-size data only: no variable-length or reference types anywhere in it.
  bool fixed_size() const { return fixed_size_; }
  std::uint64_t row_bytes() const { return row_bytes_; }

  void MarkChanged() noexcept;
  bool changed() const;

 private:
  DatasetState() = default;
  DatasetIdentity identity_;
  std::vector<hsize_t> dims_;
  hid_t file_type_ = H5I_INVALID_HID;
  std::size_t type_size_ = 0;
  bool fixed_size_ = false;
  std::uint64_t row_bytes_ = 0;
  mutable std::atomic<bool> changed_{false};
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_DATASET_STATE_H_
