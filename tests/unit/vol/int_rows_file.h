// A small HDF5 file for tests that need one on disk: a contiguous int
// dataset "x" of `rows` rows (row i holds i), written by the native
// connector, removed when the object goes.
#ifndef PRESCIENT_TESTS_UNIT_VOL_INT_ROWS_FILE_H_
#define PRESCIENT_TESTS_UNIT_VOL_INT_ROWS_FILE_H_

#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace prescient::vol::testing {

class IntRowsFile {
 public:
  // `tag` names the file (one per test binary and process).
  IntRowsFile(const std::string& tag, int rows)
      : path_((std::filesystem::temp_directory_path() /
               ("prescient-" + tag + "-" + std::to_string(getpid()) + ".h5"))
                  .string()) {
    const hid_t file = H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) return;
    const hsize_t dims[1] = {static_cast<hsize_t>(rows)};
    const hid_t space = H5Screate_simple(1, dims, nullptr);
    const hid_t dataset =
        H5Dcreate2(file, "x", H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    std::vector<int> values(rows);
    for (int i = 0; i < rows; ++i) values[i] = i;
    ok_ = H5Dwrite(dataset, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0;
    H5Dclose(dataset);
    H5Sclose(space);
    ok_ = H5Fclose(file) >= 0 && ok_;
  }
  ~IntRowsFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  IntRowsFile(const IntRowsFile&) = delete;
  IntRowsFile& operator=(const IntRowsFile&) = delete;

  const std::string& path() const { return path_; }
  // False when the file could not be written.
  bool ok() const { return ok_; }

 private:
  std::string path_;
  bool ok_ = false;
};

}  // namespace prescient::vol::testing

#endif  // PRESCIENT_TESTS_UNIT_VOL_INT_ROWS_FILE_H_
