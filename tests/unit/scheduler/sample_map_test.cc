// SampleMap: numbering over files then rows, lookups, validation, binding checks.
#include "scheduler/core/sample_map.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace prescient::scheduler {
namespace {

std::vector<MapFile> Files(const std::vector<std::uint64_t>& rows) {
  std::vector<MapFile> files;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    files.push_back({"/data/f" + std::to_string(1000 + i) + ".h5", rows[i], 100 + i,
                     static_cast<std::int64_t>(7 + i)});
  }
  return files;
}

TEST(SampleMapTest, NumbersSamplesOverFilesThenRows) {
  // Uneven rows: the binary-search path.
  const SampleMap map(Files({3, 5, 1, 4}), {{"images", 64}, {"/labels", 8}});
  EXPECT_EQ(map.num_samples(), 13u);
  EXPECT_EQ(map.bytes_per_sample(), 72u);
  EXPECT_EQ(map.FirstSample(0), 0u);
  EXPECT_EQ(map.FirstSample(2), 8u);
  EXPECT_EQ(map.FirstSample(4), 13u);
  std::uint64_t sample = 0;
  for (std::uint32_t f = 0; f < 4; ++f) {
    for (std::uint64_t r = 0; r < map.files()[f].rows; ++r, ++sample) {
      EXPECT_EQ(map.Locate(static_cast<SampleId>(sample)), (SampleLocation{f, r})) << sample;
    }
  }
  EXPECT_THROW(map.Locate(13), std::out_of_range);
}

TEST(SampleMapTest, UniformFilesLocateByDivisionAndAShortLastFile) {
  const SampleMap map(Files({128, 128, 128, 50}), {{"full", 4 << 20}, {"unitPar", 16}});
  EXPECT_EQ(map.num_samples(), 434u);
  for (SampleId s = 0; s < 434; ++s) {
    EXPECT_EQ(map.Locate(s), (SampleLocation{s / 128, s % 128u}));
  }
  // One sample per file, thousands of files.
  const SampleMap one(Files(std::vector<std::uint64_t>(5000, 1)), {{"x", 0}});
  EXPECT_EQ(one.Locate(4321), (SampleLocation{4321, 0}));
  EXPECT_EQ(one.FileIndex("/data/f5320.h5"), 4320u);
}

TEST(SampleMapTest, FileAndFieldLookups) {
  const SampleMap map(Files({2, 2}), {{"records_0", 10}, {"records_1", 10}, {"labels", 4}});
  EXPECT_EQ(map.FileIndex("/data/f1001.h5"), 1u);
  EXPECT_FALSE(map.FileIndex("data/f1001.h5"));  // absolute paths only
  EXPECT_FALSE(map.FileIndex("/data/f1002.h5"));
  EXPECT_EQ(map.FieldIndex("records_1"), 1u);  // not the first field of the same shape
  EXPECT_EQ(map.FieldIndex("/labels"), 2u);
  EXPECT_EQ(map.FieldIndex("//labels"), 2u);
  EXPECT_FALSE(map.FieldIndex("records_2"));
}

TEST(SampleMapTest, MismatchNamesTheFileAndWhatDiffers) {
  const SampleMap map(Files({4, 4}), {{"images", 64}, {"labels", 0}});
  EXPECT_EQ(map.Mismatch(1, 0, 4, 64, 101, 8), "");
  EXPECT_EQ(map.Mismatch(1, 1, 4, 12345, 101, 8), "");  // 0 = row size unknown
  EXPECT_NE(map.Mismatch(1, 0, 4, 64, 102, 8).find("'/data/f1001.h5' changed"), std::string::npos);
  EXPECT_NE(map.Mismatch(1, 0, 4, 64, 101, 9).find("changed"), std::string::npos);
  EXPECT_NE(map.Mismatch(0, 0, 5, 64, 100, 7).find("has 5 rows, the schedule 4"),
            std::string::npos);
  EXPECT_NE(map.Mismatch(0, 0, 4, 32, 100, 7).find("rows of 32 bytes"), std::string::npos);
  EXPECT_NE(map.Mismatch(2, 0, 4, 64, 100, 7), "");
}

TEST(SampleMapTest, EmptyMapDescribesAbstractSamples) {
  const SampleMap empty;
  EXPECT_FALSE(empty.has_files());
  EXPECT_EQ(empty.num_samples(), 0u);
  EXPECT_THROW(empty.Locate(0), std::out_of_range);
  // Row sizes without files (a schedule for the simulator, made without --dataset).
  const SampleMap sized({}, {{"", 4096}});
  EXPECT_EQ(sized.bytes_per_sample(), 4096u);
  EXPECT_EQ(SampleMap(), SampleMap({}, {}));
  EXPECT_NE(SampleMap(), sized);
}

TEST(SampleMapTest, RejectsImpossibleMaps) {
  EXPECT_THROW(SampleMap(Files({1, 0}), {{"x", 1}}), std::invalid_argument);  // empty file
  EXPECT_THROW(SampleMap(Files({1}), {}), std::invalid_argument);             // no field
  std::vector<MapFile> twice = Files({1, 1});
  twice[1].path = twice[0].path;
  EXPECT_THROW(SampleMap(twice, {{"x", 1}}), std::invalid_argument);
  EXPECT_THROW(SampleMap(Files({1}), {{"x", 1}, {"/x", 2}}), std::invalid_argument);
  std::vector<MapFile> relative = Files({1});
  relative[0].path = "data/f.h5";
  EXPECT_THROW(SampleMap(relative, {{"x", 1}}), std::invalid_argument);
  EXPECT_THROW(SampleMap(Files({0xffffffffull, 1}), {{"x", 1}}), std::invalid_argument);
}

TEST(SampleMapTest, CopiesShareTablesAndCompareByValue) {
  const SampleMap a(Files({2, 3}), {{"x", 1}});
  const SampleMap b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(&a.files(), &b.files());
  EXPECT_EQ(a, SampleMap(Files({2, 3}), {{"x", 1}}));
  EXPECT_NE(a, SampleMap(Files({2, 4}), {{"x", 1}}));
}

}  // namespace
}  // namespace prescient::scheduler
