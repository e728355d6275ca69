// The prescient-schedule subcommands. Each takes the arguments after its
// name, prints its own --help, and returns the process exit status
// (0 ok, 1 failure, 2 usage error). Errors are thrown: UsageError for bad
// arguments, anything else for failures; main reports them.
#ifndef PRESCIENT_SCHEDULER_TOOL_COMMANDS_H_
#define PRESCIENT_SCHEDULER_TOOL_COMMANDS_H_

#include <string>
#include <vector>

namespace prescient::scheduler::tool {

int RunGenerateCommand(const std::vector<std::string>& args);
int RunInspectCommand(const std::vector<std::string>& args);
int RunDumpCommand(const std::vector<std::string>& args);
int RunIndexCommand(const std::vector<std::string>& args);
int RunImportCommand(const std::vector<std::string>& args);

}  // namespace prescient::scheduler::tool

#endif  // PRESCIENT_SCHEDULER_TOOL_COMMANDS_H_
