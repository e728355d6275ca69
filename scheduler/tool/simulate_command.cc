#include "scheduler/tool/simulate_command.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "scheduler/core/schedule_file.h"
#include "scheduler/simulate/report.h"
#include "scheduler/simulate/simulator.h"
#include "scheduler/tool/flags.h"
#include "scheduler/tool/progress_bar.h"

namespace prescient::scheduler::tool {
namespace {

constexpr const char* kUsage = R"(usage: prescient-schedule simulate SCHEDULE --cache SIZE [options]

Replays SCHEDULE (a schedule file) against one cache per node and prints, per
policy, the storage reads, local and remote hits, the slowest rank's reads per
step, and the lower bounds (compulsory misses, Belady's optimum) with the ratio
to them; then the storage reads per epoch.

Options:
  --cache SIZE           cache per node: N samples, P% of the dataset, or bytes
                         with a unit (KB, MB, GB, KiB, MiB, GiB; needs a row size)
  --row-bytes B          bytes per sample (default: from the schedule's dataset
                         fingerprint; needed for bytes and the storage model)
  --ranks-per-node K     override the schedule's ranks per node
  --policy LIST          all (default) or a comma list of: none, lru, belady,
                         nopfs, prescient
  --model NAME           storage model for modelled epoch times: lassen (NoPFS's
                         Lassen setup, default when a row size is known) or none
  --csv FILE             per-epoch, per-rank and per-step rows
  --json FILE            everything, as JSON
  --plot FILE.png        plots (needs python3 with matplotlib)
  --threads N            policies simulated side by side (default 2)
  --quiet                no progress bar
  --help                 this text

Policies: none (no cache), lru, belady (clairvoyant eviction: the optimum for a
node-local cache), nopfs (static placement by access frequency + remote hits),
prescient (belady + remote hits from peer caches; use on a planned schedule).
See scheduler/simulate/README.md.
)";

std::uint64_t ParseCache(const std::string& text, std::uint64_t num_samples,
                         std::uint64_t row_bytes) {
  if (!text.empty() && text.back() == '%') {
    const double percent = std::stod(text.substr(0, text.size() - 1));
    if (!(percent >= 0 && percent <= 100)) throw UsageError("--cache: percent outside 0..100");
    return static_cast<std::uint64_t>(static_cast<long double>(num_samples) * percent / 100.0L);
  }
  static const std::pair<const char*, double> kUnits[] = {
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3},     {"MB", 1e6},        {"GB", 1e9},           {"TB", 1e12}};
  for (const auto& [unit, scale] : kUnits) {
    const std::string u(unit);
    if (text.size() > u.size() && text.ends_with(u)) {
      if (row_bytes == 0) throw UsageError("--cache " + text + ": bytes need --row-bytes");
      const double bytes = std::stod(text.substr(0, text.size() - u.size())) * scale;
      if (!(bytes >= 0)) throw UsageError("--cache: negative size");
      return static_cast<std::uint64_t>(bytes / static_cast<double>(row_bytes));
    }
  }
  return ParseUnsigned(text, "--cache");
}

// A view over the schedule file: each part is the reader's own view, kept alive
// by the PartView.
plan::ScheduleView ViewOfFile(std::shared_ptr<const ScheduleReader> reader,
                              std::uint32_t ranks_per_node) {
  plan::ScheduleView view;
  const ScheduleHeader& header = reader->header();
  view.num_samples = header.num_samples;
  view.layout = header.layout;
  if (ranks_per_node) view.layout.ranks_per_node = ranks_per_node;
  view.epochs = header.epochs;
  view.part = [reader](std::uint32_t rank, std::uint32_t epoch) {
    auto part = std::make_shared<RankEpochView>(reader->Part(rank, epoch));
    return plan::PartView{part->samples(), part->step_begin(), part};
  };
  return view;
}

}  // namespace

int RunSimulateCommand(const std::vector<std::string>& args) {
  const Flags flags(
      args,
      {"cache", "row-bytes", "ranks-per-node", "policy", "model", "csv", "json", "plot", "threads"},
      {"quiet", "help"});
  if (flags.Bool("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (flags.positional().size() != 1) throw UsageError("simulate takes one schedule file");
  const auto start = std::chrono::steady_clock::now();
  auto reader = std::make_shared<const ScheduleReader>(ScheduleReader::Open(flags.positional()[0]));
  const ScheduleHeader& header = reader->header();

  simulate::SimulateOptions options;
  options.row_bytes = flags.U64("row-bytes", header.dataset.row_bytes);
  try {
    options.cache_samples =
        ParseCache(flags.Required("cache"), header.num_samples, options.row_bytes);
    options.policies = simulate::ParsePolicies(flags.Get("policy").value_or("all"));
    const std::string model = flags.Get("model").value_or(options.row_bytes ? "lassen" : "none");
    if (model != "none") {
      if (options.row_bytes == 0) throw UsageError("--model " + model + " needs --row-bytes");
      options.model = simulate::StorageModelByName(model);
    }
  } catch (const std::logic_error& e) {  // std::stod and the parsers
    throw UsageError(e.what());
  }
  options.threads = flags.U32("threads", 2);
  const std::uint32_t rpn = flags.U32("ranks-per-node", 0);
  if (flags.Has("ranks-per-node") && rpn == 0) throw UsageError("--ranks-per-node must be >= 1");
  const plan::ScheduleView view = ViewOfFile(reader, rpn);

  simulate::SimulationResult result;
  {
    ProgressBar bar("simulating", !flags.Bool("quiet"));
    options.progress = bar.Callback();
    result = simulate::Simulate(view, options);
  }
  simulate::PrintTable(result, std::cout);
  std::cout.flush();
  if (const auto csv = flags.Get("csv")) simulate::WriteCsv(result, *csv);
  std::string json = flags.Get("json").value_or("");
  if (!json.empty()) simulate::WriteJson(result, json);
  if (const auto png = flags.Get("plot")) {
    const bool temporary = json.empty();
    if (temporary) {
      json = *png + ".json.tmp";
      simulate::WriteJson(result, json);
    }
    try {
      simulate::RunPlotScript(json, *png);
    } catch (...) {
      if (temporary) std::filesystem::remove(json);
      throw;
    }
    if (temporary) std::filesystem::remove(json);
  }
  if (!flags.Bool("quiet")) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "simulated %s in %.2f s\n", flags.positional()[0].c_str(), seconds);
  }
  return 0;
}

}  // namespace prescient::scheduler::tool
