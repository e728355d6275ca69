// Schedule and next-use index files changed or replaced under an open reader
// (issue 10, items 2 and 7): a truncated or overwritten file gives a
// ScheduleFileError, never a signal, and a FIFO is refused without blocking.
//
// Each case runs in a child process (a death test) so that a SIGBUS or a hang
// (ended by alarm()) shows up as a failure instead of killing the suite.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "scheduler/core/loader_orders.h"
#include "scheduler/core/next_use_index.h"
#include "scheduler/core/schedule_file.h"

namespace prescient::scheduler {
namespace {

class HostileFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    dir_ = ::testing::TempDir() + "hostile_files_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(std::system(("mkdir -p '" + dir_ + "'").c_str()), 0);
  }
  void TearDown() override { (void)std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // A lists schedule of the given seed: 4 ranks x 6 epochs of 4,000 samples.
  void WriteLists(const std::string& path, std::uint64_t seed) const {
    LoaderSpec spec;
    spec.seed = seed;
    WorldLayout layout{.ranks = 4, .ranks_per_node = 2, .workers = 0, .batch_size = 16};
    ScheduleHeader header;
    header.source = "torch-distributed";
    header.parameters = CanonicalLoaderParameters(spec);
    header.layout = layout;
    header.epochs = 6;
    header.num_samples = 4000;
    WriteScheduleFile(path, header, GenerateLoaderSchedule(spec, 4000, layout, 6));
  }

  // Copies `from` over `to` in place, like cp: O_TRUNC, then write.
  static void CopyInPlace(const std::string& from, const std::string& to) {
    const std::string cmd = "cp '" + from + "' '" + to + "'";
    if (std::system(cmd.c_str()) != 0) std::_Exit(3);
  }

  // Reads every part; counts the errors by code. Exits 4 on anything that is
  // not a ScheduleFileError.
  static int CountPartErrors(const ScheduleReader& reader, ScheduleFileErrorCode want) {
    int errors = 0;
    for (std::uint32_t e = 0; e < reader.header().epochs; ++e) {
      for (std::uint32_t r = 0; r < reader.header().layout.ranks; ++r) {
        try {
          (void)reader.Part(r, e).samples();
        } catch (const ScheduleFileError& err) {
          if (err.code() != want) std::_Exit(5);
          ++errors;
        } catch (...) {
          std::_Exit(4);
        }
      }
    }
    return errors;
  }

  std::string dir_;
};

TEST_F(HostileFilesTest, ScheduleTruncatedUnderAnOpenReader) {
  WriteLists(Path("a.sched"), 1);
  EXPECT_EXIT(
      {
        alarm(20);
        const ScheduleReader reader = ScheduleReader::Open(Path("a.sched"));
        const RankEpochView held = reader.Part(0, 0);
        const std::vector<SampleId> before(held.samples().begin(), held.samples().end());
        struct stat st{};
        ::stat(Path("a.sched").c_str(), &st);
        if (::truncate(Path("a.sched").c_str(), st.st_size / 2) != 0) std::_Exit(3);
        // A view taken before the truncation still holds its samples.
        if (std::vector<SampleId>(held.samples().begin(), held.samples().end()) != before) {
          std::_Exit(6);
        }
        // Parts past the new end are kTruncated (those before it still read).
        const int errors = CountPartErrors(reader, ScheduleFileErrorCode::kTruncated);
        std::_Exit(errors > 0 ? 0 : 7);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(HostileFilesTest, ScheduleOverwrittenInPlaceUnderAnOpenReader) {
  WriteLists(Path("a.sched"), 1);
  WriteLists(Path("b.sched"), 2);  // same shape and size, another order
  EXPECT_EXIT(
      {
        alarm(20);
        const ScheduleReader reader = ScheduleReader::Open(Path("a.sched"));
        CopyInPlace(Path("b.sched"), Path("a.sched"));
        // Every part of the other order fails its checksum against a's index.
        const int errors = CountPartErrors(reader, ScheduleFileErrorCode::kBadChecksum);
        std::_Exit(errors == 24 ? 0 : 7);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(HostileFilesTest, ScheduleOverwrittenByAShorterFile) {
  WriteLists(Path("a.sched"), 1);
  {
    std::FILE* f = std::fopen(Path("short").c_str(), "wb");
    std::fputs("not a schedule", f);
    std::fclose(f);
  }
  EXPECT_EXIT(
      {
        alarm(20);
        const ScheduleReader reader = ScheduleReader::Open(Path("a.sched"));
        CopyInPlace(Path("short"), Path("a.sched"));
        const int errors = CountPartErrors(reader, ScheduleFileErrorCode::kTruncated);
        std::_Exit(errors == 24 ? 0 : 7);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(HostileFilesTest, IndexTruncatedUnderALoadedIndex) {
  WriteLists(Path("a.sched"), 1);
  const ScheduleReader reader = ScheduleReader::Open(Path("a.sched"));
  const NextUseIndex built = NextUseIndex::Build(reader, 1, {}, {.read_table = true});
  built.Save(Path("a.index"));
  EXPECT_EXIT(
      {
        alarm(20);
        const NextUseIndex loaded = NextUseIndex::Load(Path("a.index"), reader);
        if (::truncate(Path("a.index").c_str(), 0) != 0) std::_Exit(3);
        for (SampleId s = 0; s < 4000; ++s) {
          for (std::uint64_t t = 0; t < loaded.total_steps(); t += 37) {
            if (loaded.NextUseAfter(s, t) != built.NextUseAfter(s, t)) std::_Exit(6);
          }
        }
        for (std::uint64_t p = 0; p < 1000; ++p) {
          if (loaded.NextUseOfRead(2, 3, p) != built.NextUseOfRead(2, 3, p)) std::_Exit(6);
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(HostileFilesTest, FifoScheduleIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo(Path("fifo").c_str(), 0600), 0);
  EXPECT_EXIT(
      {
        alarm(10);  // a blocking open() would hang here: SIGALRM fails the test
        try {
          ScheduleReader::Open(Path("fifo"));
        } catch (const ScheduleFileError& e) {
          const bool named = std::string(e.what()).find(Path("fifo")) != std::string::npos;
          std::_Exit(e.code() == ScheduleFileErrorCode::kIo && named ? 0 : 5);
        }
        std::_Exit(7);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(HostileFilesTest, FifoIndexIsRefusedWithoutBlocking) {
  WriteLists(Path("a.sched"), 1);
  const ScheduleReader reader = ScheduleReader::Open(Path("a.sched"));
  ASSERT_EQ(::mkfifo(Path("fifo").c_str(), 0600), 0);
  EXPECT_EXIT(
      {
        alarm(10);
        try {
          NextUseIndex::Load(Path("fifo"), reader);
        } catch (const ScheduleFileError& e) {
          const bool named = std::string(e.what()).find(Path("fifo")) != std::string::npos;
          std::_Exit(e.code() == ScheduleFileErrorCode::kIo && named ? 0 : 5);
        }
        std::_Exit(7);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(HostileFilesTest, DirectoryIsRefused) {
  try {
    ScheduleReader::Open(dir_);
    FAIL() << "opened a directory";
  } catch (const ScheduleFileError& e) {
    EXPECT_EQ(e.code(), ScheduleFileErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace prescient::scheduler
