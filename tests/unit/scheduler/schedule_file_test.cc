// The schedule file: round trips, and one specific error per corruption class.
#include "scheduler/core/schedule_file.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "scheduler/core/loader_orders.h"
#include "scheduler/core/schedule_format.h"

namespace prescient::scheduler {
namespace {

using Bytes = std::vector<char>;

class ScheduleFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "sched_file_test_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::string cmd = "mkdir -p '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    layout_.ranks = 3;
    layout_.ranks_per_node = 2;
    layout_.workers = 2;
    layout_.batch_size = 5;
    spec_.seed = 42;
    schedule_ = GenerateLoaderSchedule(spec_, 97, layout_, 3);
    dataset_ = {"/data/train.h5", "images", 97, 3 * 224 * 224, 123456789, 1700000000123};
    header_.map = SampleMap({{dataset_.file_path, 97, 123456789, 1700000000123}},
                            {{"images", 3 * 224 * 224}});
    header_.source = "torch-distributed";
    header_.parameters = CanonicalLoaderParameters(spec_);
    header_.layout = layout_;
    header_.epochs = 3;
    header_.num_samples = 97;
    header_.generator = "unit test";
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir_ + "'";
    (void)std::system(cmd.c_str());
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  static Bytes Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), {});
  }
  static void Write(const std::string& path, const Bytes& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  // The format version in a file's preamble.
  static std::uint32_t VersionOf(const std::string& path) {
    const Bytes bytes = Read(path);
    std::uint32_t version = 0;
    std::memcpy(&version, bytes.data() + 8, sizeof version);
    return version;
  }

  // Makes the header's checksum good again after a test changed its bytes,
  // so that what is checked is the change itself.
  static void ResealHeader(Bytes& bytes) {
    auto* raw = reinterpret_cast<const std::byte*>(bytes.data());
    format::Preamble pre = format::DecodePreamble(
        std::span<const std::byte, format::kPreambleSize>(raw, format::kPreambleSize));
    pre.header_crc = format::Crc32({raw + pre.header_offset, pre.header_size});
    const std::vector<std::byte> sealed = format::EncodePreamble(pre);
    std::memcpy(bytes.data(), sealed.data(), sealed.size());
  }

  // Opens, verifies and materialises; returns the error code or -1.
  static int ErrorOf(const std::string& path) {
    try {
      ScheduleReader reader = ScheduleReader::Open(path);
      reader.VerifyAll();
      reader.Materialize();
      return -1;
    } catch (const ScheduleFileError& e) {
      return static_cast<int>(e.code());
    }
  }

  static void ExpectSameSchedule(const AccessSchedule& a, const AccessSchedule& b) {
    ASSERT_EQ(a.epochs(), b.epochs());
    ASSERT_EQ(a.layout().ranks, b.layout().ranks);
    for (std::uint32_t e = 0; e < a.epochs(); ++e) {
      for (std::uint32_t r = 0; r < a.layout().ranks; ++r) {
        EXPECT_EQ(a.Part(r, e).samples, b.Part(r, e).samples);
        EXPECT_EQ(a.Part(r, e).step_begin, b.Part(r, e).step_begin);
      }
    }
  }

  std::string dir_;
  WorldLayout layout_;
  LoaderSpec spec_;
  AccessSchedule schedule_;
  ScheduleHeader header_;
  DatasetFingerprint dataset_;  // the map's one dataset as a reader sees it
};

TEST_F(ScheduleFileTest, ListsRoundTrip) {
  WriteScheduleFile(Path("a.sched"), header_, schedule_);
  ScheduleReader reader = ScheduleReader::Open(Path("a.sched"));
  EXPECT_EQ(reader.header().map, header_.map);
  EXPECT_EQ(reader.header().source, header_.source);
  EXPECT_EQ(reader.header().parameters, header_.parameters);
  EXPECT_EQ(reader.header().generator, "unit test");
  EXPECT_EQ(reader.header().storage, ScheduleStorage::kLists);
  EXPECT_EQ(reader.header().layout.workers, 2u);
  ExpectSameSchedule(reader.Materialize(), schedule_);
  EXPECT_EQ(reader.StepsInEpoch(1), 7u);  // ceil(33 / 5)
  EXPECT_EQ(reader.EpochFirstStep(2), 14u);
  const RankEpochView part = reader.Part(2, 1);
  EXPECT_EQ(part.sample(4), schedule_.Part(2, 1).samples[4]);
  EXPECT_EQ(part.Step(6).size(), 3u);
}

TEST_F(ScheduleFileTest, RecipeRoundTripsToTheSameLists) {
  WriteRecipeFile(Path("r.sched"), header_);
  ScheduleReader reader = ScheduleReader::Open(Path("r.sched"));
  EXPECT_EQ(reader.header().storage, ScheduleStorage::kRecipe);
  ExpectSameSchedule(reader.Materialize(), schedule_);
  // Out-of-order access regenerates correctly.
  EXPECT_EQ(reader.Part(1, 2).ToRankEpoch().samples, schedule_.Part(1, 2).samples);
  EXPECT_EQ(reader.Part(1, 0).ToRankEpoch().samples, schedule_.Part(1, 0).samples);
  EXPECT_EQ(reader.EpochFirstStep(3), 21u);
}

TEST_F(ScheduleFileTest, ViewsOutliveTheReader) {
  WriteScheduleFile(Path("a.sched"), header_, schedule_);
  RankEpochView view;
  {
    ScheduleReader reader = ScheduleReader::Open(Path("a.sched"));
    view = reader.Part(0, 0);
  }
  EXPECT_EQ(view.ToRankEpoch().samples, schedule_.Part(0, 0).samples);
}

TEST_F(ScheduleFileTest, WriterRejectsInconsistentSchedules) {
  ScheduleHeader wrong = header_;
  wrong.epochs = 2;
  EXPECT_THROW(WriteScheduleFile(Path("x"), wrong, schedule_), std::invalid_argument);
  AccessSchedule bad = schedule_;
  bad.Part(1, 0).step_begin.push_back(bad.Part(1, 0).samples.size());
  EXPECT_THROW(WriteScheduleFile(Path("x"), header_, bad), std::invalid_argument);
  bad = schedule_;
  bad.Part(0, 0).samples[0] = 97;
  EXPECT_THROW(WriteScheduleFile(Path("x"), header_, bad), std::invalid_argument);
  ScheduleHeader plan = header_;
  plan.source = "plan";
  EXPECT_THROW(WriteRecipeFile(Path("x"), plan), std::invalid_argument);
}

TEST_F(ScheduleFileTest, MissingFileIsAnIoError) {
  EXPECT_EQ(ErrorOf(Path("nope")), static_cast<int>(ScheduleFileErrorCode::kIo));
}

TEST_F(ScheduleFileTest, EmptyAndTruncatedFiles) {
  WriteScheduleFile(Path("a.sched"), header_, schedule_);
  const Bytes full = Read(Path("a.sched"));
  for (std::size_t keep :
       {std::size_t{0}, std::size_t{5}, std::size_t{40}, std::size_t{200}, full.size() - 1}) {
    Write(Path("t.sched"), Bytes(full.begin(), full.begin() + static_cast<long>(keep)));
    EXPECT_EQ(ErrorOf(Path("t.sched")), static_cast<int>(ScheduleFileErrorCode::kTruncated))
        << keep;
  }
  Bytes longer = full;
  longer.push_back(0);
  Write(Path("l.sched"), longer);
  EXPECT_EQ(ErrorOf(Path("l.sched")), static_cast<int>(ScheduleFileErrorCode::kCorrupt));
}

TEST_F(ScheduleFileTest, BadMagic) {
  WriteScheduleFile(Path("a.sched"), header_, schedule_);
  Bytes bytes = Read(Path("a.sched"));
  bytes[1] = 'X';
  Write(Path("m.sched"), bytes);
  EXPECT_EQ(ErrorOf(Path("m.sched")), static_cast<int>(ScheduleFileErrorCode::kBadMagic));
  Write(Path("text.sched"), Bytes{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'});
  EXPECT_EQ(ErrorOf(Path("text.sched")), static_cast<int>(ScheduleFileErrorCode::kBadMagic));
}

TEST_F(ScheduleFileTest, BadVersionEvenWithAValidChecksum) {
  WriteScheduleFile(Path("a.sched"), header_, schedule_);
  Bytes bytes = Read(Path("a.sched"));
  const std::uint32_t version = format::kFormatVersion + 1;
  std::memcpy(bytes.data() + 8, &version, 4);
  const auto crc =
      static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), 76));
  std::memcpy(bytes.data() + 76, &crc, 4);
  Write(Path("v.sched"), bytes);
  try {
    ScheduleReader::Open(Path("v.sched"));
    FAIL() << "opened a file of a later version";
  } catch (const ScheduleFileError& e) {
    EXPECT_EQ(e.code(), ScheduleFileErrorCode::kBadVersion);
    EXPECT_NE(std::string(e.what()).find("version " + std::to_string(version)), std::string::npos)
        << e.what();
  }
}

TEST_F(ScheduleFileTest, BadChecksumsInEverySection) {
  WriteScheduleFile(Path("a.sched"), header_, schedule_);
  const Bytes full = Read(Path("a.sched"));
  std::uint64_t index_offset;
  std::memcpy(&index_offset, full.data() + 40, 8);
  // Preamble (file_size field), header (dataset path), index, a sample list.
  for (std::size_t offset :
       {std::size_t{20}, std::size_t{90}, std::size_t{index_offset + 10}, full.size() - 40}) {
    Bytes bytes = full;
    bytes[offset] = static_cast<char>(bytes[offset] ^ 0x10);
    Write(Path("c.sched"), bytes);
    EXPECT_EQ(ErrorOf(Path("c.sched")), static_cast<int>(ScheduleFileErrorCode::kBadChecksum))
        << offset;
  }
}

TEST_F(ScheduleFileTest, ListChecksumIsCheckedOnFirstUseOfThePart) {
  WriteScheduleFile(Path("a.sched"), header_, schedule_);
  Bytes bytes = Read(Path("a.sched"));
  bytes[bytes.size() - 40] ^= 1;  // inside the last part (rank 2, epoch 2)
  Write(Path("c.sched"), bytes);
  ScheduleReader reader = ScheduleReader::Open(Path("c.sched"));  // header and index are fine
  EXPECT_NO_THROW(reader.Part(0, 0));
  try {
    reader.Part(2, 2);
    FAIL() << "served a corrupt part";
  } catch (const ScheduleFileError& e) {
    EXPECT_EQ(e.code(), ScheduleFileErrorCode::kBadChecksum);
    EXPECT_NE(std::string(e.what()).find("rank 2 epoch 2"), std::string::npos) << e.what();
  }
}

TEST_F(ScheduleFileTest, FingerprintMismatchNamesTheField) {
  WriteScheduleFile(Path("a.sched"), header_, schedule_);
  ScheduleReader reader = ScheduleReader::Open(Path("a.sched"));
  EXPECT_NO_THROW(reader.CheckDataset(dataset_));
  DatasetFingerprint other = dataset_;
  other.file_path = "/elsewhere/train.h5";  // paths are not compared by default
  EXPECT_NO_THROW(reader.CheckDataset(other));
  FingerprintCheck strict;
  strict.path = true;
  EXPECT_THROW(reader.CheckDataset(other, strict), ScheduleFileError);
  other = dataset_;
  other.rows = 98;
  try {
    reader.CheckDataset(other);
    FAIL();
  } catch (const ScheduleFileError& e) {
    EXPECT_EQ(e.code(), ScheduleFileErrorCode::kFingerprintMismatch);
    EXPECT_NE(std::string(e.what()).find("row count is 98"), std::string::npos) << e.what();
  }
  other = dataset_;
  other.mtime_ns += 1;
  EXPECT_THROW(reader.CheckDataset(other), ScheduleFileError);
  FingerprintCheck shape_only;
  shape_only.file_stat = false;
  EXPECT_NO_THROW(reader.CheckDataset(other, shape_only));
}

TEST_F(ScheduleFileTest, FingerprintOfARealFile) {
  Write(Path("data.bin"), Bytes(1234, 'x'));
  const DatasetFingerprint fp = FingerprintDataset(Path("data.bin"), "x", 10, 100);
  EXPECT_EQ(fp.file_size, 1234u);
  EXPECT_GT(fp.mtime_ns, 0);
  EXPECT_THROW(FingerprintDataset(Path("missing"), "x", 1, 1), ScheduleFileError);
}

TEST_F(ScheduleFileTest, OutOfRangeLookups) {
  WriteScheduleFile(Path("a.sched"), header_, schedule_);
  ScheduleReader reader = ScheduleReader::Open(Path("a.sched"));
  EXPECT_THROW(reader.Part(3, 0), ScheduleFileError);
  EXPECT_THROW(reader.Part(0, 3), ScheduleFileError);
  EXPECT_THROW(reader.Part(0, 0).At(33), ScheduleFileError);
}

TEST_F(ScheduleFileTest, UnknownRecipeSourceIsUnsupported) {
  WriteRecipeFile(Path("r.sched"), header_);
  Bytes bytes = Read(Path("r.sched"));
  // Replace "torch-distributed" with another name of the same length and fix
  // the header CRC so only the meaning is wrong.
  const std::string from = "torch-distributed", to = "torch-elsewhere!!";
  auto it = std::search(bytes.begin(), bytes.end(), from.begin(), from.end());
  ASSERT_NE(it, bytes.end());
  std::copy(to.begin(), to.end(), it);
  std::uint64_t header_size;
  std::memcpy(&header_size, bytes.data() + 32, 8);
  const auto crc = static_cast<std::uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(bytes.data() + 80), static_cast<uInt>(header_size)));
  std::memcpy(bytes.data() + 64, &crc, 4);
  const auto pcrc =
      static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), 76));
  std::memcpy(bytes.data() + 76, &pcrc, 4);
  Write(Path("u.sched"), bytes);
  EXPECT_EQ(ErrorOf(Path("u.sched")), static_cast<int>(ScheduleFileErrorCode::kUnsupported));
}

TEST_F(ScheduleFileTest, EverySingleByteFlipIsCaughtOrHarmless) {
  // A small file, every byte flipped in turn: the reader must either throw
  // ScheduleFileError or serve exactly the original schedule (flips in
  // padding and reserved bytes are harmless). Never crash, never lie.
  ScheduleHeader small = header_;
  WorldLayout l = layout_;
  l.ranks = 2;
  small.layout = l;
  small.num_samples = 9;
  small.epochs = 2;
  small.map = SampleMap({{"/f", 9, 1, 2}}, {{"x", 4}});
  const AccessSchedule s = GenerateLoaderSchedule(spec_, 9, l, 2);
  WriteScheduleFile(Path("s.sched"), small, s);
  const Bytes full = Read(Path("s.sched"));
  int caught = 0;
  for (std::size_t i = 0; i < full.size(); ++i) {
    Bytes bytes = full;
    bytes[i] = static_cast<char>(bytes[i] ^ 0x41);
    try {
      ScheduleReader reader =
          ScheduleReader::OpenBytes(std::as_bytes(std::span(bytes.data(), bytes.size())), "flip");
      reader.VerifyAll();
      ExpectSameSchedule(reader.Materialize(), s);
    } catch (const ScheduleFileError&) {
      ++caught;
    }
  }
  EXPECT_GT(caught, static_cast<int>(full.size()) * 3 / 4);
}

// Version 2: the header carries the sample map; a multi-file, multi-field
// map round-trips and the reader binds datasets of it by path and name.
TEST_F(ScheduleFileTest, SampleMapRoundTripsAndChecksDatasets) {
  std::vector<MapFile> files;
  for (int i = 0; i < 8; ++i) {
    files.push_back({"/data/univ_" + std::to_string(i) + ".h5", i < 7 ? 13u : 6u,
                     1000u + static_cast<unsigned>(i), 5 + i});
  }
  ScheduleHeader h = header_;
  h.map = SampleMap(files, {{"full", 4 << 20}, {"unitPar", 16}});
  WriteScheduleFile(Path("m.sched"), h, schedule_);
  WriteRecipeFile(Path("m.recipe"), h);
  for (const char* name : {"m.sched", "m.recipe"}) {
    const ScheduleReader reader = ScheduleReader::Open(Path(name));
    EXPECT_EQ(reader.header().map, h.map);
    EXPECT_EQ(reader.header().map.Locate(96), (SampleLocation{7, 5}));
    // The dataset 'unitPar' of file 3, as a reader sees it.
    DatasetFingerprint fp{"/data/univ_3.h5", "/unitPar", 13, 16, 1003, 8};
    EXPECT_NO_THROW(reader.CheckDataset(fp));
    fp.dataset_name = "labels";
    EXPECT_THROW(reader.CheckDataset(fp), ScheduleFileError);
    fp = {"/data/univ_3.h5", "full", 13, 4 << 20, 1003, 9};  // changed since
    EXPECT_THROW(reader.CheckDataset(fp), ScheduleFileError);
    fp = {"/data/univ_9.h5", "full", 13, 4 << 20, 1003, 8};  // not in the map
    try {
      reader.CheckDataset(fp);
      FAIL();
    } catch (const ScheduleFileError& e) {
      EXPECT_EQ(e.code(), ScheduleFileErrorCode::kFingerprintMismatch);
      EXPECT_NE(std::string(e.what()).find("8 files"), std::string::npos) << e.what();
    }
  }
  // A map that does not cover the samples is refused by the writer.
  h.map = SampleMap({files[0]}, {{"full", 0}});
  EXPECT_THROW(WriteScheduleFile(Path("x.sched"), h, schedule_), std::invalid_argument);
}

// Format version 3: fields in files of their own. Written only when a map
// has them, so other schedules stay readable by builds that read version 2.
TEST_F(ScheduleFileTest, FieldFilesRoundTripInVersionThree) {
  WriteScheduleFile(Path("plain.sched"), header_, schedule_);
  EXPECT_EQ(VersionOf(Path("plain.sched")), 2u);

  std::vector<MapFile> files;
  for (int i = 0; i < 2; ++i) {
    files.push_back({"/pcam/x" + std::to_string(i) + ".h5", i == 0 ? 50u : 47u, 1000u, 5 + i});
    files.back().field_files = {{1, "/pcam/y" + std::to_string(i) + ".h5", 400u, 9 + i}};
  }
  ScheduleHeader h = header_;
  h.map = SampleMap(files, {{"x", 3 * 96 * 96}, {"y", 8}});
  WriteScheduleFile(Path("pair.sched"), h, schedule_);
  WriteRecipeFile(Path("pair.recipe"), h);
  for (const char* name : {"pair.sched", "pair.recipe"}) {
    EXPECT_EQ(VersionOf(Path(name)), 3u);
    const ScheduleReader reader = ScheduleReader::Open(Path(name));
    EXPECT_EQ(reader.header().map, h.map);
    ASSERT_EQ(reader.header().map.files()[1].field_files.size(), 1u);
    EXPECT_EQ(reader.header().map.files()[1].field_files[0].path, "/pcam/y1.h5");
    // The labels are checked against the labels' file, not the images'.
    EXPECT_NO_THROW(reader.CheckDataset({"/pcam/y1.h5", "y", 47, 8, 400, 10}));
    EXPECT_THROW(reader.CheckDataset({"/pcam/x1.h5", "y", 47, 8, 1000, 6}), ScheduleFileError);
    EXPECT_THROW(reader.CheckDataset({"/pcam/y1.h5", "y", 47, 8, 400, 11}), ScheduleFileError);
  }
  // Every byte of the version-3 header is checked (the CRC) or harmless.
  Bytes bytes = Read(Path("pair.sched"));
  for (std::size_t i = format::kPreambleSize; i < format::kPreambleSize + 64; ++i) {
    Bytes flipped = bytes;
    flipped[i] ^= 0x40;
    Write(Path("flip.sched"), flipped);
    EXPECT_NE(ErrorOf(Path("flip.sched")), -1) << i;
  }
}

// Format version 4: files of the map that are groups. Written only when a
// map has them.
TEST_F(ScheduleFileTest, GroupsRoundTripInVersionFour) {
  std::vector<MapFile> files;
  for (int i = 0; i < 2; ++i) {
    files.push_back({"/pde/seeds.h5", i == 0 ? 50u : 47u, 1000u, 5, {}, "000" + std::to_string(i)});
  }
  ScheduleHeader h = header_;
  h.map = SampleMap(files, {{"data", 4096}});
  WriteScheduleFile(Path("groups.sched"), h, schedule_);
  WriteRecipeFile(Path("groups.recipe"), h);
  for (const char* name : {"groups.sched", "groups.recipe"}) {
    EXPECT_EQ(VersionOf(Path(name)), 4u);
    const ScheduleReader reader = ScheduleReader::Open(Path(name));
    EXPECT_EQ(reader.header().map, h.map);
    EXPECT_EQ(reader.header().map.files()[1].group, "0001");
    EXPECT_NO_THROW(reader.CheckDataset({"/pde/seeds.h5", "/0001/data", 47, 4096, 1000, 5}));
    EXPECT_THROW(reader.CheckDataset({"/pde/seeds.h5", "/0001/data", 50, 4096, 1000, 5}),
                 ScheduleFileError);
    EXPECT_THROW(reader.CheckDataset({"/pde/seeds.h5", "/0002/data", 47, 4096, 1000, 5}),
                 ScheduleFileError);
  }
  // A group that could not have been written ("/001", checksums made good)
  // is refused as corrupt.
  Bytes bytes = Read(Path("groups.sched"));
  const std::string group = "0001";
  const auto at = std::search(bytes.begin(), bytes.end(), group.begin(), group.end());
  ASSERT_NE(at, bytes.end());
  *at = '/';
  ResealHeader(bytes);
  Write(Path("slash.sched"), bytes);
  EXPECT_EQ(ErrorOf(Path("slash.sched")), static_cast<int>(ScheduleFileErrorCode::kCorrupt));
}

TEST_F(ScheduleFileTest, GroupsReadWholeRoundTripInVersionFive) {
  // 97 groups of 256 or 100 rows, each one sample.
  std::vector<MapFile> files;
  for (int i = 0; i < 97; ++i) {
    const std::uint64_t rows = i % 2 ? 256 : 100;
    files.push_back({"/pde/seeds.h5", rows, 1000u, 5, {}, "g" + std::to_string(i), rows});
  }
  ScheduleHeader h = header_;
  h.map = SampleMap(files, {{"data", 1024}});
  WriteScheduleFile(Path("whole.sched"), h, schedule_);
  WriteRecipeFile(Path("whole.recipe"), h);
  for (const char* name : {"whole.sched", "whole.recipe"}) {
    EXPECT_EQ(VersionOf(Path(name)), 5u);
    const ScheduleReader reader = ScheduleReader::Open(Path(name));
    EXPECT_EQ(reader.header().map, h.map);
    EXPECT_EQ(reader.header().map.files()[3].rows_per_sample, 256u);
    EXPECT_EQ(reader.header().map.Locate(3), (SampleLocation{3, 0, 256}));
    EXPECT_NO_THROW(reader.CheckDataset({"/pde/seeds.h5", "/g3/data", 256, 1024, 1000, 5}));
  }
  // Rows per sample that do not divide the rows (checksums made good) are
  // refused as corrupt: the u64 after group "g1" is 256.
  Bytes bytes = Read(Path("whole.sched"));
  const std::string group = std::string("g1", 2);
  auto at = std::search(bytes.begin(), bytes.end(), group.begin(), group.end());
  ASSERT_NE(at, bytes.end());
  std::uint64_t per_sample = 0;
  std::memcpy(&per_sample, &*(at + 2), sizeof per_sample);
  ASSERT_EQ(per_sample, 256u);
  per_sample = 255;
  std::memcpy(&*(at + 2), &per_sample, sizeof per_sample);
  ResealHeader(bytes);
  Write(Path("odd.sched"), bytes);
  EXPECT_EQ(ErrorOf(Path("odd.sched")), static_cast<int>(ScheduleFileErrorCode::kCorrupt));
}

TEST_F(ScheduleFileTest, AHundredThousandFiles) {
  // One sample per file: the header is several MB; string caps are per
  // string, not per header.
  std::vector<MapFile> files;
  for (std::uint32_t i = 0; i < 100000; ++i) {
    files.push_back({"/scratch/project/dataset/train/sample_" + std::to_string(1000000 + i) + ".h5",
                     1, 4096, 1700000000000000000 + i});
  }
  ScheduleHeader h;
  h.source = "sequential";
  h.parameters = CanonicalLoaderParameters(ParseLoaderSpec("sequential", ""));
  h.layout = {.ranks = 2, .ranks_per_node = 2, .workers = 0, .batch_size = 8};
  h.epochs = 2;
  h.num_samples = 100000;
  h.map = SampleMap(files, {{"x", 4096}});
  WriteRecipeFile(Path("big.sched"), h);
  const ScheduleReader reader = ScheduleReader::Open(Path("big.sched"));
  EXPECT_EQ(reader.header().map.files().size(), 100000u);
  EXPECT_EQ(reader.header().map.FileIndex(files[77777].path), 77777u);
  EXPECT_EQ(reader.header().map, h.map);
}

// Version-1 files (one dataset fingerprint in the header) are still read, as
// a one-file, one-field map.
TEST_F(ScheduleFileTest, VersionOneFilesAreReadAsAOneFileMap) {
  ScheduleHeader h = header_;
  format::Encoder head;
  head.Str("data/train.h5");  // version 1 kept the path as given
  head.Str("images");
  head.U64(97);
  head.U64(3 * 224 * 224);
  head.U64(123456789);
  head.I64(1700000000123);
  head.Str(h.source);
  head.Str(h.parameters);
  head.Str("old tool");
  head.U32(h.layout.ranks);
  head.U32(h.layout.ranks_per_node);
  head.U32(h.layout.workers);
  head.U32(h.layout.batch_size);
  head.U32(h.epochs);
  head.U64(h.num_samples);
  head.U64(h.seed);
  head.U32(static_cast<std::uint32_t>(ScheduleStorage::kRecipe));
  format::Preamble pre;
  pre.version = 1;
  pre.storage = static_cast<std::uint32_t>(ScheduleStorage::kRecipe);
  pre.header_offset = format::kPreambleSize;
  pre.header_size = head.bytes().size();
  pre.index_offset = (pre.header_offset + pre.header_size + 7) / 8 * 8;
  pre.data_offset = pre.index_offset;
  pre.file_size = pre.index_offset;
  pre.header_crc = format::Crc32(head.bytes());
  pre.index_crc = format::Crc32({});
  std::vector<std::byte> bytes = format::EncodePreamble(pre);
  bytes.insert(bytes.end(), head.bytes().begin(), head.bytes().end());
  bytes.resize(pre.file_size);
  Write(Path("v1.sched"), Bytes(reinterpret_cast<const char*>(bytes.data()),
                                reinterpret_cast<const char*>(bytes.data()) + bytes.size()));
  const ScheduleReader reader = ScheduleReader::Open(Path("v1.sched"));
  const SampleMap& map = reader.header().map;
  ASSERT_EQ(map.files().size(), 1u);
  EXPECT_EQ(map.files()[0], (MapFile{"data/train.h5", 97, 123456789, 1700000000123}));
  ASSERT_EQ(map.fields().size(), 1u);
  EXPECT_EQ(map.fields()[0], (MapField{"images", 3 * 224 * 224}));
  EXPECT_EQ(reader.header().generator, "old tool");
  ExpectSameSchedule(reader.Materialize(), schedule_);
  EXPECT_NO_THROW(reader.CheckDataset(
      {"elsewhere.h5", "/images", 97, 3 * 224 * 224, 123456789, 1700000000123}));
}

}  // namespace
}  // namespace prescient::scheduler
