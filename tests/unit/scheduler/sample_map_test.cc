// SampleMap: numbering over files then rows, lookups, validation, binding checks.
#include "scheduler/core/sample_map.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
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
  std::vector<MapFile> nameless = Files({1});
  nameless[0].path.clear();
  EXPECT_THROW(SampleMap(nameless, {{"x", 1}}), std::invalid_argument);
  EXPECT_THROW(SampleMap(Files({0xffffffffull, 1}), {{"x", 1}}), std::invalid_argument);
}

// PatchCamelyon's layout: images in one file, their labels in another, the
// same rows; a third field beside the images.
std::vector<MapFile> PairedFiles() {
  std::vector<MapFile> files = Files({4, 3});
  for (std::uint32_t i = 0; i < files.size(); ++i) {
    files[i].field_files = {
        {1, "/labels/y" + std::to_string(i) + ".h5", 50 + i, static_cast<std::int64_t>(70 + i)}};
  }
  return files;
}

TEST(SampleMapTest, FieldsInFilesOfTheirOwn) {
  const SampleMap map(PairedFiles(), {{"x", 64}, {"y", 8}, {"meta", 4}});
  EXPECT_TRUE(map.has_field_files());
  EXPECT_FALSE(SampleMap(Files({4}), {{"x", 64}}).has_field_files());
  EXPECT_EQ(map.num_samples(), 7u);
  // A field file finds its file of the map; the field's place is its own file.
  EXPECT_EQ(map.FileIndex("/labels/y1.h5"), 1u);
  EXPECT_EQ(map.FileIndex("/data/f1001.h5"), 1u);
  EXPECT_EQ(map.PlaceOf(1, 1).path, "/labels/y1.h5");
  EXPECT_EQ(map.PlaceOf(1, 1).size, 51u);
  EXPECT_EQ(map.PlaceOf(1, 0).path, "/data/f1001.h5");
  EXPECT_EQ(map.PlaceOf(1, 2).path, "/data/f1001.h5");
  EXPECT_EQ(map.PathsOf(0), (std::vector<std::string_view>{"/data/f1000.h5", "/labels/y0.h5"}));
  // Each field is compared with the size and time of the file it lives in.
  EXPECT_EQ(map.Mismatch(1, 1, 3, 8, 51, 71), "");
  EXPECT_EQ(map.Mismatch(1, 0, 3, 64, 101, 8), "");
  EXPECT_NE(map.Mismatch(1, 1, 3, 8, 101, 8).find("'/labels/y1.h5' changed"), std::string::npos);
  EXPECT_NE(map.Mismatch(1, 1, 4, 8, 51, 71).find("dataset 'y' of '/labels/y1.h5' has 4 rows"),
            std::string::npos);
  EXPECT_EQ(map, SampleMap(PairedFiles(), {{"x", 64}, {"y", 8}, {"meta", 4}}));
  EXPECT_NE(map, SampleMap(Files({4, 3}), {{"x", 64}, {"y", 8}, {"meta", 4}}));
}

TEST(SampleMapTest, RejectsImpossibleFieldFiles) {
  const std::vector<MapField> fields = {{"x", 64}, {"y", 8}};
  auto with = [&](auto change) {
    std::vector<MapFile> files = PairedFiles();
    change(files);
    return SampleMap(files, fields);
  };
  EXPECT_NO_THROW(with([](auto&) {}));
  // A field beyond the map's, or listed twice.
  EXPECT_THROW(with([](auto& f) { f[0].field_files[0].field = 2; }), std::invalid_argument);
  EXPECT_THROW(with([](auto& f) { f[0].field_files.push_back({1, "/labels/z.h5", 1, 1}); }),
               std::invalid_argument);
  // No path, the file's own path, or every field elsewhere.
  EXPECT_THROW(with([](auto& f) { f[0].field_files[0].path.clear(); }), std::invalid_argument);
  EXPECT_THROW(with([](auto& f) { f[0].field_files[0].path = f[0].path; }), std::invalid_argument);
  EXPECT_THROW(with([](auto& f) { f[0].field_files.push_back({0, "/labels/z.h5", 1, 1}); }),
               std::invalid_argument);
  // One path in two files of the map (as a field file or a file's own path).
  EXPECT_THROW(with([](auto& f) { f[1].field_files[0].path = f[0].field_files[0].path; }),
               std::invalid_argument);
  EXPECT_THROW(with([](auto& f) { f[1].field_files[0].path = f[0].path; }), std::invalid_argument);
}

// A group per sample (PDEBench's seeds): one entry per group of one file.
std::vector<MapFile> Groups(const std::vector<std::string>& groups, std::uint64_t rows) {
  std::vector<MapFile> files;
  for (const std::string& g : groups) files.push_back({"/pde/seeds.h5", rows, 900, 3, {}, g});
  return files;
}

TEST(SampleMapTest, GroupsOfOneFileAreFilesOfTheMap) {
  const SampleMap map(Groups({"0000", "0001", "train/0002"}, 101),
                      {{"data", 128 * 128 * 4}, {"grid/t", 4}});
  EXPECT_TRUE(map.has_groups());
  EXPECT_FALSE(SampleMap(Files({4}), {{"x", 64}}).has_groups());
  EXPECT_EQ(map.num_samples(), 303u);
  EXPECT_EQ(map.Locate(150), (SampleLocation{1, 49}));
  EXPECT_EQ(map.FileIndex("/pde/seeds.h5", "0001"), 1u);
  EXPECT_EQ(map.FileIndex("/pde/seeds.h5"), std::nullopt);  // no entry of the root
  EXPECT_TRUE(map.HasPath("/pde/seeds.h5"));
  EXPECT_FALSE(map.HasPath("/pde/other.h5"));
  // A dataset's group and field come from its name, with or without '/'.
  EXPECT_EQ(map.Find("/pde/seeds.h5", "/0001/data"), (MapSlot{1, 0}));
  EXPECT_EQ(map.Find("/pde/seeds.h5", "0000/grid/t"), (MapSlot{0, 1}));
  EXPECT_EQ(map.Find("/pde/seeds.h5", "train/0002/data"), (MapSlot{2, 0}));
  EXPECT_EQ(map.Find("/pde/seeds.h5", "0003/data"), std::nullopt);    // a group not mapped
  EXPECT_EQ(map.Find("/pde/seeds.h5", "0000/grid/x"), std::nullopt);  // not a field
  EXPECT_EQ(map.Find("/pde/seeds.h5", "data"), std::nullopt);
  EXPECT_EQ(map.Find("/pde/other.h5", "0000/data"), std::nullopt);
  EXPECT_EQ(map.DatasetOf(2, 1), "train/0002/grid/t");
  EXPECT_EQ(map.PlaceOf(1, 0).path, "/pde/seeds.h5");
  EXPECT_EQ(map.Mismatch(1, 0, 101, 128 * 128 * 4, 900, 3), "");
  EXPECT_NE(map.Mismatch(1, 0, 100, 128 * 128 * 4, 900, 3)
                .find("dataset '0001/data' of '/pde/seeds.h5' has 100 rows"),
            std::string::npos);
  // The root and groups of one file may be mapped side by side.
  std::vector<MapFile> mixed = Groups({"a"}, 2);
  mixed.push_back({"/pde/seeds.h5", 5, 900, 3});
  const SampleMap both(mixed, {{"x", 0}});
  EXPECT_EQ(both.Find("/pde/seeds.h5", "/x"), (MapSlot{1, 0}));
  EXPECT_EQ(both.Find("/pde/seeds.h5", "/a/x"), (MapSlot{0, 0}));
  EXPECT_EQ(both.DatasetOf(1, 0), "x");
}

// PDEBench's seeds read whole: each group one sample of all its rows, the
// groups of uneven rows (the binary search) or of the same rows (division).
TEST(SampleMapTest, AGroupReadWholeIsOneSampleOfAllItsRows) {
  std::vector<MapFile> files = Groups({"0000", "0001", "0002"}, 256);
  files[1].rows = 101;
  for (MapFile& f : files) f.rows_per_sample = f.rows;
  const SampleMap map(files, {{"data", 1024}, {"t", 4}});
  EXPECT_TRUE(map.has_row_blocks());
  EXPECT_FALSE(SampleMap(Groups({"0000"}, 256), {{"data", 0}}).has_row_blocks());
  EXPECT_EQ(map.num_samples(), 3u);
  EXPECT_EQ(map.FirstSample(2), 2u);
  EXPECT_EQ(map.Locate(1), (SampleLocation{1, 0, 101}));
  EXPECT_EQ(map.Locate(2), (SampleLocation{2, 0, 256}));
  EXPECT_THROW(map.Locate(3), std::out_of_range);
  for (std::uint64_t row : {0u, 100u}) EXPECT_EQ(map.SampleOf(1, row), 1u);
  EXPECT_EQ(map.SampleOf(2, 255), 2u);
  // The mean sample: (256 + 101 + 256) rows of 1028 bytes over 3 samples.
  EXPECT_EQ(map.bytes_per_sample(), (613u * 1028 + 2) / 3);
  EXPECT_EQ(map.SampleBytes(10), (6130u + 2) / 3);
  EXPECT_EQ(SampleMap(Files({3, 5}), {{"x", 8}}).SampleBytes(10), 10u);

  // Blocks of 4 rows in files of the same rows: located by division.
  std::vector<MapFile> blocks = Files({8, 8, 4});
  for (MapFile& f : blocks) f.rows_per_sample = 4;
  const SampleMap by_four(blocks, {{"x", 2}});
  EXPECT_EQ(by_four.num_samples(), 5u);
  EXPECT_EQ(by_four.Locate(3), (SampleLocation{1, 4, 4}));
  EXPECT_EQ(by_four.Locate(4), (SampleLocation{2, 0, 4}));
  EXPECT_EQ(by_four.SampleOf(1, 7), 3u);
  EXPECT_EQ(by_four.bytes_per_sample(), 8u);

  // Rows per sample must divide the rows.
  files[0].rows_per_sample = 100;
  EXPECT_THROW(SampleMap(files, {{"data", 0}}), std::invalid_argument);
  files[0].rows_per_sample = 0;
  EXPECT_THROW(SampleMap(files, {{"data", 0}}), std::invalid_argument);
}

TEST(SampleMapTest, RejectsImpossibleGroups) {
  const std::vector<MapField> fields = {{"data", 0}};
  EXPECT_THROW(SampleMap(Groups({"0000", "0000"}, 1), fields), std::invalid_argument);
  for (const char* group : {"/0000", "0000/", "a//b"}) {
    EXPECT_THROW(SampleMap(Groups({group}, 1), fields), std::invalid_argument) << group;
  }
  EXPECT_NO_THROW(SampleMap(Groups({"a/b"}, 1), fields));
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
