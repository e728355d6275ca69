// The command line of prescient-node. Everything the connector also reads
// (PRESCIENT_SCHEDULE, PRESCIENT_CACHE_SIZE, PRESCIENT_NODE_ID,
// PRESCIENT_SHM_DIR, PRESCIENT_STATS, ...) comes from the same PRESCIENT_*
// variables with the same meaning (vol/runtime/options.h), so one environment
// serves the job and its agents; the flags only add what is the agent's own.
#ifndef PRESCIENT_VOL_AGENT_AGENT_FLAGS_H_
#define PRESCIENT_VOL_AGENT_AGENT_FLAGS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

namespace prescient::vol::agent {

struct AgentFlags {
  // The schedule node this agent serves; default: its rank among the agents.
  std::optional<std::uint32_t> node_index;
  // Exit when no training process of this node has read within this long.
  std::chrono::seconds wait_for_job{600};
  // A peer that does not answer a request within this long is skipped
  // (rows read from storage) for a while.
  std::chrono::milliseconds peer_timeout{2000};
};

inline constexpr const char* kAgentUsage =
    "usage: prescient-node [--node-index N] [--wait-for-job SECONDS] [--peer-timeout MS]\n"
    "\n"
    "The node agent of Prescient: one per node, started by the job's launcher beside\n"
    "the training processes (mpirun --map-by ppr:1:node prescient-node &, or\n"
    "srun --ntasks-per-node=1 --overlap prescient-node &). It reads the same\n"
    "PRESCIENT_* variables as the connector (PRESCIENT_SCHEDULE is required), attaches\n"
    "to its node's cache, prefetches for the node's ranks, and fetches rows other\n"
    "nodes own from their agents instead of from storage.\n"
    "\n"
    "  --node-index N         the schedule's node this agent serves (default: its MPI\n"
    "                         rank; node n holds ranks [n*ranks_per_node, ...))\n"
    "  --wait-for-job SECONDS exit if no training process of the node reads within\n"
    "                         this long (default 600)\n"
    "  --peer-timeout MS      a request a peer leaves unanswered this long is read from\n"
    "                         storage, and the peer is skipped for 10 s (default 2000)\n"
    "\n"
    "It exits by itself once every rank of its node has read the schedule's last step,\n"
    "or no process of the job has held the node's cache for 5 s (a training process\n"
    "between two epochs' DataLoader workers holds it), and on SIGTERM or SIGINT;\n"
    "before leaving it serves its peers until they are done too.\n";

// The flags, "help" for --help, or an error message naming the bad flag.
std::variant<AgentFlags, std::string> ParseAgentFlags(int argc, char** argv);

}  // namespace prescient::vol::agent

#endif  // PRESCIENT_VOL_AGENT_AGENT_FLAGS_H_
