// prescient-schedule generate: loader orders and planned orders to a file.
#include <chrono>
#include <cstdio>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "scheduler/core/loader_orders.h"
#include "scheduler/core/schedule_file.h"
#include "scheduler/tool/commands.h"
#include "scheduler/tool/flags.h"
#include "scheduler/tool/map_flags.h"
#include "scheduler/tool/progress_bar.h"
#include "scheduler/tool/version.h"

#if defined(PRESCIENT_HAVE_PLANNER)
#include "scheduler/plan/planner.h"
#endif

namespace prescient::scheduler::tool {
namespace {

constexpr const char* kUsage =
    R"(usage: prescient-schedule generate --source SOURCE --samples N --epochs E
                                   --output FILE [options]

Writes the access schedule of every rank and epoch to FILE.

Sources:
  torch-distributed  DistributedSampler(n, R, rank, shuffle, seed, drop_last) + set_epoch(e),
                     batched by DataLoader(batch_size, drop_last=--drop-last-batch)
  torch-loader       DataLoader(shuffle=True, generator=torch.Generator().manual_seed(seed)),
                     one rank (--persistent-workers needs --workers > 0)
  numpy              np.random.default_rng(seed).permutation(n) every epoch from one
                     generator (--reseed-each-epoch: default_rng(seed + epoch)), split
                     across ranks like DistributedSampler
  numpy-legacy       the same with np.random.RandomState(seed) (seed < 2^32)
  sequential         0..n-1 every epoch, split like DistributedSampler(shuffle=False)
  plan               an order Prescient plans (--plan SPEC; see scheduler/plan/README.md)

Options:
  --samples N            samples in the dataset (default: the rows the --dataset
                         files hold)
  --epochs E             epochs (required)
  --ranks R              data-parallel ranks (default 1)
  --ranks-per-node K     ranks sharing a node cache (default 1)
  --workers W            DataLoader workers per rank (default 0); batch k -> worker k % W
  --batch-size B         per-rank batch size (default 1)
  --seed S               seed (default 0; negative allowed for torch sources)
  --no-shuffle           torch-distributed: DistributedSampler(shuffle=False)
  --drop-last            DistributedSampler(drop_last=True): truncate instead of padding
  --drop-last-batch      DataLoader(drop_last=True): drop each rank's short last batch
  --persistent-workers   DataLoader(persistent_workers=True) (changes torch-loader
                         orders; accepted for torch-distributed, where it does not)
  --reseed-each-epoch    numpy sources: a fresh generator seeded seed + epoch per epoch
  --plan SPEC            plan source: e.g. order=partial:0.3,cache=25%,solar=on
  --store recipe|lists   loader sources: store the recipe (default; readers regenerate)
                         or the explicit lists (needed by the Python sampler)
  --output FILE          the schedule file to write (replaced atomically)
  --quiet                no progress bar

)";

ScheduleHeader MakeHeader(const Flags& flags) {
  ScheduleHeader header;
  std::optional<std::uint64_t> samples;
  if (flags.Has("samples")) samples = flags.U64("samples", 0);
  MapFromFlags map = SampleMapFromFlags(flags, samples);
  if (!map.samples) throw UsageError("--samples is required");
  if (*map.samples == 0) throw UsageError("--samples must be >= 1");
  header.map = std::move(map.map);
  header.num_samples = *map.samples;
  header.epochs = flags.U32("epochs", 0);
  header.layout.ranks = flags.U32("ranks", 1);
  header.layout.ranks_per_node = flags.U32("ranks-per-node", 1);
  header.layout.workers = flags.U32("workers", 0);
  header.layout.batch_size = flags.U32("batch-size", 1);
  header.generator = std::string("prescient-schedule ") + kVersion;
  if (header.epochs == 0) throw UsageError("--epochs must be >= 1");
  if (header.layout.ranks == 0 || header.layout.ranks_per_node == 0 ||
      header.layout.batch_size == 0) {
    throw UsageError("--ranks, --ranks-per-node and --batch-size must be >= 1");
  }
  return header;
}

void GeneratePlan(const Flags& flags, ScheduleHeader& header, const std::string& output,
                  bool quiet) {
#if defined(PRESCIENT_HAVE_PLANNER)
  for (const char* loader_only :
       {"no-shuffle", "drop-last", "drop-last-batch", "persistent-workers", "reseed-each-epoch"}) {
    if (flags.Has(loader_only)) {
      throw UsageError(std::string("--") + loader_only +
                       " is for loader sources; planned orders take their options in --plan");
    }
  }
  if (flags.Get("store").value_or("lists") != "lists") {
    throw UsageError("--store recipe: planned schedules are always stored as lists");
  }
  const plan::PlanOptions options = [&] {
    try {
      return plan::ParsePlanOptions(flags.Get("plan").value_or(""));
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("--plan: ") + e.what());
    }
  }();
  header.source = "plan";
  header.seed = flags.Seed("seed", false);
  header.parameters = plan::CanonicalPlanOptions(options);
  plan::PlanResult result;
  {
    ProgressBar bar("planning", !quiet);
    result = plan::PlanWithReport(header.num_samples, header.layout, header.epochs, header.seed,
                                  options, bar.Callback());
  }
  if (options.epoch_order && !quiet) {
    const plan::EpochOrderReport& r = result.epoch_order;
    std::fprintf(stderr, "epoch order (%s%s): cost %llu -> %llu (buffer %llu samples)\n",
                 r.solver.c_str(), r.exact ? ", optimal" : "",
                 static_cast<unsigned long long>(r.identity_cost),
                 static_cast<unsigned long long>(r.optimised_cost),
                 static_cast<unsigned long long>(r.buffer_samples));
  }
  WriteScheduleFile(output, header, result.schedule);
#else
  (void)flags;
  (void)header;
  (void)output;
  (void)quiet;
  throw UsageError("--source plan: this build has no planner (scheduler/plan)");
#endif
}

void GenerateLoader(const Flags& flags, ScheduleHeader& header, const std::string& source,
                    const std::string& output, bool quiet) {
  if (flags.Has("plan")) throw UsageError("--plan is only for --source plan");
  LoaderSpec spec;
  try {
    spec = ParseLoaderSpec(source, "");
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--source: ") + e.what() + " or plan");
  }
  const bool torch =
      spec.source == LoaderSource::kTorchDistributed || spec.source == LoaderSource::kTorchLoader;
  spec.seed = flags.Seed("seed", torch);
  spec.shuffle = !flags.Bool("no-shuffle") && spec.source != LoaderSource::kSequential;
  spec.drop_last = flags.Bool("drop-last");
  spec.drop_last_batch = flags.Bool("drop-last-batch");
  spec.persistent_workers = flags.Bool("persistent-workers");
  spec.reseed_each_epoch = flags.Bool("reseed-each-epoch");
  if (flags.Has("no-shuffle") && spec.source != LoaderSource::kTorchDistributed) {
    throw UsageError("--no-shuffle is only for torch-distributed (use --source sequential)");
  }
  try {
    ValidateLoaderSpec(spec, header.num_samples, header.layout, header.epochs);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  header.source = std::string(LoaderSourceName(spec.source));
  header.parameters = CanonicalLoaderParameters(spec);
  header.seed = spec.seed;
  const std::string store = flags.Get("store").value_or("recipe");
  if (store == "recipe") {
    WriteRecipeFile(output, header);
  } else if (store == "lists") {
    AccessSchedule schedule;
    {
      ProgressBar bar("generating", !quiet);
      schedule = GenerateLoaderSchedule(spec, header.num_samples, header.layout, header.epochs,
                                        bar.Callback());
    }
    WriteScheduleFile(output, header, schedule);
  } else {
    throw UsageError("--store: expected recipe or lists, got '" + store + "'");
  }
}

}  // namespace

int RunGenerateCommand(const std::vector<std::string>& args) {
  std::set<std::string> valued = {"source",         "samples", "epochs",     "ranks",
                                  "ranks-per-node", "workers", "batch-size", "seed",
                                  "plan",           "store",   "output"};
  valued.insert(std::begin(kMapValuedFlags), std::end(kMapValuedFlags));
  const Flags flags(args, valued,
                    {"no-shuffle", "drop-last", "drop-last-batch", "persistent-workers",
                     "reseed-each-epoch", "quiet", "help"},
                    {std::begin(kMapRepeatedFlags), std::end(kMapRepeatedFlags)});
  if (flags.Bool("help")) {
    std::fputs(kUsage, stdout);
    std::fputs(kMapFlagsUsage, stdout);
    return 0;
  }
  if (!flags.positional().empty()) {
    throw UsageError("unexpected argument '" + flags.positional().front() + "'");
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string source = flags.Required("source");
  const std::string output = flags.Required("output");
  ScheduleHeader header = MakeHeader(flags);
  const bool quiet = flags.Bool("quiet");
  if (source == "plan") {
    GeneratePlan(flags, header, output, quiet);
  } else {
    GenerateLoader(flags, header, source, output, quiet);
  }
  if (!quiet) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "wrote %s (%s, %s) in %.2f s\n", output.c_str(), header.source.c_str(),
                 flags.Get("store").value_or(source == "plan" ? "lists" : "recipe").c_str(),
                 seconds);
  }
  return 0;
}

}  // namespace prescient::scheduler::tool
