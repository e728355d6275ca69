// Virtual datasets on disk for tests: source files of int rows, each stored
// as asked (contiguous or chunked, compressed, partly written, of another
// type), and a file "vds.h5" whose virtual dataset "v" maps their rows.
// Written by the native connector in a directory of the test's own, removed
// when the object goes.
#ifndef PRESCIENT_TESTS_UNIT_VOL_VIRTUAL_FILES_H_
#define PRESCIENT_TESTS_UNIT_VOL_VIRTUAL_FILES_H_

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "vol/objects/scoped_id.h"

namespace prescient::vol::testing {

inline constexpr hsize_t kColumns = 3;

// A mapping: rows [first, first + rows) of the VDS from rows [source_first,
// ...) of dataset "x" in `file` ("." for the naming file itself).
struct Mapping {
  std::string file;
  hsize_t first = 0;
  hsize_t rows = 0;
  hsize_t source_first = 0;
};

// How a source dataset is stored.
struct Storage {
  bool chunked = false;
  hsize_t chunk_rows = 2;
  hsize_t chunk_columns = kColumns;    // fewer: several chunks per row
  bool deflate = false;                // with shuffle before it
  bool scaleoffset = false;            // a filter the loader does not undo
  int fill = 0;                        // of rows never written (chunked only)
  bool fill_never = false;             // fill time "never": unwritten chunks read as nothing
  hsize_t written_rows = ~hsize_t{0};  // rows [0, this) are written
  hid_t type = H5T_NATIVE_INT;
};

class VirtualFiles {
 public:
  // A directory named after `tag`, this process and the running test.
  explicit VirtualFiles(const std::string& tag)
      : dir_(std::filesystem::temp_directory_path() /
             ("prescient-" + tag + "-" + std::to_string(getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::create_directories(dir_);
  }
  ~VirtualFiles() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  VirtualFiles(const VirtualFiles&) = delete;
  VirtualFiles& operator=(const VirtualFiles&) = delete;

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Dataset `name` of `rows` x kColumns values base + i, in `file` (created
  // or opened), stored as `storage` says.
  static void WriteRows(hid_t file, const char* name, hsize_t rows, int base,
                        const Storage& storage = {}) {
    const hsize_t dims[2] = {rows, kColumns};
    ScopedId space(H5Screate_simple(2, dims, nullptr), &H5Sclose);
    ScopedId dcpl(H5Pcreate(H5P_DATASET_CREATE), &H5Pclose);
    if (storage.chunked) {
      const hsize_t chunk[2] = {storage.chunk_rows, storage.chunk_columns};
      H5Pset_chunk(dcpl.get(), 2, chunk);
      if (storage.deflate) {
        H5Pset_shuffle(dcpl.get());
        H5Pset_deflate(dcpl.get(), 4);
      }
      if (storage.scaleoffset)
        H5Pset_scaleoffset(dcpl.get(), H5Z_SO_INT, H5Z_SO_INT_MINBITS_DEFAULT);
      H5Pset_fill_value(dcpl.get(), H5T_NATIVE_INT, &storage.fill);
      if (storage.fill_never) H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
    }
    ScopedId dataset(
        H5Dcreate2(file, name, storage.type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
        &H5Dclose);
    ASSERT_GE(dataset.get(), 0);
    const hsize_t written[2] = {std::min(rows, storage.written_rows), kColumns};
    if (written[0] == 0) return;
    std::vector<int> values(written[0] * kColumns);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = base + static_cast<int>(i);
    ScopedId memory(H5Screate_simple(2, written, nullptr), &H5Sclose);
    const hsize_t start[2] = {0, 0};
    H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, written, nullptr);
    ASSERT_GE(H5Dwrite(dataset.get(), H5T_NATIVE_INT, memory.get(), space.get(), H5P_DEFAULT,
                       values.data()),
              0);
  }
  void WriteSource(const std::string& name, hsize_t rows, int base, const Storage& storage = {}) {
    ScopedId file(H5Fcreate(Path(name).c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                  &H5Fclose);
    ASSERT_GE(file.get(), 0);
    WriteRows(file.get(), "x", rows, base, storage);
  }

  // "vds.h5" with "v" of `rows` x kColumns ints, from `mappings`; its own
  // "x" (for "." mappings) holds `own_rows` rows. `columns` narrows every
  // mapping to the first columns.
  // Rows no mapping gives read as `fill` (zeros by default; no fill value at
  // all with `no_fill`).
  void WriteVirtual(hsize_t rows, const std::vector<Mapping>& mappings, hsize_t own_rows = 0,
                    hsize_t columns = kColumns, int fill = 0, bool no_fill = false) {
    ScopedId file(H5Fcreate(Path("vds.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                  &H5Fclose);
    ASSERT_GE(file.get(), 0);
    if (own_rows > 0) WriteRows(file.get(), "x", own_rows, 5000);
    const hsize_t dims[2] = {rows, kColumns};
    ScopedId space(H5Screate_simple(2, dims, nullptr), &H5Sclose);
    ScopedId dcpl(H5Pcreate(H5P_DATASET_CREATE), &H5Pclose);
    if (no_fill) {
      H5Pset_fill_value(dcpl.get(), H5T_NATIVE_INT, nullptr);
    } else if (fill != 0) {
      H5Pset_fill_value(dcpl.get(), H5T_NATIVE_INT, &fill);
    }
    for (const Mapping& m : mappings) {
      const hsize_t source_rows =
          m.file == "." ? own_rows : static_cast<hsize_t>(SourceRows(m.file));
      const hsize_t source_dims[2] = {source_rows, kColumns};
      ScopedId source_space(H5Screate_simple(2, source_dims, nullptr), &H5Sclose);
      const hsize_t start[2] = {m.first, 0}, count[2] = {m.rows, columns};
      const hsize_t source_start[2] = {m.source_first, 0};
      ASSERT_GE(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr),
                0);
      // A whole source is mapped as "all" (as h5py's VirtualSource does).
      if (m.source_first == 0 && m.rows == source_rows && columns == kColumns) {
        ASSERT_GE(H5Sselect_all(source_space.get()), 0);
      } else {
        ASSERT_GE(H5Sselect_hyperslab(source_space.get(), H5S_SELECT_SET, source_start, nullptr,
                                      count, nullptr),
                  0);
      }
      ASSERT_GE(H5Pset_virtual(dcpl.get(), space.get(), m.file.c_str(), "x", source_space.get()),
                0);
    }
    H5Sselect_all(space.get());
    ScopedId dataset(H5Dcreate2(file.get(), "v", H5T_NATIVE_INT, space.get(), H5P_DEFAULT,
                                dcpl.get(), H5P_DEFAULT),
                     &H5Dclose);
    ASSERT_GE(dataset.get(), 0);
  }
  hssize_t SourceRows(const std::string& name) const {
    ScopedId file(H5Fopen(Path(name).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), &H5Fclose);
    ScopedId dataset(H5Dopen2(file.get(), "x", H5P_DEFAULT), &H5Dclose);
    ScopedId space(H5Dget_space(dataset.get()), &H5Sclose);
    hsize_t dims[2] = {0, 0};
    H5Sget_simple_extent_dims(space.get(), dims, nullptr);
    return static_cast<hssize_t>(dims[0]);
  }

 private:
  std::filesystem::path dir_;
};

}  // namespace prescient::vol::testing

#endif  // PRESCIENT_TESTS_UNIT_VOL_VIRTUAL_FILES_H_
