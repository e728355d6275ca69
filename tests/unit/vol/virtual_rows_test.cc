// A virtual dataset's rows read straight from its sources (virtual_rows.h):
// real HDF5 files, every byte compared with HDF5's own read of the virtual
// dataset, and the mappings that must be left to HDF5.
#include "vol/serve/virtual_rows.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "vol/objects/dataset_queries.h"
#include "vol/objects/dataset_state.h"
#include "vol/objects/file_state.h"
#include "vol/objects/scoped_id.h"

namespace prescient::vol {
namespace {

namespace fs = std::filesystem;
constexpr hsize_t kColumns = 3;

// A mapping: rows [first, first + rows) of the VDS from rows [source_first,
// ...) of dataset "x" in `file` ("." for the naming file itself).
struct Mapping {
  std::string file;
  hsize_t first = 0;
  hsize_t rows = 0;
  hsize_t source_first = 0;
};

class VirtualRowsTest : public ::testing::Test {
 public:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("prescient-vrows-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Dataset `name` of `rows` x kColumns values base + i, in `file` (created
  // or opened): contiguous, or chunked when asked, of `type`.
  static void WriteRows(hid_t file, const char* name, hsize_t rows, int base, bool chunked = false,
                        hid_t type = H5T_NATIVE_INT) {
    const hsize_t dims[2] = {rows, kColumns};
    ScopedId space(H5Screate_simple(2, dims, nullptr), &H5Sclose);
    ScopedId dcpl(H5Pcreate(H5P_DATASET_CREATE), &H5Pclose);
    if (chunked) {
      const hsize_t chunk[2] = {2, kColumns};
      H5Pset_chunk(dcpl.get(), 2, chunk);
    }
    ScopedId dataset(
        H5Dcreate2(file, name, type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), &H5Dclose);
    ASSERT_GE(dataset.get(), 0);
    std::vector<int> values(rows * kColumns);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = base + static_cast<int>(i);
    ASSERT_GE(H5Dwrite(dataset.get(), H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
              0);
  }
  void WriteSource(const std::string& name, hsize_t rows, int base, bool chunked = false,
                   hid_t type = H5T_NATIVE_INT) {
    ScopedId file(H5Fcreate(Path(name).c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                  &H5Fclose);
    ASSERT_GE(file.get(), 0);
    WriteRows(file.get(), "x", rows, base, chunked, type);
  }

  // "vds.h5" with "v" of `rows` x kColumns ints, from `mappings`; its own
  // "x" (for "." mappings) holds `own_rows` rows. `columns` narrows every
  // mapping to the first columns.
  void WriteVirtual(hsize_t rows, const std::vector<Mapping>& mappings, hsize_t own_rows = 0,
                    hsize_t columns = kColumns) {
    ScopedId file(H5Fcreate(Path("vds.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                  &H5Fclose);
    ASSERT_GE(file.get(), 0);
    if (own_rows > 0) WriteRows(file.get(), "x", own_rows, 5000);
    const hsize_t dims[2] = {rows, kColumns};
    ScopedId space(H5Screate_simple(2, dims, nullptr), &H5Sclose);
    ScopedId dcpl(H5Pcreate(H5P_DATASET_CREATE), &H5Pclose);
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

  struct Opened {
    cache::io::Result<std::shared_ptr<const cache::io::RandomAccessSource>> source =
        cache::io::Status::Internal("not opened");
    std::vector<std::byte> native;  // HDF5's read of the whole VDS
    std::uint64_t row_bytes = 0;
  };
  // Opens vds.h5 as the application would, reads "v" through HDF5, and asks
  // for its rows' source. `between` runs after the sources are identified.
  Opened Open(const std::function<void()>& between = {}) {
    Opened out;
    const std::string path = Path("vds.h5");
    const std::shared_ptr<FileState> state =
        FileState::Make(path.c_str(), /*writable=*/false, /*posix_driver=*/true);
    ScopedId file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), &H5Fclose);
    ScopedId dataset(H5Dopen2(file.get(), "v", H5P_DEFAULT), &H5Dclose);
    const PublicDataset queries(dataset.get());
    const std::shared_ptr<DatasetState> ds = DatasetState::Identify(queries, state.get());
    if (ds == nullptr) return out;
    out.row_bytes = ds->row_bytes();
    out.native.resize(ds->dims()[0] * ds->row_bytes());
    H5Dread(dataset.get(), H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.native.data());
    ScopedId dcpl(H5Dget_create_plist(dataset.get()), &H5Pclose);
    auto sources = VirtualSources::Find(queries, dcpl.get(), *state);
    if (!sources.ok()) {
      out.source = sources.status();
      return out;
    }
    if (between) between();
    out.source = VirtualRowSource(dcpl.get(), *ds, *state, sources.value());
    return out;
  }

  // Every row read raw equals HDF5's, read whole and row by row.
  static void ExpectNativeBytes(const Opened& opened) {
    ASSERT_TRUE(opened.source.ok()) << opened.source.status().message();
    const cache::io::RandomAccessSource& source = *opened.source.value();
    EXPECT_EQ(source.Size().value(), opened.native.size());
    std::vector<std::byte> all(opened.native.size());
    ASSERT_TRUE(source.ReadExact(0, all).ok());
    EXPECT_EQ(all, opened.native);
    std::vector<std::byte> row(opened.row_bytes);
    for (std::uint64_t r = 0; r * opened.row_bytes < all.size(); ++r) {
      ASSERT_TRUE(source.ReadExact(r * opened.row_bytes, row).ok());
      EXPECT_TRUE(std::equal(row.begin(), row.end(), opened.native.begin() + r * opened.row_bytes))
          << "row " << r;
    }
  }

  // Sources written this long before the naming file's open are not "changed
  // while it was open" (VirtualSources allows for coarse file timestamps).
  static void Settle() { std::this_thread::sleep_for(std::chrono::milliseconds(60)); }

  fs::path dir_;
};

TEST_F(VirtualRowsTest, RowsFromSeveralFilesInAnyOrderAreTheBytesHdf5Reads) {
  WriteSource("a.h5", 6, 0);
  WriteSource("b.h5", 4, 100);
  // Out of row order, part of a source, one source twice, and the naming file.
  WriteVirtual(12, {{"b.h5", 0, 4, 0}, {"a.h5", 4, 3, 3}, {".", 7, 2, 1}, {"a.h5", 9, 3, 0}},
               /*own_rows=*/4);
  Settle();
  ExpectNativeBytes(Open());
}

TEST_F(VirtualRowsTest, MappingsHdf5MustResolveAreLeftToIt) {
  struct Case {
    const char* what;
    std::function<void(VirtualRowsTest*)> write;
  };
  const std::vector<Case> cases = {
      {"chunked source",
       [](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0, /*chunked=*/true);
         t->WriteVirtual(4, {{"a.h5", 0, 4, 0}});
       }},
      {"another type",
       [](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0, false, H5T_STD_I32BE);
         t->WriteVirtual(4, {{"a.h5", 0, 4, 0}});
       }},
      {"rows left to the fill value",
       [](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0);
         t->WriteVirtual(6, {{"a.h5", 0, 4, 0}});
       }},
      {"rows given twice",
       [](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0);
         t->WriteSource("b.h5", 4, 100);
         t->WriteVirtual(6, {{"a.h5", 0, 4, 0}, {"b.h5", 2, 4, 0}});
       }},
      {"parts of rows",
       [](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0);
         t->WriteVirtual(4, {{"a.h5", 0, 4, 0}}, 0, /*columns=*/2);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    c.write(this);
    Settle();
    const Opened opened = Open();
    EXPECT_EQ(opened.source.status().code(), cache::io::Status::Code::kUnsupported)
        << opened.source.status().message();
  }
}

TEST_F(VirtualRowsTest, MoreSourceFilesThanDescriptorsAllowAreLeftToHdf5) {
  std::vector<Mapping> mappings;
  const hsize_t files = kMaxRawVirtualSourceFiles + 1;
  for (hsize_t k = 0; k < files; ++k) {
    const std::string name = "s" + std::to_string(k) + ".h5";
    WriteSource(name, 1, static_cast<int>(k));
    mappings.push_back({name, k, 1, 0});
  }
  WriteVirtual(files, mappings);
  Settle();
  const Opened opened = Open();
  EXPECT_EQ(opened.source.status().code(), cache::io::Status::Code::kUnsupported);
  EXPECT_NE(opened.source.status().message().find("source files"), std::string::npos)
      << opened.source.status().message();
}

TEST_F(VirtualRowsTest, AMissingSourceDatasetIsLeftToHdf5Quietly) {
  WriteSource("a.h5", 4, 0);
  // Mapped from "y", which a.h5 lacks: HDF5 reads the fill value there.
  {
    ScopedId file(H5Fcreate(Path("vds.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                  &H5Fclose);
    const hsize_t dims[2] = {4, kColumns};
    ScopedId space(H5Screate_simple(2, dims, nullptr), &H5Sclose);
    ScopedId dcpl(H5Pcreate(H5P_DATASET_CREATE), &H5Pclose);
    ASSERT_GE(H5Pset_virtual(dcpl.get(), space.get(), "a.h5", "y", space.get()), 0);
    ScopedId dataset(H5Dcreate2(file.get(), "v", H5T_NATIVE_INT, space.get(), H5P_DEFAULT,
                                dcpl.get(), H5P_DEFAULT),
                     &H5Dclose);
    ASSERT_GE(dataset.get(), 0);
  }
  Settle();
  ::testing::internal::CaptureStderr();
  const Opened opened = Open();
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(opened.source.status().code(), cache::io::Status::Code::kUnsupported)
      << opened.source.status().message();
  EXPECT_NE(opened.source.status().message().find("no source dataset y"), std::string::npos)
      << opened.source.status().message();
  // HDF5's own read of the VDS in Open() prints nothing either (fill values).
  EXPECT_EQ(printed.find("HDF5-DIAG"), std::string::npos) << printed;
}

TEST_F(VirtualRowsTest, ASourceReplacedAfterItWasIdentifiedIsNotRead) {
  WriteSource("a.h5", 4, 0);
  WriteVirtual(4, {{"a.h5", 0, 4, 0}});
  Settle();
  const Opened opened = Open([this] {
    WriteSource("a2.h5", 4, 900);
    fs::rename(Path("a2.h5"), Path("a.h5"));
  });
  ASSERT_FALSE(opened.source.ok());
  EXPECT_NE(opened.source.status().message().find("changed since it was identified"),
            std::string::npos)
      << opened.source.status().message();
}

}  // namespace
}  // namespace prescient::vol
