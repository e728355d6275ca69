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
#ifndef PRESCIENT_VOL_OBJECTS_DATASET_STATE_H_
#define PRESCIENT_VOL_OBJECTS_DATASET_STATE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/base/mutex.h"
#include "vol/hdf5_compat.h"
#include "vol/objects/compound_fields.h"
#include "vol/objects/dataset_queries.h"
#include "vol/objects/object.h"
#include "vol/objects/predefined_types.h"

namespace prescient::vol {

struct DatasetIdentity {
  std::array<std::uint64_t, 2> hash{};  // over everything below
  std::array<std::uint8_t, H5O_MAX_TOKEN_SIZE> token{};
  std::uint64_t file_device = 0, file_inode = 0;
  // The file's status-change time when the handle was opened (0: unknown).
  std::int64_t file_ctime_ns = 0;
  // The path the dataset was opened by ("/images"); not part of the hash (a
  // dataset reached by two links is one dataset). Binds schedule fields.
  std::string name;
  std::string description;  // human-readable, for logs
};

class DatasetState {
 public:
  // Queries the under connector for shape, type and token (on the caller's
  // thread, inside the open callback). Returns null if any query fails; the
  // dataset is then simply forwarded.
  static std::shared_ptr<DatasetState> Identify(const VolObject& dataset);
  // The same from any source of answers (dataset_queries.h) and the state of
  // the file the dataset lives in.
  static std::shared_ptr<DatasetState> Identify(const DatasetQueries& dataset,
                                                const FileState* file);
  // Identify() for use right after a successful open: never throws (an open
  // must not fail because Prescient could not learn about the dataset).
  static std::shared_ptr<DatasetState> TryIdentify(const VolObject& dataset) noexcept;

  const DatasetIdentity& identity() const { return identity_; }
  // Numbers this open of the dataset apart from every other in the process
  // (never 0): a virtual dataset's sources are looked at once per open
  // (VirtualSources::ChangedForRows).
  std::uint64_t open_serial() const { return open_serial_; }
  const std::vector<hsize_t>& dims() const { return dims_; }
  std::size_t type_size() const { return type_size_; }
  // No HDF5 id of the stored type is held (ids a connector keeps would show
  // in the application's H5Fget_obj_count): only its encoding.
  // True when `mem_type` is the stored type (same class, size and encoding),
  // or the base integer type of a stored enum (h5py reads enums as integers:
  // ReadsAsStored): a read with it returns the file's bytes unconverted.
  // Decided once per predefined memory type (predefined_types.h).
  bool IsStoredType(hid_t mem_type) const;
  // A new id of the stored type; the caller closes it. Invalid on failure.
  hid_t NewStoredTypeId() const;
  // For a compound stored type: how a read into `mem_type`, some of its
  // members, is gathered from stored elements (compound_fields.h); null when
  // HDF5 must convert it. Decided once per memory type (by its encoding: h5py
  // makes a new id for every read). Callers hold HDF5's lock.
  std::shared_ptr<const CompoundFields> FieldsOf(hid_t mem_type) const;
  // Fixed-size data only: no variable-length or reference types anywhere in it.
  bool fixed_size() const { return fixed_size_; }
  std::uint64_t row_bytes() const { return row_bytes_; }

  void MarkChanged() noexcept;
  bool changed() const;

 private:
  DatasetState() = default;
  DatasetIdentity identity_;
  std::uint64_t open_serial_ = 0;
  std::vector<hsize_t> dims_;
  std::vector<unsigned char> encoded_type_;
  H5T_class_t type_class_ = H5T_NO_CLASS;
  // What makes two integer or float types store the same bytes (compared on
  // every read without decoding the stored type).
  struct AtomicProperties {
    H5T_order_t order = H5T_ORDER_ERROR;
    std::size_t precision = 0;
    int offset = -1;
    H5T_pad_t lsb = H5T_PAD_ERROR, msb = H5T_PAD_ERROR;
    H5T_sign_t sign = H5T_SGN_ERROR;          // integers
    std::size_t fields[5] = {0, 0, 0, 0, 0};  // floats: spos, epos, esize, mpos, msize
    std::size_t ebias = 0;
    H5T_norm_t norm = H5T_NORM_ERROR;
    H5T_pad_t inpad = H5T_PAD_ERROR;
    bool operator==(const AtomicProperties&) const = default;
    static AtomicProperties Of(hid_t type, H5T_class_t type_class);
  };
  // The stored type's, found at the first comparison that needs them (h5py's
  // reads are decided by H5Tequal against a predefined type: a file of one
  // sample, opened once, never needs them). Callers hold HDF5's lock.
  const AtomicProperties& StoredAtomicProperties() const;
  mutable std::once_flag atomic_once_;
  mutable AtomicProperties atomic_;
  bool CompareWithStoredType(hid_t mem_type) const;
  // IsStoredType's verdict per predefined type: 0 not known yet, 1 the
  // stored type, 2 another type.
  enum : std::uint8_t { kUnknown = 0, kStored = 1, kOther = 2 };
  mutable std::array<std::atomic<std::uint8_t>, kPredefinedTypes> predefined_verdict_{};
  // A predefined type equal to the stored type (-1: none; kNotLooked: not
  // looked for yet). A memory type H5Tequal to it is the stored type: one
  // library call instead of a dozen for h5py's private copies of the
  // predefined types.
  static constexpr int kNotLooked = -2;
  mutable std::atomic<int> equivalent_predefined_{kNotLooked};
  // FieldsOf's verdicts, by the memory type's encoding (a few: a loader
  // reads a dataset with one or two sets of fields).
  struct FieldsVerdict {
    std::vector<unsigned char> memory_type;
    std::shared_ptr<const CompoundFields> fields;
  };
  static constexpr std::size_t kMaxFieldsVerdicts = 8;
  mutable cache::Mutex fields_mu_;
  mutable std::vector<FieldsVerdict> fields_verdicts_ GUARDED_BY(fields_mu_);
  std::size_t type_size_ = 0;
  bool fixed_size_ = false;
  std::uint64_t row_bytes_ = 0;
  mutable std::atomic<bool> changed_{false};
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_OBJECTS_DATASET_STATE_H_
