// NextUseIndex against a brute-force scan of the schedule.
#include "scheduler/core/next_use_index.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "scheduler/core/loader_orders.h"

namespace prescient::scheduler {
namespace {

// The first global step > after (or >= with inclusive) where node `node` reads `sample`.
std::uint64_t BruteNextUse(const AccessSchedule& s, std::uint32_t node, SampleId sample,
                           std::uint64_t after, bool inclusive) {
  const WorldLayout& l = s.layout();
  std::uint64_t base = 0;
  for (std::uint32_t e = 0; e < s.epochs(); ++e) {
    const std::size_t steps = s.Part(0, e).steps();
    for (std::size_t st = 0; st < steps; ++st) {
      const std::uint64_t g = base + st;
      if (g < after || (g == after && !inclusive)) continue;
      for (std::uint32_t r = node * l.ranks_per_node;
           r < std::min(l.ranks, (node + 1) * l.ranks_per_node); ++r) {
        for (SampleId x : s.Part(r, e).Step(st)) {
          if (x == sample) return g;
        }
      }
    }
    base += steps;
  }
  return NextUseIndex::kNever;
}

TEST(NextUseIndexTest, MatchesBruteForce) {
  WorldLayout l;
  l.ranks = 5;  // the last node has one rank only
  l.ranks_per_node = 2;
  l.batch_size = 4;
  LoaderSpec spec;
  spec.seed = 3;
  const AccessSchedule s = GenerateLoaderSchedule(spec, 53, l, 4);  // padded: duplicates
  std::mt19937 rng(1);
  for (std::uint32_t node = 0; node < 3; ++node) {
    const NextUseIndex index = NextUseIndex::Build(s, node, {.read_table = true});
    EXPECT_EQ(index.total_steps(), 4u * 3u);
    // The read table agrees with NextUseAfter at the step of each read.
    for (std::uint32_t e = 0; e < 4; ++e) {
      for (std::uint32_t r = node * 2; r < std::min(5u, node * 2 + 2); ++r) {
        const RankEpoch& part = s.Part(r, e);
        for (std::size_t st = 0; st < part.steps(); ++st) {
          for (std::uint64_t p = part.step_begin[st]; p < part.step_begin[st + 1]; ++p) {
            ASSERT_EQ(index.NextUseOfRead(r, e, p),
                      BruteNextUse(s, node, part.samples[p], index.GlobalStep(e, st), false));
          }
        }
      }
    }
    for (SampleId sample = 0; sample < 53; ++sample) {
      for (std::uint64_t t = 0; t <= index.total_steps(); ++t) {
        ASSERT_EQ(index.NextUseAfter(sample, t), BruteNextUse(s, node, sample, t, false))
            << node << " " << sample << " " << t;
        ASSERT_EQ(index.NextUseAtOrAfter(sample, t), BruteNextUse(s, node, sample, t, true));
      }
    }
  }
}

TEST(NextUseIndexTest, VariableStepsPerEpochAndUnusedSamples) {
  WorldLayout l;
  l.ranks = 2;
  l.ranks_per_node = 1;
  AccessSchedule s(10, l, 2);
  s.Part(0, 0).samples = {1, 2, 3};
  s.Part(0, 0).step_begin = {0, 2, 3};
  s.Part(1, 0).samples = {4, 5};
  s.Part(1, 0).step_begin = {0, 1, 2};
  s.Part(0, 1).samples = {3, 3, 1};  // a repeat within one step counts once
  s.Part(0, 1).step_begin = {0, 2, 2, 3};
  s.Part(1, 1).samples = {9};
  s.Part(1, 1).step_begin = {0, 0, 1, 1};
  const NextUseIndex n0 = NextUseIndex::Build(s, 0);
  EXPECT_EQ(n0.EpochFirstStep(1), 2u);
  EXPECT_EQ(n0.GlobalStep(1, 2), 4u);
  EXPECT_EQ(n0.NextUseAfter(3, 0), 1u);
  EXPECT_EQ(n0.NextUseAfter(3, 1), 2u);
  EXPECT_EQ(n0.NextUseAfter(1, 0), 4u);
  EXPECT_EQ(n0.NextUseAfter(1, 4), NextUseIndex::kNever);
  EXPECT_EQ(n0.NextUseAfter(9, 0), NextUseIndex::kNever);    // read on node 1 only
  EXPECT_EQ(n0.NextUseAfter(0, 0), NextUseIndex::kNever);    // never read
  EXPECT_EQ(n0.NextUseAfter(100, 0), NextUseIndex::kNever);  // not a sample
  EXPECT_EQ(n0.Uses(3).size(), 2u);
  const NextUseIndex n1 = NextUseIndex::Build(s, 1);
  EXPECT_EQ(n1.NextUseAfter(9, 0), 3u);
  EXPECT_THROW(NextUseIndex::Build(s, 2), std::out_of_range);
  EXPECT_THROW(n0.NextUseOfRead(0, 0, 0), std::logic_error);  // no read table
  const NextUseIndex t0 = NextUseIndex::Build(s, 0, {.read_table = true});
  EXPECT_EQ(t0.NextUseOfRead(0, 0, 0), 4u);                    // sample 1: read at steps 0 and 4
  EXPECT_EQ(t0.NextUseOfRead(0, 0, 2), 2u);                    // sample 3: step 1, then step 2
  EXPECT_EQ(t0.NextUseOfRead(0, 1, 0), NextUseIndex::kNever);  // sample 3 twice in step 2
  EXPECT_EQ(t0.NextUseOfRead(0, 1, 1), NextUseIndex::kNever);
  EXPECT_THROW(t0.NextUseOfRead(1, 0, 0), std::out_of_range);  // rank 1 is on node 1
  EXPECT_THROW(t0.NextUseOfRead(0, 0, 3), std::out_of_range);
}

}  // namespace
}  // namespace prescient::scheduler

namespace prescient::scheduler {
namespace {

TEST(NextUseIndexTest, FromARecipeFileEqualsFromTheSchedule) {
  WorldLayout l;
  l.ranks = 4;
  l.ranks_per_node = 2;
  l.batch_size = 3;
  LoaderSpec spec;
  spec.source = LoaderSource::kNumpy;
  spec.seed = 8;
  const AccessSchedule s = GenerateLoaderSchedule(spec, 61, l, 3);
  ScheduleHeader h;
  h.source = "numpy";
  h.parameters = CanonicalLoaderParameters(spec);
  h.layout = l;
  h.epochs = 3;
  h.num_samples = 61;
  const std::string path = ::testing::TempDir() + "next_use_recipe_" + std::to_string(::getpid());
  WriteRecipeFile(path, h);
  const ScheduleReader reader = ScheduleReader::Open(path);
  double last_progress = 0;
  const NextUseIndex a =
      NextUseIndex::Build(reader, 1, [&](double f) { last_progress = f; }, {.read_table = true});
  const NextUseIndex b = NextUseIndex::Build(s, 1, {.read_table = true});
  std::remove(path.c_str());
  EXPECT_DOUBLE_EQ(last_progress, 1.0);
  ASSERT_EQ(a.total_uses(), b.total_uses());
  for (SampleId x = 0; x < 61; ++x) {
    EXPECT_TRUE(std::ranges::equal(a.Uses(x), b.Uses(x))) << x;
  }
  for (std::uint64_t p = 0; p < s.Part(2, 1).samples.size(); ++p) {
    EXPECT_EQ(a.NextUseOfRead(2, 1, p), b.NextUseOfRead(2, 1, p));
  }
}

}  // namespace
}  // namespace prescient::scheduler

namespace prescient::scheduler {
namespace {

// Writes `s` as a lists file (loader source `spec`) at `path`; returns it.
std::string WriteLists(const AccessSchedule& s, const LoaderSpec& spec, const std::string& path) {
  ScheduleHeader h;
  h.source = "torch-distributed";
  h.parameters = CanonicalLoaderParameters(spec);
  h.layout = s.layout();
  h.epochs = s.epochs();
  h.num_samples = s.num_samples();
  WriteScheduleFile(path, h, s);
  return path;
}

TEST(NextUseIndexTest, SaveAndLoadRoundTrip) {
  WorldLayout l;
  l.ranks = 4;
  l.ranks_per_node = 2;
  l.batch_size = 5;
  LoaderSpec spec;
  spec.seed = 21;
  const AccessSchedule s = GenerateLoaderSchedule(spec, 77, l, 3);
  const std::string path = ::testing::TempDir() + "next_use_" + std::to_string(::getpid());
  const ScheduleReader reader = ScheduleReader::Open(WriteLists(s, spec, path + ".sched"));
  for (bool table : {false, true}) {
    const NextUseIndex built = NextUseIndex::Build(reader, 1, {}, {.read_table = table});
    EXPECT_EQ(built.schedule_checksum(), reader.checksum());
    built.Save(path);
    const NextUseIndex loaded = NextUseIndex::Load(path, reader);
    EXPECT_EQ(loaded.schedule_checksum(), reader.checksum());
    EXPECT_EQ(loaded.node(), 1u);
    EXPECT_EQ(loaded.has_read_table(), table);
    EXPECT_EQ(loaded.total_steps(), built.total_steps());
    EXPECT_EQ(loaded.EpochFirstStep(2), built.EpochFirstStep(2));
    for (SampleId x = 0; x < 77; ++x) {
      for (std::uint64_t t = 0; t < built.total_steps(); t += 2) {
        ASSERT_EQ(loaded.NextUseAfter(x, t), built.NextUseAfter(x, t));
      }
    }
    if (table) {
      for (std::uint64_t p = 0; p < s.Part(3, 2).samples.size(); ++p) {
        EXPECT_EQ(loaded.NextUseOfRead(3, 2, p), built.NextUseOfRead(3, 2, p));
      }
    }
  }
  // Corruptions: every class gives a ScheduleFileError with its code.
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto code_of = [&](const std::vector<char>& b) {
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(b.data(), static_cast<std::streamsize>(b.size()));
    }
    try {
      NextUseIndex::Load(path, reader);
      return -1;
    } catch (const ScheduleFileError& e) {
      return static_cast<int>(e.code());
    }
  };
  std::vector<char> b = bytes;
  b[1] = 'X';
  EXPECT_EQ(code_of(b), static_cast<int>(ScheduleFileErrorCode::kBadMagic));
  b = bytes;
  b.resize(b.size() - 4);
  EXPECT_EQ(code_of(b), static_cast<int>(ScheduleFileErrorCode::kTruncated));
  b = bytes;
  b[200] ^= 4;
  EXPECT_EQ(code_of(b), static_cast<int>(ScheduleFileErrorCode::kBadChecksum));
  b = bytes;
  b[30] ^= 4;
  EXPECT_EQ(code_of(b), static_cast<int>(ScheduleFileErrorCode::kBadChecksum));
  EXPECT_EQ(code_of(std::vector<char>(10, 'a')),
            static_cast<int>(ScheduleFileErrorCode::kBadMagic));
  EXPECT_EQ(code_of(std::vector<char>(bytes.begin(), bytes.begin() + 40)),
            static_cast<int>(ScheduleFileErrorCode::kTruncated));
  std::remove(path.c_str());
  EXPECT_THROW(NextUseIndex::Load(path, reader), ScheduleFileError);
  std::remove((path + ".sched").c_str());
}

// Issue 10: an index is tied to the schedule it was built from, not only to
// its shape. Another seed of the same shape (same samples, ranks, steps) is
// refused, and so is the index of another node.
TEST(NextUseIndexTest, AnIndexOfAnotherScheduleIsRefused) {
  WorldLayout l;
  l.ranks = 4;
  l.ranks_per_node = 2;
  l.batch_size = 5;
  LoaderSpec one, two;
  one.seed = 1;
  two.seed = 2;
  const std::string dir = ::testing::TempDir() + "next_use_other_" + std::to_string(::getpid());
  const ScheduleReader a =
      ScheduleReader::Open(WriteLists(GenerateLoaderSchedule(one, 77, l, 3), one, dir + ".a"));
  const ScheduleReader b =
      ScheduleReader::Open(WriteLists(GenerateLoaderSchedule(two, 77, l, 3), two, dir + ".b"));
  ASSERT_NE(a.checksum(), b.checksum());
  NextUseIndex::Build(a, 1).Save(dir + ".index");
  EXPECT_NO_THROW(NextUseIndex::Load(dir + ".index", a));
  try {
    NextUseIndex::Load(dir + ".index", b);
    FAIL() << "accepted the index of another schedule";
  } catch (const ScheduleFileError& e) {
    EXPECT_EQ(e.code(), ScheduleFileErrorCode::kFingerprintMismatch);
    EXPECT_NE(std::string(e.what()).find("another schedule"), std::string::npos) << e.what();
  }
  // The same schedule rewritten (same bytes) keeps its checksum: still valid.
  const ScheduleReader again = ScheduleReader::Open(dir + ".a");
  EXPECT_EQ(again.checksum(), a.checksum());
  EXPECT_NO_THROW(NextUseIndex::Load(dir + ".index", again));
  // A recipe of the other seed differs too.
  ScheduleHeader h;
  h.source = "torch-distributed";
  h.parameters = CanonicalLoaderParameters(two);
  h.layout = l;
  h.epochs = 3;
  h.num_samples = 77;
  WriteRecipeFile(dir + ".r", h);
  EXPECT_THROW(NextUseIndex::Load(dir + ".index", ScheduleReader::Open(dir + ".r")),
               ScheduleFileError);
  for (const char* ext : {".a", ".b", ".r", ".index"}) std::remove((dir + ext).c_str());
}

}  // namespace
}  // namespace prescient::scheduler
