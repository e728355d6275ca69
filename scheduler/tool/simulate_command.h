// prescient-schedule simulate: replays a schedule file against node caches
// (scheduler/simulate/simulator.h) and reports storage reads next to their
// lower bounds.
#ifndef PRESCIENT_SCHEDULER_TOOL_SIMULATE_COMMAND_H_
#define PRESCIENT_SCHEDULER_TOOL_SIMULATE_COMMAND_H_

#include <string>
#include <vector>

namespace prescient::scheduler::tool {

// `args` are the arguments after "simulate". Returns the exit status; throws
// UsageError for bad arguments and other exceptions for failures.
int RunSimulateCommand(const std::vector<std::string>& args);

}  // namespace prescient::scheduler::tool

#endif  // PRESCIENT_SCHEDULER_TOOL_SIMULATE_COMMAND_H_
