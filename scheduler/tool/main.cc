// prescient-schedule: generate, inspect, dump and simulate access schedules.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "scheduler/tool/commands.h"
#include "scheduler/tool/flags.h"
#include "scheduler/tool/version.h"

#if defined(PRESCIENT_HAVE_SIMULATE)
#include "scheduler/tool/simulate_command.h"
#endif

namespace {

constexpr const char* kUsage = R"(usage: prescient-schedule COMMAND [options]

Commands:
  generate   write the access schedule of a loader or a planned order to a file
  import     write a schedule from an explicit order (a .npy or text file)
  inspect    print a summary of a schedule file and check its checksums
  dump       print one rank's epoch (for scripts and tests)
  index      build a node's next-use index file (shared by the node's processes)
  simulate   replay a schedule against a node cache and report storage reads

Run 'prescient-schedule COMMAND --help' for the options of a command.
)";

int Dispatch(const std::string& command, const std::vector<std::string>& args) {
  using namespace prescient::scheduler::tool;
  if (command == "generate") return RunGenerateCommand(args);
  if (command == "inspect") return RunInspectCommand(args);
  if (command == "dump") return RunDumpCommand(args);
  if (command == "import") return RunImportCommand(args);
  if (command == "index") return RunIndexCommand(args);
  if (command == "simulate") {
#if defined(PRESCIENT_HAVE_SIMULATE)
    return RunSimulateCommand(args);
#else
    throw UsageError("simulate: this build has no simulator (scheduler/simulate)");
#endif
  }
  if (command == "--version") {
    std::printf("prescient-schedule %s\n", kVersion);
    return 0;
  }
  throw UsageError("unknown command '" + command + "'");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    return Dispatch(command, args);
  } catch (const prescient::scheduler::tool::UsageError& e) {
    std::fprintf(stderr, "prescient-schedule %s: %s\n(see 'prescient-schedule %s --help')\n",
                 command.c_str(), e.what(), command.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prescient-schedule %s: error: %s\n", command.c_str(), e.what());
    return 1;
  }
}
