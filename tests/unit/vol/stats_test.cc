#include "vol/runtime/stats.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "vol/runtime/live_stats_file.h"

namespace prescient::vol {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string TempPath(const char* name) {
  return ::testing::TempDir() + "/" + name + "." + std::to_string(::getpid()) + ".json";
}

TEST(LiveStatsFile, DecimalAdditionInPlace) {
  const std::string path = TempPath("live");
  LiveStatsFile file;
  ASSERT_EQ(file.Open(path, "{\"a\": " + LiveStatsFile::Marker() +
                                ", \"b\": " + LiveStatsFile::Marker() + "}"),
            "");
  for (int i = 0; i < 1234; ++i) file.Add(0, 1);
  file.Add(1, 65536);
  file.Add(1, 999999999999ULL);
  file.Add(1, 0);
  const std::string text =
      ReadFile(path);  // read back without closing: the page cache is the truth
  EXPECT_NE(text.find(std::string(16, ' ') + "1234,"), std::string::npos) << text;
  EXPECT_NE(text.find(std::to_string(65536ULL + 999999999999ULL) + "}"), std::string::npos) << text;
  ::unlink(path.c_str());
}

TEST(LiveStatsFile, SetAndMaximum) {
  const std::string path = TempPath("live_max");
  LiveStatsFile file;
  ASSERT_EQ(file.Open(path, "[" + LiveStatsFile::Marker() + "]"), "");
  file.Set(0, UINT64_MAX);
  EXPECT_EQ(ReadFile(path), "[18446744073709551615]");
  file.Set(0, 7);
  EXPECT_EQ(ReadFile(path), "[" + std::string(19, ' ') + "7]");
  ::unlink(path.c_str());
}

TEST(LiveStatsFile, OpenFailsWithMessage) {
  LiveStatsFile file;
  EXPECT_NE(file.Open("/nonexistent-dir/x.json", "{}"), "");
  EXPECT_FALSE(file.is_open());
}

TEST(Stats, FileMatchesToJson) {
  const std::string path = TempPath("stats");
  Stats stats;
  stats.Add(Counter::kFilesOpened);
  const Stats::ProcessInfo info{.pid = 12, .parent_pid = 1, .forked_child = false, .enabled = true};
  ASSERT_EQ(stats.StartFile(path, info), "");  // seeded with values counted before
  ReadRecord read;
  read.decoded = true;
  read.selection.kind = SelectionKind::kRegular;
  read.selection.rows = RowSelection::Pattern(5, 1, 1, 3);
  read.selection.whole_rows = true;
  read.simple = true;
  read.bytes = 4096;
  stats.Commit(read);
  // The live file has padded numbers; compare after squeezing the padding.
  auto squeeze = [](std::string s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] == ' ' && i + 1 < s.size() &&
          (s[i + 1] == ' ' || std::isdigit(static_cast<unsigned char>(s[i + 1]))) && i > 0 &&
          (s[i - 1] == ' ' || s[i - 1] == ':')) {
        continue;
      }
      out += s[i];
    }
    return out;
  };
  EXPECT_EQ(squeeze(ReadFile(path)), squeeze(stats.ToJson(info)));
  EXPECT_EQ(stats.Get(Counter::kRows), 3u);
  EXPECT_EQ(stats.Get(Counter::kSelectionRegular), 1u);
  stats.LockForFork();
  stats.ResetInChild();
  EXPECT_EQ(stats.Get(Counter::kReads), 0u);
  EXPECT_FALSE(stats.has_file());
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace prescient::vol

namespace prescient::vol {
namespace {

TEST(Stats, PerEpochBlocksAppearWhenEpochsAreKnown) {
  const std::string path = TempPath("epochs");
  Stats stats;
  const Stats::ProcessInfo info{.pid = 3, .parent_pid = 1, .forked_child = true, .enabled = true};
  ASSERT_EQ(stats.StartFile(path, info), "");
  stats.Add(Counter::kReads, 2);  // before epochs are known: totals only
  stats.SetEpochs(3);
  ReadRecord placed;  // a read the position tracker placed in epoch 1
  placed.inspected = false;
  placed.epoch = 1;
  stats.Commit(placed);
  stats.Add(Counter::kRowsHit, 5);  // after it: in its epoch
  stats.AddInEpoch(2, Counter::kRowsPrefetched, 7);
  EXPECT_EQ(stats.Get(Counter::kRowsHit), 5u);
  EXPECT_EQ(stats.GetInEpoch(1, Counter::kRowsHit), 5u);
  EXPECT_EQ(stats.GetInEpoch(0, Counter::kRowsHit), 0u);
  EXPECT_EQ(stats.GetInEpoch(1, Counter::kReads), 1u);
  EXPECT_EQ(stats.Get(Counter::kReads), 3u);
  EXPECT_EQ(stats.GetInEpoch(2, Counter::kRowsPrefetched), 7u);
  const std::string text = ReadFile(path);
  EXPECT_NE(text.find("\"epochs\": ["), std::string::npos) << text;
  EXPECT_NE(text.find("{\"epoch\": 2,"), std::string::npos) << text;
  // The rewritten file kept the counts made before it grew (2, and 1 after).
  EXPECT_NE(text.find("\"reads\": " + std::string(LiveStatsFile::kWidth - 1, ' ') + "3"),
            std::string::npos);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace prescient::vol

namespace prescient::vol {
namespace {

TEST(Stats, AReadNotInspectedCountsAsAForwardedReadOnly) {
  Stats stats;
  ReadRecord read;  // PRESCIENT_CACHE=0: forwarded without a look
  read.inspected = false;
  read.decoded = true;  // (never set so; ignored when not inspected)
  read.simple = true;
  read.bytes = 64;
  stats.Commit(read);
  EXPECT_EQ(stats.Get(Counter::kReads), 1u);
  EXPECT_EQ(stats.Get(Counter::kReadsForwarded), 1u);
  EXPECT_EQ(stats.Get(Counter::kReadsUndecoded), 0u);
  EXPECT_EQ(stats.Get(Counter::kReadsSimple), 0u);
  EXPECT_EQ(stats.Get(Counter::kBytes), 0u);
}

TEST(Stats, EveryForwardedReadCountsItsReasonOnce) {
  Stats stats;
  ReadRecord served;
  served.decoded = true;
  served.served = true;
  served.forward_reason = ForwardReason::kType;  // left from a check passed: not counted
  stats.Commit(served);
  ReadRecord converted;
  converted.decoded = true;
  converted.forward_reason = ForwardReason::kType;
  stats.Commit(converted);
  ReadRecord too_small;
  too_small.inspected = false;
  too_small.forward_reason = ForwardReason::kTooSmall;
  stats.Commit(too_small);
  ReadRecord unexplained;  // never expected: counted, as a failed serve
  unexplained.decoded = true;
  stats.Commit(unexplained);

  EXPECT_EQ(stats.Get(Counter::kReadsForwarded), 3u);
  EXPECT_EQ(stats.Get(ForwardedCounter(ForwardReason::kType)), 1u);
  EXPECT_EQ(stats.Get(ForwardedCounter(ForwardReason::kTooSmall)), 1u);
  EXPECT_EQ(stats.Get(ForwardedCounter(ForwardReason::kFailed)), 1u);
  std::uint64_t reasons = 0;
  for (auto c = static_cast<std::size_t>(Counter::kForwardedFirst);
       c < static_cast<std::size_t>(Counter::kCount); ++c) {
    reasons += stats.Get(static_cast<Counter>(c));
  }
  EXPECT_EQ(reasons, stats.Get(Counter::kReadsForwarded));
  const Stats::ProcessInfo info{.pid = 1, .parent_pid = 0, .forked_child = false, .enabled = true};
  const std::string json = stats.ToJson(info);
  EXPECT_NE(json.find("\"forwarded\": {\"cache_off\": 0, \"too_small\": 1, \"undecoded\": 0"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"type\": 1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"failed\": 1}"), std::string::npos) << json;
}

TEST(Stats, OneCommitPerReadCountsEveryOutcome) {
  Stats stats;
  ReadRecord served;
  served.decoded = true;
  served.simple = true;
  served.selection.kind = SelectionKind::kIrregular;
  served.selection.rows = RowSelection::Pattern(0, 2, 1, 4);
  served.served = true;
  served.rows_hit = 1;
  served.rows_loaded = 2;
  served.rows_waited = 1;
  served.rows_not_awaited = 1;
  served.rows_read_around = 30;
  served.stall_storage_ns = 700;
  served.stall_wait_ns = 300;
  served.schedule_matches = 4;
  stats.Commit(served);
  ReadRecord forwarded;  // undecoded, forwarded for its transfer list
  forwarded.transfer_forwarded = true;
  stats.Commit(forwarded);

  EXPECT_EQ(stats.Get(Counter::kReads), 2u);
  EXPECT_EQ(stats.Get(Counter::kReadsServed), 1u);
  EXPECT_EQ(stats.Get(Counter::kReadsForwarded), 1u);
  EXPECT_EQ(stats.Get(Counter::kReadsUndecoded), 1u);
  EXPECT_EQ(stats.Get(Counter::kReadsTransferForwarded), 1u);
  EXPECT_EQ(stats.Get(Counter::kReadsSimple), 1u);
  EXPECT_EQ(stats.Get(Counter::kSelectionIrregular), 1u);
  EXPECT_EQ(stats.Get(Counter::kRows), 4u);
  EXPECT_EQ(stats.Get(Counter::kRowsReadAround), 30u);
  EXPECT_EQ(stats.Get(Counter::kRowsNotAwaited), 1u);
  // The stall is the sum of both waits, each also kept on its own.
  EXPECT_EQ(stats.Get(Counter::kStallNs), 1000u);
  EXPECT_EQ(stats.Get(Counter::kStallStorageNs), 700u);
  EXPECT_EQ(stats.Get(Counter::kStallWaitNs), 300u);
  EXPECT_EQ(stats.Get(Counter::kScheduleMatches), 4u);
}

}  // namespace
}  // namespace prescient::vol

namespace prescient::vol {
namespace {

TEST(Stats, PerFieldBlocksCountTheirRowsInTheLiveFile) {
  const std::string path = TempPath("fields");
  Stats stats;
  const Stats::ProcessInfo info{.pid = 5, .parent_pid = 1, .forked_child = false, .enabled = true};
  ASSERT_EQ(stats.StartFile(path, info), "");
  stats.SetFields({"images", "labels \"x\""});
  ReadRecord read;
  read.decoded = read.served = true;
  read.rows_loaded = 3;
  read.rows_hit = 29;
  read.field = 1;
  stats.Commit(read);
  stats.AddField(0, FieldCounter::kRowsPrefetched, 64);
  stats.SetEpochs(2);  // the file grows; the field counts move along
  stats.AddField(0, FieldCounter::kRowsPrefetched, 1);
  EXPECT_EQ(stats.GetField(1, FieldCounter::kRowsLoaded), 3u);
  EXPECT_EQ(stats.GetField(0, FieldCounter::kRowsPrefetched), 65u);
  const std::string text = ReadFile(path);
  EXPECT_NE(text.find("{\"field\": \"images\", \"rows_hit\": "), std::string::npos) << text;
  EXPECT_NE(text.find("\"field\": \"labels \\\"x\\\"\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"rows_prefetched\": " + std::string(LiveStatsFile::kWidth - 2, ' ') + "65"),
            std::string::npos)
      << text;
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace prescient::vol
