// prescient-schedule-bench: cost of the two lookups the cache makes, on a
// schedule of a chosen shape (default: ImageNet-1k, 90 epochs, 16 ranks on
// 4 nodes, batch 64), plus the setup they need.
//
//   prescient-schedule-bench [--samples N] [--epochs E] [--ranks R]
//       [--ranks-per-node K] [--batch-size B] [--queries Q] --file PATH
//
// Writes a torch-distributed schedule as lists to PATH (and a recipe next to
// it), then times: Part(r, e).sample(p) for random (r, e, p); sequential
// reads through a held view; NextUseIndex build and random NextUseAfter.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "scheduler/core/loader_orders.h"
#include "scheduler/core/next_use_index.h"
#include "scheduler/core/schedule_file.h"
#include "scheduler/tool/flags.h"

namespace prescient::scheduler {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double PeakRssMiB() {
  struct rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

int Run(const std::vector<std::string>& args) {
  const tool::Flags flags(
      args, {"samples", "epochs", "ranks", "ranks-per-node", "batch-size", "queries", "file"}, {});
  const std::uint64_t n = flags.U64("samples", 1281167);
  const std::uint32_t epochs = flags.U32("epochs", 90);
  WorldLayout layout;
  layout.ranks = flags.U32("ranks", 16);
  layout.ranks_per_node = flags.U32("ranks-per-node", 4);
  layout.batch_size = flags.U32("batch-size", 64);
  const std::uint64_t queries = flags.U64("queries", 10000000);
  const std::string path = flags.Required("file");
  std::printf("shape: %llu samples, %u epochs, %u ranks, %u per node, batch %u\n",
              static_cast<unsigned long long>(n), epochs, layout.ranks, layout.ranks_per_node,
              layout.batch_size);

  LoaderSpec spec;
  spec.seed = 1;
  ScheduleHeader header;
  header.source = "torch-distributed";
  header.parameters = CanonicalLoaderParameters(spec);
  header.layout = layout;
  header.epochs = epochs;
  header.num_samples = n;
  auto t = Clock::now();
  {
    const AccessSchedule schedule = GenerateLoaderSchedule(spec, n, layout, epochs);
    std::printf("generate (all ranks, all epochs):      %8.2f s\n", Seconds(t));
    t = Clock::now();
    WriteScheduleFile(path, header, schedule);
    std::printf("write lists file:                      %8.2f s\n", Seconds(t));
  }
  WriteRecipeFile(path + ".recipe", header);

  t = Clock::now();
  const ScheduleReader reader = ScheduleReader::Open(path);
  std::printf("open:                                  %8.3f ms\n", Seconds(t) * 1e3);
  t = Clock::now();
  reader.VerifyAll();
  std::printf("verify every part's CRC:               %8.2f s\n", Seconds(t));

  std::mt19937_64 rng(7);
  const std::uint64_t per_rank = reader.Part(0, 0).size();
  std::vector<std::uint32_t> rs(4096), es(4096);
  std::vector<std::uint64_t> ps(4096);
  for (std::size_t i = 0; i < rs.size(); ++i) {
    rs[i] = static_cast<std::uint32_t>(rng() % layout.ranks);
    es[i] = static_cast<std::uint32_t>(rng() % epochs);
    ps[i] = rng() % per_rank;
  }
  std::uint64_t sink = 0;
  // Hot: 4096 fixed (r, e, p), so the cost is the API, not memory.
  t = Clock::now();
  for (std::uint64_t q = 0; q < queries; ++q) {
    const std::size_t i = q & 4095;
    sink += reader.Part(rs[i], es[i]).sample(ps[i]);
  }
  std::printf("Part(r, e).sample(p), cached (r, e, p): %7.1f ns/lookup\n",
              Seconds(t) * 1e9 / static_cast<double>(queries));
  // Cold: a new random position in the 460 MB mapping every time (DRAM + TLB).
  t = Clock::now();
  for (std::uint64_t q = 0; q < queries; ++q) {
    const std::size_t i = q & 4095;
    sink += reader.Part(rs[i], es[i]).sample((ps[i] + q * 7919) % per_rank);
  }
  std::printf("Part(r, e).sample(p), random in file:  %8.1f ns/lookup\n",
              Seconds(t) * 1e9 / static_cast<double>(queries));

  const RankEpochView view = reader.Part(3, 5);
  t = Clock::now();
  for (std::uint64_t q = 0; q < queries; ++q) sink += view.sample(q % per_rank);
  std::printf("view.sample(p), a rank's next sample:  %8.2f ns/lookup\n",
              Seconds(t) * 1e9 / static_cast<double>(queries));

  const ScheduleReader recipe = ScheduleReader::Open(path + ".recipe");
  t = Clock::now();
  for (std::uint32_t e = 0; e < 5; ++e) sink += recipe.Part(0, e).sample(0);
  std::printf("recipe: regenerate one epoch:          %8.2f ms\n", Seconds(t) * 1e3 / 5);
  t = Clock::now();
  sink += recipe.Part(0, epochs - 1).sample(0);
  std::printf("recipe: jump to the last epoch:        %8.2f ms\n", Seconds(t) * 1e3);

  t = Clock::now();
  const NextUseIndex index = NextUseIndex::Build(reader, 1, {}, {.read_table = true});
  std::printf("NextUseIndex build (node 1, + reads):  %8.2f s, %.1f MiB, %llu uses\n", Seconds(t),
              static_cast<double>(index.MemoryBytes()) / (1 << 20),
              static_cast<unsigned long long>(index.total_uses()));
  t = Clock::now();
  index.Save(path + ".nextuse");
  std::printf("NextUseIndex::Save:                    %8.2f s\n", Seconds(t));
  t = Clock::now();
  {
    const NextUseIndex loaded = NextUseIndex::Load(path + ".nextuse", reader);
    sink += loaded.NextUseAfter(1, 0);
  }
  std::printf("NextUseIndex::Load (checks every CRC):  %7.2f s\n", Seconds(t));
  std::vector<SampleId> samples(4096);
  std::vector<std::uint64_t> steps(4096);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    samples[i] = static_cast<SampleId>(rng() % n);
    steps[i] = rng() % index.total_steps();
  }
  t = Clock::now();
  for (std::uint64_t q = 0; q < queries; ++q) {
    const std::size_t i = q & 4095;
    sink += index.NextUseAfter(samples[i], steps[i] + (q >> 12) % 7);
  }
  std::printf("NextUseAfter(s, t), cached s:          %8.1f ns/query\n",
              Seconds(t) * 1e9 / static_cast<double>(queries));
  t = Clock::now();
  for (std::uint64_t q = 0; q < queries; ++q) {
    const std::size_t i = q & 4095;
    sink += index.NextUseAfter(static_cast<SampleId>((samples[i] + q * 7919) % n), steps[i]);
  }
  std::printf("NextUseAfter(s, t), random s, t:       %8.1f ns/query\n",
              Seconds(t) * 1e9 / static_cast<double>(queries));
  // The cache's pattern: ask about the samples of the current step in order.
  const RankEpochView p4 = reader.Part(4, 10);
  const std::uint64_t base = index.EpochFirstStep(10);
  t = Clock::now();
  std::uint64_t count = 0;
  while (count < queries) {
    for (std::size_t s = 0; s < p4.steps() && count < queries; ++s) {
      for (SampleId id : p4.Step(s)) {
        sink += index.NextUseAfter(id, base + s);
        ++count;
      }
    }
  }
  std::printf("NextUseAfter on a step's samples:      %8.1f ns/query\n",
              Seconds(t) * 1e9 / static_cast<double>(count));
  // The same questions through the read table: (rank, epoch, position).
  t = Clock::now();
  count = 0;
  while (count < queries) {
    for (std::size_t p = 0; p < p4.size() && count < queries; ++p, ++count) {
      sink += index.NextUseOfRead(4, 10, p);
    }
  }
  std::printf("NextUseOfRead(r, e, p), in read order: %8.1f ns/query\n",
              Seconds(t) * 1e9 / static_cast<double>(count));
  std::printf("peak RSS: %.0f MiB (checksum %llu)\n", PeakRssMiB(),
              static_cast<unsigned long long>(sink % 1000));
  return 0;
}

}  // namespace
}  // namespace prescient::scheduler

int main(int argc, char** argv) {
  try {
    return prescient::scheduler::Run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prescient-schedule-bench: %s\n", e.what());
    return 1;
  }
}
