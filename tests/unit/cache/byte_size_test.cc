#include <gtest/gtest.h>
#include <unistd.h>

#include "cache/core/cache_options.h"
#include "cache/core/segment_layout.h"

namespace prescient::cache {
namespace {

std::uint64_t Parse(const char* text) {
  auto r = ParseByteSize(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().message();
  return r.ok() ? r.value() : 0;
}

TEST(ParseByteSize, UnitsAndForms) {
  EXPECT_EQ(Parse("4096"), 4096u);
  EXPECT_EQ(Parse("0"), 0u);
  EXPECT_EQ(Parse("17B"), 17u);
  EXPECT_EQ(Parse("8GiB"), 8ull << 30);
  EXPECT_EQ(Parse("8gib"), 8ull << 30);
  EXPECT_EQ(Parse("8G"), 8ull << 30);
  EXPECT_EQ(Parse("8GB"), 8000000000ull);
  EXPECT_EQ(Parse(" 512 MiB "), 512ull << 20);
  EXPECT_EQ(Parse("3KiB"), 3072u);
  EXPECT_EQ(Parse("3KB"), 3000u);
  EXPECT_EQ(Parse("3k"), 3072u);
  EXPECT_EQ(Parse("2TiB"), 2ull << 40);
  EXPECT_EQ(Parse("2TB"), 2000000000000ull);
  EXPECT_EQ(Parse("1.5GiB"), 3ull << 29);
  EXPECT_EQ(Parse("0.5KB"), 500u);
}

TEST(ParseByteSize, ErrorsAreClear) {
  for (const char* bad : {"", "GiB", "8 XB", "-1G", "1.2.3G", "8GiBs", "1e9",
                          "99999999999999999999", "20000000TiB"}) {
    auto r = ParseByteSize(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "' parsed as " << (r.ok() ? r.value() : 0);
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("invalid byte size"), std::string::npos);
      EXPECT_NE(r.status().message().find("GiB"), std::string::npos);  // lists the units
    }
  }
}

TEST(CacheOptions, DefaultCapacityIsAFractionOfShm) {
  const std::uint64_t def = DefaultCapacityBytes("/dev/shm");
  EXPECT_GT(def, 0u);
  EXPECT_EQ(def % (1 << 20), 0u);
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  EXPECT_LE(def, static_cast<std::uint64_t>(pages) * page /
                     4);  // reserved up front: a quarter of RAM at most
}

TEST(CacheOptions, SegmentPathNamesUserAndNode) {
  CacheOptions o;
  o.node_id = "node 7/x";
  o.shm_dir = "/somewhere";
  const std::string uid = std::to_string(geteuid());
  EXPECT_EQ(SegmentPath(o), "/somewhere/prescient-u" + uid + "/prescient-cache-v" +
                                std::to_string(detail::kLayoutVersion) + "-u" + uid + "-node_7_x");
  o.node_id.clear();
  EXPECT_NE(SegmentPath(o).find(DefaultNodeId().substr(0, 3)), std::string::npos);
}

}  // namespace
}  // namespace prescient::cache
