// Where a virtual dataset's sources are looked for (HDF5 1.14's order), and
// which virtual datasets VirtualSources lets be cached: real HDF5 files, a
// source rewritten or replaced, one missing, one changed after the naming
// file was opened, printf-style names and unlimited extents.
#include "vol/serve/virtual_sources.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/vol/int_rows_file.h"
#include "vol/objects/file_state.h"
#include "vol/objects/scoped_id.h"

namespace prescient::vol {
namespace {

namespace fs = std::filesystem;
using Paths = std::vector<std::string>;

TEST(SourceCandidates, ARelativeNameIsLookedForBesideTheNamingFileThenInTheWorkingDirectory) {
  EXPECT_EQ(SourceCandidates("src.h5", "data/vds.h5", "/run", "", nullptr, ""),
            (Paths{"/run/data/src.h5", "/run/src.h5"}));
  EXPECT_EQ(SourceCandidates("sub/src.h5", "/d/vds.h5", "/run", "/real/d", nullptr, ""),
            (Paths{"/d/sub/src.h5", "/run/sub/src.h5", "/real/d/sub/src.h5"}));
}

TEST(SourceCandidates, AnAbsoluteNameComesFirstThenItsLastComponentEverywhere) {
  EXPECT_EQ(SourceCandidates("/old/place/src.h5", "/d/vds.h5", "/run", "", nullptr, ""),
            (Paths{"/old/place/src.h5", "/d/src.h5", "/run/src.h5"}));
}

TEST(SourceCandidates, PrefixesComeBeforeTheNamingFilesDirectory) {
  // HDF5_VDS_PREFIX's directories, then the variable (or else the access
  // property list's prefix) as one prefix, ${ORIGIN} the naming file's
  // directory; "." is no prefix.
  EXPECT_EQ(SourceCandidates("src.h5", "/d/vds.h5", "/run", "", "/p1:${ORIGIN}/p2", ""),
            (Paths{"/p1/src.h5", "/run/${ORIGIN}/p2/src.h5", "/d/p2/src.h5",
                   "/p1:${ORIGIN}/p2/src.h5", "/d/src.h5", "/run/src.h5"}));
  EXPECT_EQ(SourceCandidates("src.h5", "/d/vds.h5", "/run", "", nullptr, "${ORIGIN}/../s"),
            (Paths{"/d/../s/src.h5", "/d/src.h5", "/run/src.h5"}));
  EXPECT_EQ(SourceCandidates("src.h5", "/d/vds.h5", "/run", "", nullptr, "."),
            (Paths{"/d/src.h5", "/run/src.h5"}));
}

// A directory of its own per test, removed afterwards.
class VirtualSourcesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("prescient-vds-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  // A source file of `rows` ints holding `base` + i.
  void WriteSource(const std::string& name, int rows, int base) {
    const std::string path = (dir_ / name).string();
    ScopedId file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), &H5Fclose);
    ASSERT_GE(file.get(), 0);
    const hsize_t dims[1] = {static_cast<hsize_t>(rows)};
    ScopedId space(H5Screate_simple(1, dims, nullptr), &H5Sclose);
    ScopedId dataset(H5Dcreate2(file.get(), "x", H5T_NATIVE_INT, space.get(), H5P_DEFAULT,
                                H5P_DEFAULT, H5P_DEFAULT),
                     &H5Dclose);
    std::vector<int> values(rows);
    for (int i = 0; i < rows; ++i) values[i] = base + i;
    ASSERT_GE(H5Dwrite(dataset.get(), H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
              0);
  }

  // "vds.h5" with dataset "v": `rows` rows of each source in turn, named as
  // given; unlimited when asked.
  void WriteVirtual(const std::vector<std::string>& sources, int rows, bool unlimited = false) {
    const std::string path = (dir_ / "vds.h5").string();
    ScopedId file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), &H5Fclose);
    ASSERT_GE(file.get(), 0);
    const hsize_t total[1] = {static_cast<hsize_t>(rows * sources.size())};
    const hsize_t most[1] = {unlimited ? H5S_UNLIMITED : total[0]};
    ScopedId space(H5Screate_simple(1, total, most), &H5Sclose);
    const hsize_t source_dims[1] = {static_cast<hsize_t>(rows)};
    ScopedId source_space(H5Screate_simple(1, source_dims, nullptr), &H5Sclose);
    ScopedId dcpl(H5Pcreate(H5P_DATASET_CREATE), &H5Pclose);
    for (std::size_t s = 0; s < sources.size(); ++s) {
      const hsize_t start[1] = {s * rows}, count[1] = {static_cast<hsize_t>(rows)};
      ASSERT_GE(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr),
                0);
      ASSERT_GE(
          H5Pset_virtual(dcpl.get(), space.get(), sources[s].c_str(), "x", source_space.get()), 0);
    }
    H5Sselect_all(space.get());
    ScopedId dataset(H5Dcreate2(file.get(), "v", H5T_NATIVE_INT, space.get(), H5P_DEFAULT,
                                dcpl.get(), H5P_DEFAULT),
                     &H5Dclose);
    ASSERT_GE(dataset.get(), 0);
  }

  // Opens vds.h5 as the application would (FileState made at the open), then
  // finds the sources of "v".
  // `path`: the naming file's name as the application gives it (default: its
  // absolute path).
  cache::io::Result<VirtualSources> Find(std::string path = "") {
    if (path.empty()) path = (dir_ / "vds.h5").string();
    const std::shared_ptr<FileState> state = FileState::Make(path.c_str(), false);
    ScopedId file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), &H5Fclose);
    if (file.get() < 0) return cache::io::Status::IoError("cannot open " + path);
    ScopedId dataset(H5Dopen2(file.get(), "v", H5P_DEFAULT), &H5Dclose);
    ScopedId dcpl(H5Dget_create_plist(dataset.get()), &H5Pclose);
    return VirtualSources::Find(PublicDataset(dataset.get()), dcpl.get(), *state);
  }

  // Sources written this long before the naming file's open are not "changed
  // while it was open" (the check allows for coarse file timestamps).
  static void Settle() { std::this_thread::sleep_for(std::chrono::milliseconds(60)); }

  fs::path dir_;
};

TEST_F(VirtualSourcesTest, TheFingerprintFollowsEverySourceFile) {
  WriteSource("a.h5", 4, 0);
  WriteSource("b.h5", 4, 100);
  WriteVirtual({"a.h5", "b.h5"}, 4);
  Settle();
  auto first = Find();
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_GE(first.value().candidates(), 2u);
  EXPECT_EQ(first.value().FirstChanged(), std::nullopt);
  auto again = Find();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value().fingerprint(), first.value().fingerprint());

  // Rewritten in place: another fingerprint, and the first sees it changed.
  WriteSource("b.h5", 4, 200);
  Settle();
  auto rewritten = Find();
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().message();
  EXPECT_NE(rewritten.value().fingerprint(), first.value().fingerprint());
  const std::optional<std::string> changed = first.value().FirstChanged();
  ASSERT_TRUE(changed.has_value());
  EXPECT_EQ(fs::path(*changed).filename(), "b.h5");

  // Replaced by another file moved in.
  WriteSource("c.h5", 4, 300);
  fs::rename(dir_ / "c.h5", dir_ / "a.h5");
  Settle();
  auto replaced = Find();
  ASSERT_TRUE(replaced.ok()) << replaced.status().message();
  EXPECT_NE(replaced.value().fingerprint(), rewritten.value().fingerprint());
}

TEST_F(VirtualSourcesTest, AFileAppearingEarlierInTheSearchChangesTheFingerprint) {
  fs::create_directories(dir_ / "sub");
  WriteSource("sub/a.h5", 4, 0);
  WriteVirtual({"sub/a.h5"}, 4);
  Settle();
  auto first = Find();
  ASSERT_TRUE(first.ok()) << first.status().message();
  // The working directory's sub/a.h5 is looked at too, but after the naming
  // file's directory; a prefix directory comes before both.
  fs::create_directories(dir_ / "pre" / "sub");
  WriteSource("pre/sub/a.h5", 4, 50);
  ASSERT_EQ(setenv("HDF5_VDS_PREFIX", (dir_ / "pre").c_str(), 1), 0);
  Settle();
  auto with_prefix = Find();
  unsetenv("HDF5_VDS_PREFIX");
  ASSERT_TRUE(with_prefix.ok()) << with_prefix.status().message();
  EXPECT_NE(with_prefix.value().fingerprint(), first.value().fingerprint());
}

TEST_F(VirtualSourcesTest, TheFingerprintIsTheSameWhateverNameTheNamingFileIsOpenedBy) {
  // The prefetch leader opens files by the canonical paths a schedule names;
  // the application may name them through a link: the same sources, one key.
  WriteSource("a.h5", 4, 0);
  WriteVirtual({"a.h5"}, 4);
  fs::create_directory_symlink(dir_, dir_.string() + "-link");
  Settle();
  auto direct = Find();
  auto linked = Find(dir_.string() + "-link/vds.h5");
  fs::remove(dir_.string() + "-link");
  ASSERT_TRUE(direct.ok()) << direct.status().message();
  ASSERT_TRUE(linked.ok()) << linked.status().message();
  EXPECT_NE(linked.value().candidates(), direct.value().candidates());  // other paths looked at
  EXPECT_EQ(linked.value().fingerprint(), direct.value().fingerprint());
}

TEST_F(VirtualSourcesTest, ASourceFoundNowhereIsNotCached) {
  WriteSource("a.h5", 4, 0);
  WriteVirtual({"a.h5", "gone.h5"}, 4);
  Settle();
  auto found = Find();
  ASSERT_FALSE(found.ok());
  EXPECT_NE(found.status().message().find("gone.h5"), std::string::npos)
      << found.status().message();
}

TEST_F(VirtualSourcesTest, ASourceChangedAfterTheNamingFileWasOpenedIsNotCached) {
  WriteSource("a.h5", 4, 0);
  WriteVirtual({"a.h5"}, 4);
  Settle();
  const std::string path = (dir_ / "vds.h5").string();
  const std::shared_ptr<FileState> state = FileState::Make(path.c_str(), false);
  ScopedId file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), &H5Fclose);
  ScopedId dataset(H5Dopen2(file.get(), "v", H5P_DEFAULT), &H5Dclose);
  ScopedId dcpl(H5Dget_create_plist(dataset.get()), &H5Pclose);
  // HDF5 may hold the old a.h5 from a read before this moment.
  WriteSource("a.h5", 4, 7);
  auto found = VirtualSources::Find(PublicDataset(dataset.get()), dcpl.get(), *state);
  ASSERT_FALSE(found.ok());
  EXPECT_NE(found.status().message().find("changed while"), std::string::npos)
      << found.status().message();
}

TEST_F(VirtualSourcesTest, UnlimitedExtentsAndPrintfNamesAreNotCached) {
  WriteSource("a.h5", 4, 0);
  WriteVirtual({"a.h5"}, 4, /*unlimited=*/true);
  Settle();
  auto unlimited = Find();
  ASSERT_FALSE(unlimited.ok());
  EXPECT_NE(unlimited.status().message().find("unlimited"), std::string::npos);

  WriteVirtual({"a%%.h5"}, 4);  // "%%" is an escaped percent sign
  Settle();
  auto printf_name = Find();
  ASSERT_FALSE(printf_name.ok());
  EXPECT_NE(printf_name.status().message().find("printf"), std::string::npos);
}

TEST_F(VirtualSourcesTest, ASourceInTheNamingFileItselfNeedsNoWatching) {
  const std::string path = (dir_ / "vds.h5").string();
  {
    ScopedId file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), &H5Fclose);
    const hsize_t dims[1] = {4};
    ScopedId space(H5Screate_simple(1, dims, nullptr), &H5Sclose);
    ScopedId x(H5Dcreate2(file.get(), "x", H5T_NATIVE_INT, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                          H5P_DEFAULT),
               &H5Dclose);
    ScopedId dcpl(H5Pcreate(H5P_DATASET_CREATE), &H5Pclose);
    ASSERT_GE(H5Pset_virtual(dcpl.get(), space.get(), ".", "x", space.get()), 0);
    ScopedId v(H5Dcreate2(file.get(), "v", H5T_NATIVE_INT, space.get(), H5P_DEFAULT, dcpl.get(),
                          H5P_DEFAULT),
               &H5Dclose);
    ASSERT_GE(v.get(), 0);
  }
  Settle();
  auto found = Find();
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_EQ(found.value().candidates(), 0u);
}

}  // namespace
}  // namespace prescient::vol
