// The binder of the pip-wheel plugin (vol/loaded_hdf5): the placeholder substitution and the
// checks made before anything is loaded. The whole route runs for real, against a real wheel,
// in tests/python/wheel.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "vol/hdf5_compat.h"
#include "vol/loaded_hdf5/bind.h"

namespace prescient::vol::loaded_hdf5 {
namespace {

TEST(ReplacePlaceholder, WritesThePathNulPaddedInPlace) {
  std::string image =
      std::string("head\0", 5) + "libplaceholder-xxxxxxxx.so" + std::string("\0tail", 5);
  const size_t size = image.size();
  ASSERT_TRUE(ReplacePlaceholder(image, "libplaceholder-xxxxxxxx.so", "/lib/libhdf5.so"));
  EXPECT_EQ(image.size(), size);
  EXPECT_EQ(image.substr(5, 15), "/lib/libhdf5.so");
  EXPECT_EQ(image.substr(20, 11), std::string(11, '\0'));
  EXPECT_EQ(image.substr(31), std::string("\0tail", 5));
}

TEST(ReplacePlaceholder, RefusesWhatDoesNotFit) {
  std::string image = "..libplaceholder.so..";
  EXPECT_FALSE(ReplacePlaceholder(image, "libplaceholder.so", "/a/path/longer/than/it.so"));
  // The replacement needs its terminating NUL inside the placeholder.
  EXPECT_FALSE(ReplacePlaceholder(image, "libplaceholder.so", "libplaceholder.s1"));
  EXPECT_EQ(image, "..libplaceholder.so..");
}

TEST(ReplacePlaceholder, RefusesAMissingOrRepeatedPlaceholder) {
  std::string missing = "no placeholder here";
  EXPECT_FALSE(ReplacePlaceholder(missing, "libplaceholder.so", "/x.so"));
  std::string twice = "libplaceholder.so libplaceholder.so";
  EXPECT_FALSE(ReplacePlaceholder(twice, "libplaceholder.so", "/x.so"));
}

TEST(LoadBoundConnector, RefusesACallerThatIsNotALibhdf5) {
  // An address inside the C library.
  BindResult result =
      LoadBoundConnector(reinterpret_cast<const void*>(&std::strlen), "/nonexistent",
                         "libplaceholder.so", H5_VERS_MAJOR, H5_VERS_MINOR);
  EXPECT_EQ(result.connector_info, nullptr);
  EXPECT_NE(result.error.find("is not a libhdf5"), std::string::npos) << result.error;
}

TEST(LoadBoundConnector, RefusesAnotherHdf5Series) {
  BindResult result = LoadBoundConnector(reinterpret_cast<const void*>(&H5open), "/nonexistent",
                                         "libplaceholder.so", H5_VERS_MAJOR + 1, 0);
  EXPECT_EQ(result.connector_info, nullptr);
  EXPECT_NE(result.error.find("this plugin was built for HDF5"), std::string::npos) << result.error;
  EXPECT_NE(result.error.find(result.hdf5_path), std::string::npos) << result.error;
}

TEST(LoadBoundConnector, SaysWhenTheConnectorFileIsMissing) {
  BindResult result =
      LoadBoundConnector(reinterpret_cast<const void*>(&H5open), "/nonexistent/unbound.so",
                         "libplaceholder.so", H5_VERS_MAJOR, H5_VERS_MINOR);
  EXPECT_EQ(result.connector_info, nullptr);
  EXPECT_NE(result.error.find("cannot read the connector /nonexistent/unbound.so"),
            std::string::npos)
      << result.error;
}

}  // namespace
}  // namespace prescient::vol::loaded_hdf5
