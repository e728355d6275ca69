// prescient-node's command line (vol/agent/agent_flags.h).
#include "vol/agent/agent_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace prescient::vol::agent {
namespace {

std::variant<AgentFlags, std::string> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "prescient-node");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseAgentFlags(static_cast<int>(argv.size()), argv.data());
}

TEST(AgentFlags, DefaultsAndValues) {
  const auto none = Parse({});
  ASSERT_TRUE(std::holds_alternative<AgentFlags>(none));
  EXPECT_FALSE(std::get<AgentFlags>(none).node_index);
  EXPECT_EQ(std::get<AgentFlags>(none).peer_timeout, std::chrono::milliseconds(2000));
  EXPECT_EQ(std::get<AgentFlags>(none).wait_for_job, std::chrono::seconds(600));
  const auto all = Parse({"--node-index", "3", "--wait-for-job", "30", "--peer-timeout", "500"});
  ASSERT_TRUE(std::holds_alternative<AgentFlags>(all));
  EXPECT_EQ(std::get<AgentFlags>(all).node_index, 3u);
  EXPECT_EQ(std::get<AgentFlags>(all).wait_for_job, std::chrono::seconds(30));
  EXPECT_EQ(std::get<AgentFlags>(all).peer_timeout, std::chrono::milliseconds(500));
}

TEST(AgentFlags, MistakesAreNamed) {
  EXPECT_EQ(std::get<std::string>(Parse({"--help"})), "help");
  EXPECT_NE(std::get<std::string>(Parse({"--nodes", "2"})).find("--nodes"), std::string::npos);
  EXPECT_NE(std::get<std::string>(Parse({"--node-index"})).find("needs a value"),
            std::string::npos);
  EXPECT_NE(std::get<std::string>(Parse({"--peer-timeout", "2s"})).find("not a number"),
            std::string::npos);
  EXPECT_NE(std::get<std::string>(Parse({"--peer-timeout", "0"})).find("at least"),
            std::string::npos);
}

}  // namespace
}  // namespace prescient::vol::agent
