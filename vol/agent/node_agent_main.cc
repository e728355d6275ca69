// prescient-node: see node_agent.h and agent_flags.h.
#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <variant>

#include "vol/agent/agent_flags.h"
#include "vol/agent/node_agent.h"

namespace {

std::atomic<bool> g_stop{false};

extern "C" void OnSignal(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  using prescient::vol::agent::AgentFlags;
  const std::variant<AgentFlags, std::string> parsed =
      prescient::vol::agent::ParseAgentFlags(argc, argv);
  if (const std::string* message = std::get_if<std::string>(&parsed)) {
    if (*message == "help") {
      std::fputs(prescient::vol::agent::kAgentUsage, stdout);
      return 0;
    }
    std::fprintf(stderr, "prescient-node: %s\n%s", message->c_str(),
                 prescient::vol::agent::kAgentUsage);
    return 2;
  }
  // The agent reads files with HDF5's own connector: the job's environment
  // names Prescient as the connector for the training processes, not for us.
  ::unsetenv("HDF5_VOL_CONNECTOR");

  // Only the main thread calls MPI (peer_link.h).
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "prescient-node: MPI_Init_thread failed\n");
    return 1;
  }
  struct sigaction action{};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  int status = 0;
  bool finalize = true;
  {
    auto [agent, error] =
        prescient::vol::agent::NodeAgent::Start(MPI_COMM_WORLD, std::get<AgentFlags>(parsed));
    if (!agent) {
      std::fprintf(stderr, "prescient-node: %s\n", error.c_str());
      status = 1;
    } else {
      try {
        agent->Run(g_stop);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "prescient-node: stopped: %s\n", e.what());
        status = 1;
      }
      finalize = agent->Drained();
    }
  }
  if (!finalize) {
    // A send to a stopped peer never completes, and MPI_Finalize would wait
    // for it: leave without it (the launcher may report that; nothing of the
    // training job depends on this process any more).
    std::fprintf(stderr, "prescient-node: a peer is not answering; exiting without MPI_Finalize\n");
    std::fflush(stderr);
    ::_exit(status);
  }
  MPI_Finalize();
  return status;
}
