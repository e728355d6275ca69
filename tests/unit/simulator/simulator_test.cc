#include "scheduler/simulate/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "scheduler/plan/planner.h"
#include "scheduler/simulate/report.h"

namespace prescient::scheduler::simulate {
namespace {

using plan::ViewOf;

WorldLayout Layout(std::uint32_t ranks, std::uint32_t rpn, std::uint32_t batch) {
  return WorldLayout{.ranks = ranks, .ranks_per_node = rpn, .workers = 0, .batch_size = batch};
}

SimulateOptions Options(std::uint64_t cache, std::vector<Policy> policies) {
  SimulateOptions o;
  o.cache_samples = cache;
  o.policies = std::move(policies);
  return o;
}

const PolicyResult& Find(const SimulationResult& r, Policy p) {
  for (const PolicyResult& x : r.policies) {
    if (x.policy == p) return x;
  }
  throw std::logic_error("policy not simulated");
}

// Node-local reference: reads of one node in simulator order, then Belady's
// MIN with bypass by brute force (step-granular next uses, as the simulator).
std::uint64_t ReferenceBelady(const AccessSchedule& s, std::uint64_t capacity) {
  std::uint64_t misses = 0;
  const WorldLayout& layout = s.layout();
  for (std::uint32_t node = 0; node < layout.nodes(); ++node) {
    std::vector<std::pair<std::uint64_t, SampleId>> reads;  // (global step, sample)
    std::uint64_t step0 = 0;
    for (std::uint32_t e = 0; e < s.epochs(); ++e) {
      for (std::size_t st = 0; st < s.Part(0, e).steps(); ++st) {
        for (std::uint32_t r = 0; r < layout.ranks; ++r) {
          if (layout.NodeOf(r) != node) continue;
          for (const SampleId x : s.Part(r, e).Step(st)) reads.emplace_back(step0 + st, x);
        }
      }
      step0 += s.Part(0, e).steps();
    }
    const auto next_use = [&](std::size_t i, SampleId x) {
      for (std::size_t j = i + 1; j < reads.size(); ++j) {
        if (reads[j].second == x) return reads[j].first;
      }
      return ~std::uint64_t{0};
    };
    std::map<SampleId, std::uint64_t> cache;  // sample -> next use
    for (std::size_t i = 0; i < reads.size(); ++i) {
      const SampleId x = reads[i].second;
      const std::uint64_t next = next_use(i, x);
      if (cache.count(x)) {
        cache[x] = next;
        continue;
      }
      ++misses;
      if (capacity == 0 || next == ~std::uint64_t{0}) continue;
      if (cache.size() >= capacity) {
        auto furthest = std::max_element(cache.begin(), cache.end(),
                                         [](auto& a, auto& b) { return a.second < b.second; });
        if (furthest->second <= next) continue;
        cache.erase(furthest);
      }
      cache[x] = next;
    }
  }
  return misses;
}

TEST(Simulator, BeladyMatchesABruteForceReference) {
  for (const char* spec : {"order=global", "order=local", "order=global,remap=on,cache=30%"}) {
    for (const std::uint64_t cache : {0, 10, 45, 120}) {
      SCOPED_TRACE(testing::Message() << spec << " cache " << cache);
      const AccessSchedule s =
          plan::Plan(301, Layout(6, 3, 5), 4, 17, plan::ParsePlanOptions(spec), {});
      const SimulationResult r =
          Simulate(ViewOf(s), Options(cache, {Policy::kBelady, Policy::kLru}));
      EXPECT_EQ(r.bounds.belady, ReferenceBelady(s, cache));
      EXPECT_EQ(Find(r, Policy::kBelady).total.storage, r.bounds.belady);
      EXPECT_GE(Find(r, Policy::kLru).total.storage, r.bounds.belady);
      EXPECT_GE(r.bounds.belady, r.bounds.compulsory_node);
    }
  }
}

TEST(Simulator, CountsAddUpAndBoundsHold) {
  const AccessSchedule s = plan::Plan(2000, Layout(8, 4, 10), 5, 3, plan::ParsePlanOptions(""), {});
  // A cache of 45% per node: Belady keeps samples across a read by the other
  // node, so peers have something to serve.
  const SimulationResult r =
      Simulate(ViewOf(s), Options(900, {Policy::kNone, Policy::kLru, Policy::kBelady,
                                        Policy::kNopfs, Policy::kPrescient}));
  EXPECT_EQ(r.bounds.compulsory_global, 2000u);
  EXPECT_GT(r.bounds.compulsory_node, 2000u);  // both nodes read (almost) everything
  for (const PolicyResult& p : r.policies) {
    SCOPED_TRACE(PolicyName(p.policy));
    EXPECT_EQ(p.total.reads, 10000u);
    EXPECT_EQ(p.total.storage + p.total.hits + p.total.remote, p.total.reads);
    EXPECT_EQ(p.steps.size(), 5u * 25);
    std::uint64_t from_ranks = 0, from_steps = 0;
    for (const Counts& c : p.rank_epochs) from_ranks += c.storage;
    for (const StepStats& st : p.steps) {
      from_steps += st.counts.storage;
      EXPECT_LE(st.min_rank_storage, st.max_rank_storage);
    }
    EXPECT_EQ(from_ranks, p.total.storage);
    EXPECT_EQ(from_steps, p.total.storage);
    EXPECT_GE(p.total.storage, r.bounds.compulsory_global);
  }
  EXPECT_EQ(Find(r, Policy::kNone).total.storage, 10000u);
  EXPECT_EQ(Find(r, Policy::kNone).slowest_rank_storage, 5u * 25 * 10);
  // Remote hits only where peers are consulted; they replace storage reads.
  EXPECT_EQ(Find(r, Policy::kBelady).total.remote, 0u);
  EXPECT_GT(Find(r, Policy::kPrescient).total.remote, 0u);
  EXPECT_LT(Find(r, Policy::kPrescient).total.storage, r.bounds.belady);
  EXPECT_GT(Find(r, Policy::kNopfs).total.remote, 0u);
  // Each policy has its own pass: Belady beside the others equals Belady alone.
  const SimulationResult alone = Simulate(ViewOf(s), Options(900, {Policy::kBelady}));
  EXPECT_EQ(alone.bounds.belady, r.bounds.belady);
  EXPECT_EQ(Find(alone, Policy::kBelady).slowest_rank_storage,
            Find(r, Policy::kBelady).slowest_rank_storage);
}

TEST(Simulator, PlannedRemapBeatsTheRandomOrder) {
  const WorldLayout layout = Layout(8, 2, 16);
  const AccessSchedule random = plan::Plan(8000, layout, 6, 5, plan::ParsePlanOptions(""), {});
  const AccessSchedule planned =
      plan::Plan(8000, layout, 6, 5, plan::ParsePlanOptions("cache=20%,solar=on"), {});
  const auto options = Options(1600, {Policy::kBelady, Policy::kPrescient});
  const SimulationResult a = Simulate(ViewOf(random), options);
  const SimulationResult b = Simulate(ViewOf(planned), options);
  // Aggregate cache 80%: the ideal is one full read in epoch 0, then the
  // uncached 20% (1,600) per epoch.
  EXPECT_LE(b.bounds.belady, 8000u + 5 * 1600 * 11 / 10);
  EXPECT_LT(b.bounds.belady * 10, a.bounds.belady * 6);
  // Balance: the slowest rank reads little more than the mean.
  const PolicyResult& p = Find(b, Policy::kPrescient);
  EXPECT_LT(static_cast<double>(p.slowest_rank_storage),
            1.3 * static_cast<double>(p.total.storage) / 8 +
                6.0 * static_cast<double>(p.steps.size()) / 8);
}

TEST(Simulator, NopfsServesPlacedSamplesLocallyAndOthersRemotely) {
  // Two nodes of one rank: node 0 reads 0,1 every epoch; node 1 reads 2,3 then 0,1.
  AccessSchedule s(4, Layout(2, 1, 2), 3);
  for (std::uint32_t e = 0; e < 3; ++e) {
    s.Part(0, e).samples = {0, 1};
    s.Part(0, e).step_begin = {0, 2};
    s.Part(1, e).samples = e == 0 ? std::vector<SampleId>{2, 3} : std::vector<SampleId>{0, 1};
    s.Part(1, e).step_begin = {0, 2};
  }
  const SimulationResult r = Simulate(ViewOf(s), Options(2, {Policy::kNopfs}));
  const PolicyResult& p = Find(r, Policy::kNopfs);
  // Node 0: 2 fills then 4 hits. Node 1 places 0,1 too (read twice, more than
  // 2 and 3): the first reads (epoch 1) come from node 0 remotely, then hits.
  EXPECT_EQ(p.total.storage, 4u);  // 0, 1 on node 0; 2, 3 on node 1
  EXPECT_EQ(p.total.remote, 2u);
  EXPECT_EQ(p.total.hits, 6u);
}

TEST(Simulator, ScalesToAThousandRanks) {
  const AccessSchedule s =
      plan::Plan(131072, Layout(1024, 8, 8), 3, 1, plan::ParsePlanOptions(""), {});
  const SimulationResult r = Simulate(ViewOf(s), Options(2000, {Policy::kLru, Policy::kPrescient}));
  EXPECT_EQ(r.layout.nodes(), 128u);
  EXPECT_EQ(Find(r, Policy::kLru).rank_epochs.size(), 3u * 1024);
  EXPECT_EQ(Find(r, Policy::kLru).total.reads, 3u * 131072);
}

TEST(Simulator, ModelledTimeNeedsRowBytes) {
  const AccessSchedule s = plan::Plan(1000, Layout(4, 2, 10), 2, 1, plan::ParsePlanOptions(""), {});
  SimulateOptions o = Options(100, {Policy::kNone});
  o.model = StorageModel::Lassen();
  EXPECT_TRUE(Simulate(ViewOf(s), o).model_name.empty());
  o.row_bytes = 100'000;
  const SimulationResult r = Simulate(ViewOf(s), o);
  EXPECT_EQ(r.model_name, "lassen");
  // 25 steps of 10 samples x 100 kB per rank; compute-bound at 64 MB/s: 1 MB / 64 MB/s.
  EXPECT_NEAR(Find(r, Policy::kNone).model_seconds, 2 * 25 * (1.0 / 64), 1e-9);
  // Fetch alone: 1 MB per rank and step with 4 clients, t(4) / 4 = 385 MB/s.
  EXPECT_NEAR(Find(r, Policy::kNone).io_seconds, 2 * 25 * (1.0 / 385), 1e-9);
}

TEST(Simulator, ParsesPolicies) {
  EXPECT_EQ(ParsePolicies("all").size(), 5u);
  EXPECT_EQ(ParsePolicies("belady,lru,belady"),
            (std::vector<Policy>{Policy::kBelady, Policy::kLru}));
  EXPECT_THROW(ParsePolicies("fifo"), std::invalid_argument);
  EXPECT_THROW(ParsePolicies(""), std::invalid_argument);
}

TEST(Report, WritesTableCsvAndJson) {
  const AccessSchedule s = plan::Plan(500, Layout(4, 2, 5), 2, 1, plan::ParsePlanOptions(""), {});
  SimulateOptions o = Options(50, {Policy::kLru, Policy::kPrescient});
  o.row_bytes = 1000;
  o.model = StorageModel::Lassen();
  const SimulationResult r = Simulate(ViewOf(s), o);
  std::ostringstream table;
  PrintTable(r, table);
  EXPECT_NE(table.str().find("Belady optimum"), std::string::npos);
  EXPECT_NE(table.str().find("prescient"), std::string::npos);
  EXPECT_NE(table.str().find("prescient owners: "), std::string::npos);
  const std::string dir = testing::TempDir();
  WriteCsv(r, dir + "/sim.csv");
  WriteJson(r, dir + "/sim.json");
  std::ifstream csv(dir + "/sim.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("level,policy,epoch,step,rank", 0), 0u);
  std::size_t lines = 1;
  for (std::string line; std::getline(csv, line);) ++lines;
  EXPECT_EQ(lines, 1 + 2 * (2 + 2 * 4 + 2 * 25));
  EXPECT_NE(header.find("io_seconds"), std::string::npos);  // epochs, rank-epochs, steps
  std::ifstream json(dir + "/sim.json");
  const std::string text((std::istreambuf_iterator<char>(json)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"policy\": \"prescient\""), std::string::npos);
  EXPECT_NE(text.find("\"compulsory_global\": 500"), std::string::npos);
  EXPECT_NE(text.find("\"ownership\": {\"budget\": "), std::string::npos);
  EXPECT_THROW(WriteCsv(r, "/nonexistent-dir/x.csv"), std::runtime_error);
}

}  // namespace
}  // namespace prescient::scheduler::simulate
