// prescient-schedule index: build a node's next-use index once and save it,
// so every process of the node maps the same file (NextUseIndex::Load).
#include <cstdio>
#include <string>
#include <vector>

#include "scheduler/core/next_use_index.h"
#include "scheduler/core/schedule_file.h"
#include "scheduler/tool/commands.h"
#include "scheduler/tool/flags.h"
#include "scheduler/tool/progress_bar.h"

namespace prescient::scheduler::tool {
namespace {

constexpr const char* kUsage =
    R"(usage: prescient-schedule index SCHEDULE --node N --output FILE [options]

Builds the next-use index of node N (ranks [N*rpn, (N+1)*rpn)) from SCHEDULE
and writes it to FILE. Processes load it with NextUseIndex::Load(FILE) instead
of building it themselves (seconds at ImageNet scale).

Options:
  --read-table   also store the per-read table (NextUseOfRead; 4 bytes per read)
  --quiet        no progress bar
)";

}  // namespace

int RunIndexCommand(const std::vector<std::string>& args) {
  const Flags flags(args, {"node", "output"}, {"read-table", "quiet", "help"});
  if (flags.Bool("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (flags.positional().size() != 1) throw UsageError("index takes exactly one SCHEDULE");
  if (!flags.Has("node")) throw UsageError("--node is required");
  const std::string output = flags.Required("output");
  const ScheduleReader reader = ScheduleReader::Open(flags.positional()[0]);
  const std::uint32_t node = flags.U32("node", 0);
  if (node >= reader.header().layout.nodes()) {
    throw UsageError("--node " + std::to_string(node) + ": the schedule has " +
                     std::to_string(reader.header().layout.nodes()) + " nodes");
  }
  NextUseIndex index;
  {
    ProgressBar bar("indexing", !flags.Bool("quiet"));
    index =
        NextUseIndex::Build(reader, node, bar.Callback(), {.read_table = flags.Bool("read-table")});
  }
  index.Save(output);
  if (!flags.Bool("quiet")) {
    std::fprintf(stderr, "wrote %s: node %u, %llu uses, %.1f MiB\n", output.c_str(), node,
                 static_cast<unsigned long long>(index.total_uses()),
                 static_cast<double>(index.MemoryBytes()) / (1 << 20));
  }
  return 0;
}

}  // namespace prescient::scheduler::tool
