#include "scheduler/tool/simulate_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "scheduler/core/schedule_file.h"
#include "scheduler/plan/schedule_file_view.h"
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
                         with a unit (KB, MB, GB, KiB, MiB, GiB; needs the row
                         sizes): all fields of a sample are cached together, so
                         capacity = bytes / sum over fields of
                         ceil(row_bytes / B) x B, as the cache allocates blocks
  --row-bytes B          bytes per sample (default: the sum of the fields' row
                         sizes in the schedule's sample map; needed for bytes and
                         the storage model); overrides the map as one field
  --block-bytes B        the cache's block size B above (default 4096)
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
prescient (the node agent prescient-node's policy: each sample read gets at most
one owner node, plan/ownership.h, which reads it from storage once and serves
the other nodes; the rest of each cache is belady over samples the node does
not own).
See scheduler/simulate/README.md.
)";

std::uint64_t ParseCache(const std::string& text, std::uint64_t num_samples,
                         std::uint64_t slot_bytes) {
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
      if (slot_bytes == 0) {
        throw UsageError("--cache " + text +
                         ": bytes need the row sizes (--row-bytes, or --row-bytes when the "
                         "schedule was made)");
      }
      const double bytes = std::stod(text.substr(0, text.size() - u.size())) * scale;
      if (!(bytes >= 0)) throw UsageError("--cache: negative size");
      return static_cast<std::uint64_t>(bytes / static_cast<double>(slot_bytes));
    }
  }
  return ParseUnsigned(text, "--cache");
}

}  // namespace

int RunSimulateCommand(const std::vector<std::string>& args) {
  const Flags flags(args,
                    {"cache", "row-bytes", "block-bytes", "ranks-per-node", "policy", "model",
                     "csv", "json", "plot", "threads"},
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
  // Row sizes: --row-bytes (one field), else the map's fields (all known, or
  // the sample's size is unknown).
  std::vector<std::uint64_t> rows;
  if (flags.Has("row-bytes")) {
    rows.push_back(flags.U64("row-bytes", 0));
  } else {
    for (const MapField& f : header.map.fields()) rows.push_back(f.row_bytes);
  }
  const bool known = !rows.empty() && std::find(rows.begin(), rows.end(), 0u) == rows.end();
  const std::uint64_t block = flags.U64("block-bytes", 4096);
  if (block == 0) throw UsageError("--block-bytes must be >= 1");
  if (known) {
    for (const std::uint64_t r : rows) {
      options.row_bytes += r;
      options.slot_bytes += (r + block - 1) / block * block;
    }
  }
  if (header.map.has_files() && !flags.Has("row-bytes")) {
    for (const MapField& f : header.map.fields()) options.fields.push_back(f.dataset);
  }
  try {
    options.cache_samples =
        ParseCache(flags.Required("cache"), header.num_samples, options.slot_bytes);
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
  const plan::ScheduleView view = plan::ViewOfFile(reader, rpn);

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
