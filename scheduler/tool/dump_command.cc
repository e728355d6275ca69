// prescient-schedule dump: one rank's epoch as text (for scripts and tests).
#include <cstdio>
#include <string>
#include <vector>

#include "scheduler/core/schedule_file.h"
#include "scheduler/tool/commands.h"
#include "scheduler/tool/flags.h"

namespace prescient::scheduler::tool {
namespace {

constexpr const char* kUsage =
    R"(usage: prescient-schedule dump FILE --rank R --epoch E [--positions P,P,...]

Prints rank R's samples in epoch E: one step (local batch) per line, sample
ids separated by spaces. With --positions, prints only the samples at those
positions (0-based, in read order) on one line.
)";

}  // namespace

int RunDumpCommand(const std::vector<std::string>& args) {
  const Flags flags(args, {"rank", "epoch", "positions"}, {"help"});
  if (flags.Bool("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (flags.positional().size() != 1) throw UsageError("dump takes exactly one FILE");
  if (!flags.Has("rank") || !flags.Has("epoch"))
    throw UsageError("--rank and --epoch are required");
  const ScheduleReader reader = ScheduleReader::Open(flags.positional()[0]);
  const RankEpochView part = reader.Part(flags.U32("rank", 0), flags.U32("epoch", 0));
  std::string out;
  if (std::optional<std::string> positions = flags.Get("positions")) {
    std::size_t begin = 0;
    while (begin <= positions->size()) {
      std::size_t comma = positions->find(',', begin);
      if (comma == std::string::npos) comma = positions->size();
      const std::uint64_t p = ParseUnsigned(positions->substr(begin, comma - begin), "--positions");
      if (!out.empty()) out += ' ';
      out += std::to_string(part.At(p));
      begin = comma + 1;
    }
    out += '\n';
  } else {
    for (std::size_t s = 0; s < part.steps(); ++s) {
      bool first = true;
      for (SampleId id : part.Step(s)) {
        if (!first) out += ' ';
        out += std::to_string(id);
        first = false;
      }
      out += '\n';
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace prescient::scheduler::tool
