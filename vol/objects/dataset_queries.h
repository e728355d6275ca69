// The questions Prescient asks HDF5 about a dataset, answered two ways.
//
// Inside a VOL callback, through the connector underneath: the under object
// and the H5VL* functions. Those rely on the API context HDF5 sets up for the
// call that invoked the callback, so they must not be used anywhere else.
// Outside a callback (the prefetch thread preparing a file the application
// has not opened), through the public API on a dataset id: every public call
// sets up its own context and, in a thread-safe build, takes HDF5's lock.
//
// Ids returned are new; the caller closes them. Failures are HDF5's
// (negative ids and statuses, null names); nothing throws.
#ifndef PRESCIENT_VOL_OBJECTS_DATASET_QUERIES_H_
#define PRESCIENT_VOL_OBJECTS_DATASET_QUERIES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "vol/hdf5_compat.h"
#include "vol/objects/object.h"

namespace prescient::vol {

class DatasetQueries {
 public:
  virtual ~DatasetQueries() = default;
  virtual hid_t Space() const = 0;
  virtual hid_t Type() const = 0;
  virtual hid_t CreationPlist() const = 0;
  // The access property list the dataset was opened with (its virtual
  // dataset prefix, say).
  virtual hid_t AccessPlist() const = 0;
  virtual bool Token(H5O_token_t* token) const = 0;
  // The path the dataset was opened by ("/group/x"), or "" if it has none.
  virtual std::string Name() const = 0;
  // True when the native connector answers, so the raw layout can be asked.
  virtual bool Native() const = 0;
  // H5Dget_offset; HADDR_UNDEF when unallocated.
  virtual haddr_t Offset() const = 0;
  // H5Dget_storage_size: the bytes allocated in the file; nullopt on failure.
  virtual std::optional<std::uint64_t> StorageSize() const = 0;
  // H5Dchunk_iter.
  virtual herr_t ChunkIter(H5D_chunk_iter_op_t op, void* data) const = 0;
};

// Through the connector underneath (VOL callbacks only).
class UnderDataset final : public DatasetQueries {
 public:
  explicit UnderDataset(const VolObject& dataset) : dataset_(dataset) {}
  hid_t Space() const override;
  hid_t Type() const override;
  hid_t CreationPlist() const override;
  hid_t AccessPlist() const override;
  bool Token(H5O_token_t* token) const override;
  std::string Name() const override;
  bool Native() const override;
  haddr_t Offset() const override;
  std::optional<std::uint64_t> StorageSize() const override;
  herr_t ChunkIter(H5D_chunk_iter_op_t op, void* data) const override;

 private:
  const VolObject& dataset_;
};

// Through the public API on a dataset id (any thread).
class PublicDataset final : public DatasetQueries {
 public:
  explicit PublicDataset(hid_t dataset) : dataset_(dataset) {}
  hid_t Space() const override { return H5Dget_space(dataset_); }
  hid_t Type() const override { return H5Dget_type(dataset_); }
  hid_t CreationPlist() const override { return H5Dget_create_plist(dataset_); }
  hid_t AccessPlist() const override { return H5Dget_access_plist(dataset_); }
  bool Token(H5O_token_t* token) const override;
  std::string Name() const override;
  bool Native() const override;
  haddr_t Offset() const override { return H5Dget_offset(dataset_); }
  std::optional<std::uint64_t> StorageSize() const override;
  herr_t ChunkIter(H5D_chunk_iter_op_t op, void* data) const override {
    return H5Dchunk_iter(dataset_, H5P_DEFAULT, op, data);
  }

 private:
  hid_t dataset_;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_OBJECTS_DATASET_QUERIES_H_
