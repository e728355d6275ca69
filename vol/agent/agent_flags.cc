#include "vol/agent/agent_flags.h"

#include <charconv>
#include <string_view>

namespace prescient::vol::agent {
namespace {

std::optional<std::uint64_t> Number(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::variant<AgentFlags, std::string> ParseAgentFlags(int argc, char** argv) {
  AgentFlags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") return std::string("help");
    if (flag != "--node-index" && flag != "--wait-for-job" && flag != "--peer-timeout") {
      return "unknown flag " + std::string(flag);
    }
    if (i + 1 >= argc) return std::string(flag) + " needs a value";
    const std::optional<std::uint64_t> value = Number(argv[++i]);
    if (!value) return std::string(flag) + ": not a number: " + argv[i];
    if (flag == "--node-index") {
      if (*value > UINT32_MAX) return "--node-index: too large";
      flags.node_index = static_cast<std::uint32_t>(*value);
    } else if (flag == "--wait-for-job") {
      flags.wait_for_job = std::chrono::seconds(*value);
    } else {
      if (*value == 0) return std::string("--peer-timeout must be at least 1 ms");
      flags.peer_timeout = std::chrono::milliseconds(*value);
    }
  }
  return flags;
}

}  // namespace prescient::vol::agent
