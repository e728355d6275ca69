// prescient-schedule import: a schedule from an explicit order computed
// offline (SOLAR's reordered lists, a script's own shuffle), as lists.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "scheduler/core/loader_orders.h"
#include "scheduler/core/schedule_file.h"
#include "scheduler/tool/commands.h"
#include "scheduler/tool/flags.h"
#include "scheduler/tool/map_flags.h"
#include "scheduler/tool/npy_reader.h"
#include "scheduler/tool/progress_bar.h"
#include "scheduler/tool/version.h"

namespace prescient::scheduler::tool {
namespace {

constexpr const char* kUsage =
    R"(usage: prescient-schedule import ORDER --output FILE [--ranks R] [options]

Writes a schedule (explicit lists) from an order computed offline, e.g.
SOLAR's reordered epochs or a script's own shuffle. ORDER is one of:

  FILE.npy   an integer array (any int/uint dtype) of shape
               (epochs, ranks, samples_per_rank): each rank's list per epoch, or
               (epochs, n): each epoch's global order, split across ranks like
               DistributedSampler (padded cyclically to a multiple of --ranks, or
               truncated with --drop-last; rank r takes positions r, r+R, ...)
  text       one line per (epoch, rank), epoch-major (line e*R + r): the rank's
             sample ids separated by spaces ('#' lines skipped); with --split,
             one line per epoch holding its global order, split as above

Each rank's list is cut into steps of --batch-size (the last one shorter, or
dropped with --drop-last-batch); every rank of an epoch must end up with the
same number of steps; step k is read by DataLoader worker k % --workers.

Options:
  --format npy|text      default: npy for a .npy file, else text
  --split                text: lines are epochs' global orders (see above)
  --ranks R              data-parallel ranks (default 1; must match a 3-D array)
  --ranks-per-node K     ranks sharing a node cache (default 1)
  --workers W            DataLoader workers per rank (default 0)
  --batch-size B         per-rank batch size (default 1)
  --drop-last            split like DistributedSampler(drop_last=True)
  --drop-last-batch      drop each rank's short last batch
  --samples N            samples in the dataset (default: the map's, else the
                         largest id + 1); every id must be < N
  --output FILE          the schedule file to write (replaced atomically)
  --quiet                no progress bar

)";

// Per (epoch, rank) lists, or per-epoch global orders (split later).
struct Order {
  bool split = false;
  std::vector<std::vector<std::int64_t>> lists;  // epoch-major: e * ranks + r, or e
};

Order ReadNpy(const std::string& path, std::uint32_t ranks, ProgressBar& bar) {
  NpyReader npy(path);
  const std::vector<std::uint64_t>& shape = npy.shape();
  Order order;
  std::uint64_t lists = 0, length = 0;
  if (shape.size() == 3) {
    if (shape[1] != ranks) {
      throw UsageError("'" + path + "' has shape (" + std::to_string(shape[0]) + ", " +
                       std::to_string(shape[1]) + ", " + std::to_string(shape[2]) + ") for " +
                       std::to_string(shape[1]) + " ranks, but --ranks is " +
                       std::to_string(ranks));
    }
    lists = shape[0] * shape[1];
    length = shape[2];
  } else if (shape.size() == 2) {
    order.split = true;
    lists = shape[0];
    length = shape[1];
  } else {
    throw UsageError("'" + path + "' has " + std::to_string(shape.size()) +
                     " dimensions; expected (epochs, ranks, samples) or (epochs, n)");
  }
  if (lists == 0) throw UsageError("'" + path + "' holds no epochs");
  order.lists.resize(lists);
  for (std::uint64_t i = 0; i < lists; ++i) {
    order.lists[i].resize(length);
    npy.Read(order.lists[i]);
    bar.Update(static_cast<double>(i + 1) / static_cast<double>(lists) / 2);
  }
  return order;
}

Order ReadText(const std::string& path, bool split) {
  std::ifstream in(path);
  if (!in) throw UsageError("cannot read '" + path + "'");
  Order order;
  order.split = split;
  std::string line;
  for (std::uint64_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line[0] == '#') continue;
    std::vector<std::int64_t>& ids = order.lists.emplace_back();
    const char* p = line.data();
    const char* end = p + line.size();
    while (true) {
      while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == ',')) ++p;
      if (p >= end) break;
      std::int64_t v = 0;
      const auto [next, ec] = std::from_chars(p, end, v);
      if (ec != std::errc() || next == p) {
        throw UsageError("'" + path + "' line " + std::to_string(number) +
                         ": not an integer near '" +
                         std::string(p, std::min<std::size_t>(12, end - p)) + "'");
      }
      ids.push_back(v);
      p = next;
    }
  }
  if (order.lists.empty()) throw UsageError("'" + path + "' holds no lines");
  return order;
}

RankEpoch Batched(std::vector<SampleId> samples, std::uint32_t batch, bool drop_last_batch) {
  RankEpoch part;
  const std::uint64_t steps =
      drop_last_batch ? samples.size() / batch : (samples.size() + batch - 1) / batch;
  samples.resize(std::min<std::uint64_t>(samples.size(), steps * batch));
  part.step_begin.resize(steps + 1);
  for (std::uint64_t s = 0; s <= steps; ++s) {
    part.step_begin[s] = std::min<std::uint64_t>(s * batch, samples.size());
  }
  part.samples = std::move(samples);
  return part;
}

std::vector<SampleId> Ids(const std::vector<std::int64_t>& values, std::uint64_t samples,
                          const std::string& where) {
  std::vector<SampleId> ids(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || static_cast<std::uint64_t>(values[i]) >= samples) {
      throw UsageError(where + ": sample id " + std::to_string(values[i]) + " at position " +
                       std::to_string(i) + " is outside 0.." + std::to_string(samples - 1) +
                       " (--samples " + std::to_string(samples) + ")");
    }
    ids[i] = static_cast<SampleId>(values[i]);
  }
  return ids;
}

}  // namespace

int RunImportCommand(const std::vector<std::string>& args) {
  std::set<std::string> valued = {"format",     "ranks",   "ranks-per-node", "workers",
                                  "batch-size", "samples", "output"};
  valued.insert(std::begin(kMapValuedFlags), std::end(kMapValuedFlags));
  const Flags flags(args, valued, {"split", "drop-last", "drop-last-batch", "quiet", "help"},
                    {std::begin(kMapRepeatedFlags), std::end(kMapRepeatedFlags)});
  if (flags.Bool("help")) {
    std::fputs(kUsage, stdout);
    std::fputs(kMapFlagsUsage, stdout);
    return 0;
  }
  if (flags.positional().size() != 1) throw UsageError("import takes exactly one ORDER file");
  const std::string input = flags.positional()[0];
  const std::string output = flags.Required("output");
  const bool quiet = flags.Bool("quiet");

  ScheduleHeader header;
  header.layout.ranks = flags.U32("ranks", 1);
  header.layout.ranks_per_node = flags.U32("ranks-per-node", 1);
  header.layout.workers = flags.U32("workers", 0);
  header.layout.batch_size = flags.U32("batch-size", 1);
  if (header.layout.ranks == 0 || header.layout.ranks_per_node == 0 ||
      header.layout.batch_size == 0) {
    throw UsageError("--ranks, --ranks-per-node and --batch-size must be >= 1");
  }
  const std::string format = flags.Get("format").value_or(input.ends_with(".npy") ? "npy" : "text");
  if (format != "npy" && format != "text") {
    throw UsageError("--format: expected npy or text, got '" + format + "'");
  }
  if (format == "npy" && flags.Has("split")) {
    throw UsageError("--split is for text files (a 2-D .npy array is split already)");
  }

  ProgressBar bar("importing", !quiet);
  Order order;
  try {
    order = format == "npy" ? ReadNpy(input, header.layout.ranks, bar)
                            : ReadText(input, flags.Bool("split"));
  } catch (const std::runtime_error& e) {
    if (dynamic_cast<const UsageError*>(&e) != nullptr) throw;
    throw std::runtime_error(std::string("import: ") + e.what());
  }
  if (flags.Has("drop-last") && !order.split) {
    throw UsageError("--drop-last applies to global orders that are split across ranks");
  }
  const std::uint64_t lists_per_epoch = order.split ? 1 : header.layout.ranks;
  if (order.lists.size() % lists_per_epoch != 0) {
    throw UsageError("'" + input + "' has " + std::to_string(order.lists.size()) +
                     " lines, not a multiple of --ranks " + std::to_string(header.layout.ranks) +
                     " (one line per epoch and rank, epoch-major; --split for one per epoch)");
  }
  const std::uint64_t epochs = order.lists.size() / lists_per_epoch;
  if (epochs > 0xffffffffull) throw UsageError("too many epochs");
  header.epochs = static_cast<std::uint32_t>(epochs);

  // Samples: --samples, else the map's, else the largest id + 1.
  std::optional<std::uint64_t> samples;
  if (flags.Has("samples")) samples = flags.U64("samples", 0);
  MapFromFlags map = SampleMapFromFlags(flags, samples);
  header.map = std::move(map.map);
  if (!map.samples) {
    std::int64_t largest = -1;
    for (std::size_t i = 0; i < order.lists.size(); ++i) {
      for (std::int64_t v : order.lists[i]) {
        if (v < 0) {
          throw UsageError("'" + input + "' " + (order.split ? "epoch " : "list ") +
                           std::to_string(i) + ": sample id " + std::to_string(v) + " is negative");
        }
        largest = std::max(largest, v);
      }
    }
    if (largest < 0) throw UsageError("'" + input + "' holds no sample ids");
    map.samples = static_cast<std::uint64_t>(largest) + 1;
  }
  if (*map.samples == 0 || *map.samples > 0xffffffffull) {
    throw UsageError("--samples must be between 1 and 2^32 - 1");
  }
  header.num_samples = *map.samples;

  LoaderSpec split_spec;  // DistributedSampler's split and DataLoader's batching
  split_spec.drop_last = flags.Bool("drop-last");
  split_spec.drop_last_batch = flags.Bool("drop-last-batch");
  AccessSchedule schedule(header.num_samples, header.layout, header.epochs);
  for (std::uint32_t e = 0; e < header.epochs; ++e) {
    if (order.split) {
      const std::vector<SampleId> ids =
          Ids(order.lists[e], header.num_samples, "'" + input + "' epoch " + std::to_string(e));
      if (ids.size() < header.layout.ranks && split_spec.drop_last) {
        throw UsageError("epoch " + std::to_string(e) + " has fewer samples than ranks");
      }
      for (std::uint32_t r = 0; r < header.layout.ranks; ++r) {
        schedule.Part(r, e) =
            ids.empty() ? RankEpoch{} : SplitForRank(split_spec, header.layout, ids, r);
      }
    } else {
      for (std::uint32_t r = 0; r < header.layout.ranks; ++r) {
        const std::string where =
            "'" + input + "' epoch " + std::to_string(e) + " rank " + std::to_string(r);
        schedule.Part(r, e) =
            Batched(Ids(order.lists[static_cast<std::size_t>(e) * header.layout.ranks + r],
                        header.num_samples, where),
                    header.layout.batch_size, split_spec.drop_last_batch);
      }
    }
    for (std::uint32_t r = 1; r < header.layout.ranks; ++r) {
      if (schedule.Part(r, e).steps() != schedule.Part(0, e).steps()) {
        throw UsageError("epoch " + std::to_string(e) + ": rank " + std::to_string(r) + " has " +
                         std::to_string(schedule.Part(r, e).samples.size()) + " samples (" +
                         std::to_string(schedule.Part(r, e).steps()) + " steps), rank 0 " +
                         std::to_string(schedule.Part(0, e).samples.size()) + " (" +
                         std::to_string(schedule.Part(0, e).steps()) +
                         " steps); every rank of an epoch needs the same number of steps");
      }
    }
    bar.Update(0.5 + 0.5 * (e + 1) / static_cast<double>(header.epochs));
  }
  order.lists.clear();

  header.source = "import";
  std::string base =
      input.substr(input.find_last_of('/') == std::string::npos ? 0 : input.find_last_of('/') + 1);
  std::replace(base.begin(), base.end(), ',', '_');
  header.parameters = "format=" + format + ",split=" + (order.split ? "1" : "0") +
                      ",drop_last=" + (split_spec.drop_last ? "1" : "0") +
                      ",drop_last_batch=" + (split_spec.drop_last_batch ? "1" : "0") +
                      ",file=" + base;
  header.generator = std::string("prescient-schedule ") + kVersion;
  WriteScheduleFile(output, header, schedule);
  if (!quiet) {
    std::fprintf(stderr, "wrote %s (import of %s: %u epochs, %u ranks, %llu samples)\n",
                 output.c_str(), input.c_str(), header.epochs, header.layout.ranks,
                 static_cast<unsigned long long>(header.num_samples));
  }
  return 0;
}

}  // namespace prescient::scheduler::tool
