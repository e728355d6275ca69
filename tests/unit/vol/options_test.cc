#include "vol/runtime/options.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

namespace prescient::vol {
namespace {

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(ParseOptions, Defaults) {
  ParsedOptions p = ParseOptions(FakeEnv({}), "");
  EXPECT_TRUE(p.warnings.empty());
  EXPECT_TRUE(p.options.enable);
  EXPECT_EQ(p.options.log_level, LogLevel::kWarn);
  EXPECT_TRUE(p.options.stats_path.empty());
}

TEST(ParseOptions, ReadsEnvironment) {
  ParsedOptions p = ParseOptions(FakeEnv({{"PRESCIENT_ENABLE", "off"},
                                          {"PRESCIENT_LOG", "DEBUG"},
                                          {"PRESCIENT_STATS", "/tmp/s.json"}}),
                                 "");
  EXPECT_TRUE(p.warnings.empty());
  EXPECT_FALSE(p.options.enable);
  EXPECT_EQ(p.options.log_level, LogLevel::kDebug);
  EXPECT_EQ(p.options.stats_path, "/tmp/s.json");
}

TEST(ParseOptions, InfoStringWinsOverEnvironment) {
  ParsedOptions p = ParseOptions(FakeEnv({{"PRESCIENT_LOG", "error"}, {"PRESCIENT_ENABLE", "0"}}),
                                 " log=info ; enable=1;");
  EXPECT_TRUE(p.warnings.empty());
  EXPECT_EQ(p.options.log_level, LogLevel::kInfo);
  EXPECT_TRUE(p.options.enable);
}

TEST(ParseOptions, InvalidValueWarnsOnceAndDisables) {
  ParsedOptions p = ParseOptions(FakeEnv({{"PRESCIENT_LOG", "loud"}}), "");
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("PRESCIENT_LOG='loud'"), std::string::npos);
  EXPECT_NE(p.warnings[0].find("error, warn, info, debug"), std::string::npos);
  EXPECT_FALSE(p.options.enable);
}

TEST(ParseOptions, EachInvalidSettingGetsItsOwnWarning) {
  ParsedOptions p = ParseOptions(FakeEnv({{"PRESCIENT_ENABLE", "maybe"}}), "stats=");
  EXPECT_EQ(p.warnings.size(), 2u);
  EXPECT_FALSE(p.options.enable);
}

TEST(ParseOptions, AdmissionThreadRunsOnASpareCpuUnlessToldAlways) {
  EXPECT_FALSE(ParseOptions(FakeEnv({}), "").options.admit_behind_always);
  ParsedOptions always = ParseOptions(FakeEnv({{"PRESCIENT_ADMIT_BEHIND_WHEN", "Always"}}), "");
  EXPECT_TRUE(always.warnings.empty());
  EXPECT_TRUE(always.options.admit_behind_always);
  ParsedOptions spare = ParseOptions(FakeEnv({}), "admit_behind_when=spare-cpu");
  EXPECT_TRUE(spare.warnings.empty());
  EXPECT_FALSE(spare.options.admit_behind_always);
  ParsedOptions bad = ParseOptions(FakeEnv({{"PRESCIENT_ADMIT_BEHIND_WHEN", "idle"}}), "");
  ASSERT_EQ(bad.warnings.size(), 1u);
  EXPECT_NE(bad.warnings[0].find("PRESCIENT_ADMIT_BEHIND_WHEN='idle'"), std::string::npos);
  EXPECT_NE(bad.warnings[0].find("spare-cpu or always"), std::string::npos);
}

TEST(ParseOptions, EveryMissedRowIsKeptWhileBusyUnlessARunLengthIsGiven) {
  EXPECT_EQ(ParseOptions(FakeEnv({}), "").options.busy_unkept_run_bytes, 0u);
  ParsedOptions on = ParseOptions(FakeEnv({{"PRESCIENT_BUSY_UNKEPT_RUN", "256KiB"}}), "");
  EXPECT_TRUE(on.warnings.empty());
  EXPECT_EQ(on.options.busy_unkept_run_bytes, 256u << 10);
  EXPECT_EQ(ParseOptions(FakeEnv({}), "busy_unkept_run=1MiB").options.busy_unkept_run_bytes,
            1u << 20);
  ParsedOptions bad = ParseOptions(FakeEnv({{"PRESCIENT_BUSY_UNKEPT_RUN", "long"}}), "");
  ASSERT_EQ(bad.warnings.size(), 1u);
  EXPECT_NE(bad.warnings[0].find("PRESCIENT_BUSY_UNKEPT_RUN='long'"), std::string::npos);
}

TEST(ParseOptions, SmallDatasetsAreLeftUncachedBelowTheKernelsReadAheadByDefault) {
  EXPECT_EQ(ParseOptions(FakeEnv({}), "").options.min_dataset_bytes, 128u << 10);
  ParsedOptions all = ParseOptions(FakeEnv({{"PRESCIENT_MIN_DATASET_BYTES", "0"}}), "");
  EXPECT_TRUE(all.warnings.empty());
  EXPECT_EQ(all.options.min_dataset_bytes, 0u);
  EXPECT_EQ(ParseOptions(FakeEnv({}), "min_dataset_bytes=1MiB").options.min_dataset_bytes,
            1u << 20);
  ParsedOptions bad = ParseOptions(FakeEnv({{"PRESCIENT_MIN_DATASET_BYTES", "small"}}), "");
  ASSERT_EQ(bad.warnings.size(), 1u);
  EXPECT_NE(bad.warnings[0].find("PRESCIENT_MIN_DATASET_BYTES='small'"), std::string::npos);
}

TEST(ParseOptions, VirtualDatasetsWhoseRowsReadRawAreCachedByDefault) {
  EXPECT_EQ(ParseOptions(FakeEnv({}), "").options.cache_virtual, VirtualCaching::kRaw);
  for (const auto& [text, caching] :
       std::vector<std::pair<std::string, VirtualCaching>>{{"RAW", VirtualCaching::kRaw},
                                                           {"1", VirtualCaching::kAll},
                                                           {"yes", VirtualCaching::kAll},
                                                           {"0", VirtualCaching::kOff},
                                                           {"off", VirtualCaching::kOff}}) {
    ParsedOptions p = ParseOptions(FakeEnv({{"PRESCIENT_CACHE_VIRTUAL", text}}), "");
    EXPECT_TRUE(p.warnings.empty()) << text;
    EXPECT_EQ(p.options.cache_virtual, caching) << text;
  }
  EXPECT_EQ(ParseOptions(FakeEnv({}), "cache_virtual=0").options.cache_virtual,
            VirtualCaching::kOff);
  ParsedOptions bad = ParseOptions(FakeEnv({{"PRESCIENT_CACHE_VIRTUAL", "some"}}), "");
  ASSERT_EQ(bad.warnings.size(), 1u);
  EXPECT_NE(bad.warnings[0].find("PRESCIENT_CACHE_VIRTUAL='some'"), std::string::npos);
}

TEST(ParseOptions, AMissReadsTwiceTheSieveWhereTheJobSpansOneOrTwoNodes) {
  auto window = [](std::map<std::string, std::string> vars, std::string_view info = "") {
    return MissReadWindowBytes(ParseOptions(FakeEnv(std::move(vars)), info).options);
  };
  EXPECT_EQ(window({}), 128u << 10);  // one process, no launcher
  EXPECT_EQ(window({{"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "4"}}), 128u << 10);
  EXPECT_EQ(window({{"WORLD_SIZE", "9"}, {"LOCAL_WORLD_SIZE", "4"}}), 64u << 10);  // 3 nodes
  EXPECT_EQ(window({{"OMPI_COMM_WORLD_SIZE", "64"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}),
            64u << 10);
  EXPECT_EQ(window({{"PMI_SIZE", "4"}, {"MPI_LOCALNRANKS", "4"}}), 128u << 10);
  EXPECT_EQ(window({{"SLURM_JOB_NUM_NODES", "16"}}), 64u << 10);
  EXPECT_EQ(window({{"SLURM_NNODES", "1"}}), 128u << 10);
  // A world size without a local one says nothing of the nodes: the sieve's window.
  EXPECT_EQ(window({{"WORLD_SIZE", "8"}}), 64u << 10);
  EXPECT_EQ(window({{"WORLD_SIZE", "1"}}), 128u << 10);  // one rank is on one node
  ParsedOptions nodes = ParseOptions(FakeEnv({{"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "2"}}), "");
  EXPECT_EQ(nodes.options.job_nodes, 4u);
  // The setting wins, in bytes with a unit; auto is the default.
  EXPECT_EQ(window({{"PRESCIENT_READ_WINDOW", "256KiB"}, {"SLURM_JOB_NUM_NODES", "16"}}),
            256u << 10);
  EXPECT_EQ(window({{"PRESCIENT_READ_WINDOW", "0"}}), 0u);
  EXPECT_EQ(window({}, "read_window=64KiB"), 64u << 10);
  EXPECT_EQ(window({{"PRESCIENT_READ_WINDOW", "auto"}, {"SLURM_JOB_NUM_NODES", "2"}}), 128u << 10);
  ParsedOptions bad = ParseOptions(FakeEnv({{"PRESCIENT_READ_WINDOW", "wide"}}), "");
  ASSERT_EQ(bad.warnings.size(), 1u);
  EXPECT_NE(bad.warnings[0].find("PRESCIENT_READ_WINDOW"), std::string::npos);
}

TEST(ParseOptions, UnknownInfoKeyIsRejected) {
  ParsedOptions p = ParseOptions(FakeEnv({}), "colour=blue");
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("colour"), std::string::npos);
  EXPECT_FALSE(p.options.enable);
}

TEST(OptionDocs, ReadmeListsEverySetting) {
  // README.md's configuration table must not drift from the table of record.
  std::ifstream readme(PRESCIENT_SOURCE_DIR "/README.md");
  ASSERT_TRUE(readme.good());
  std::stringstream text;
  text << readme.rdbuf();
  for (const OptionDoc& doc : OptionDocs()) {
    EXPECT_NE(text.str().find("| `" + std::string(doc.variable) + "` | `" +
                              std::string(doc.info_key) + "` |"),
              std::string::npos)
        << doc.variable << " is missing from README.md's configuration table";
  }
}

TEST(OptionDocs, EveryRowIsDocumented) {
  for (const OptionDoc& doc : OptionDocs()) {
    EXPECT_EQ(doc.variable.substr(0, 10), "PRESCIENT_");
    EXPECT_FALSE(doc.info_key.empty());
    EXPECT_FALSE(doc.accepted.empty());
    EXPECT_FALSE(doc.meaning.empty());
  }
}

}  // namespace
}  // namespace prescient::vol
