#include "vol/passthrough/connector_info.h"

#include <gtest/gtest.h>

namespace prescient::vol {
namespace {

TEST(SplitInfoString, UnderConnectorAndSettings) {
  InfoStringParts p = SplitInfoString("under_vol=0;under_info={};log=debug;stats=/tmp/s.json");
  EXPECT_EQ(p.under_vol, "0");
  EXPECT_EQ(p.under_info, "");
  EXPECT_EQ(p.settings, "log=debug;stats=/tmp/s.json");
}

TEST(SplitInfoString, NestedUnderInfoKeepsItsSemicolons) {
  InfoStringParts p =
      SplitInfoString("under_vol=512;under_info={under_vol=0;under_info={}};enable=0");
  EXPECT_EQ(p.under_vol, "512");
  EXPECT_EQ(p.under_info, "under_vol=0;under_info={}");
  EXPECT_EQ(p.settings, "enable=0");
}

TEST(SplitInfoString, EmptyMeansNativeNoSettings) {
  InfoStringParts p = SplitInfoString("");
  EXPECT_TRUE(p.under_vol.empty());
  EXPECT_TRUE(p.settings.empty());
}

TEST(SplitInfoString, UnbalancedBracesAreRejected) {
  EXPECT_THROW(SplitInfoString("under_vol=0;under_info={"), std::invalid_argument);
  EXPECT_THROW(SplitInfoString("under_info=}"), std::invalid_argument);
  EXPECT_THROW(SplitInfoString("under_info=abc"), std::invalid_argument);
}

TEST(InfoCallbacks, RoundTripThroughString) {
  H5open();
  void* info = nullptr;
  ASSERT_GE(InfoFromString("under_vol=0;under_info={};log=info", &info), 0);
  char* text = nullptr;
  ASSERT_GE(InfoToString(info, &text), 0);
  EXPECT_STREQ(text, "under_vol=0;under_info={};log=info");
  void* copy = InfoCopy(info);
  ASSERT_NE(copy, nullptr);
  int cmp = 1;
  ASSERT_GE(InfoCompare(&cmp, info, copy), 0);
  EXPECT_EQ(cmp, 0);
  H5free_memory(text);
  EXPECT_GE(InfoFree(copy), 0);
  EXPECT_GE(InfoFree(info), 0);
}

// HDF5's API context keeps pointing at a FAPL's info while a file opens, and
// the open replaces that FAPL's info: a copy must outlive the original.
TEST(InfoCallbacks, ACopyOutlivesTheInfoItWasCopiedFrom) {
  H5open();
  void* info = nullptr;
  ASSERT_GE(InfoFromString("under_vol=0;under_info={};log=warn", &info), 0);
  void* copy = InfoCopy(info);
  ASSERT_GE(InfoFree(info), 0);
  char* text = nullptr;
  ASSERT_GE(InfoToString(copy, &text), 0);
  EXPECT_STREQ(text, "under_vol=0;under_info={};log=warn");
  H5free_memory(text);
  EXPECT_GE(InfoFree(copy), 0);
}

TEST(InfoCallbacks, UnknownUnderConnectorFailsCleanly) {
  H5open();
  void* info = nullptr;
  EXPECT_LT(InfoFromString("under_vol=no_such_connector_xyz", &info), 0);
  EXPECT_EQ(info, nullptr);
  H5Eclear2(H5E_DEFAULT);
}

}  // namespace
}  // namespace prescient::vol
