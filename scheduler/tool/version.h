// The version prescient-schedule writes into the files it generates.
#ifndef PRESCIENT_SCHEDULER_TOOL_VERSION_H_
#define PRESCIENT_SCHEDULER_TOOL_VERSION_H_

namespace prescient::scheduler::tool {
inline constexpr const char* kVersion = "0.1.0";
}  // namespace prescient::scheduler::tool

#endif  // PRESCIENT_SCHEDULER_TOOL_VERSION_H_
