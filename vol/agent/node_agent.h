// prescient-node: the node agent. One per node, an MPI program started by the
// job's launcher beside the training processes, which never call MPI
// themselves and keep talking only to their node's segment.
//
// Start (collective over the agents' communicator):
//   1. the schedule (PRESCIENT_SCHEDULE) and the node this agent serves;
//   2. the node's segment, opened with the options every training process of
//      the node uses (CacheClient::SegmentOptions);
//   3. every field of every file of the sample map, prepared on this thread
//      (the only one of the agent that ever calls HDF5) and registered;
//   4. the owners of all samples (scheduler/plan/ownership.h) from the whole
//      schedule and the smallest node cache among the agents (so every agent
//      computes the same placement), and this node's share written for the
//      node's processes (vol/schedule/node_ownership.h);
//   5. the prefetch leadership, taken from whoever holds it: the agent reads
//      ahead of every local rank, rows it owns (or nobody owns) from storage,
//      rows other nodes own from their agents (PeerRows).
// Run then serves the peers' requests on this thread (PeerLink::Poll): rows
// are copied out of the segment pinned, and rows this node owns but has not
// loaded are loaded now, once, for every node (ReadRows coordinates with the
// node's own readers and prefetch).
//
// Lifetime: its node is done when every rank of the node that it saw has
// finished the schedule, or no other process has held the node's segment for
// 5 s (NodeCache::OthersHold: the processes attached to it, and the keepers
// that hold it for the training processes between DataLoader worker
// generations, are gone), or when no rank of its node read within
// --wait-for-job, or on SIGTERM/SIGINT. It then says goodbye to its peers and
// goes on serving them until they all said goodbye too (their ranks still
// read the rows this node owns), at most --wait-for-job; leaving before that,
// it tells them it is gone. Killed, it leaves nothing behind that the
// training processes depend on: its leadership passes back to them (a dead
// leader is replaced within a second), its claims are released, and the
// ownership file is ignored once its writer is dead.
#ifndef PRESCIENT_VOL_AGENT_NODE_AGENT_H_
#define PRESCIENT_VOL_AGENT_NODE_AGENT_H_

#include <mpi.h>

#include <atomic>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "cache/core/node_cache.h"
#include "scheduler/core/schedule_file.h"
#include "scheduler/plan/ownership.h"
#include "vol/agent/agent_flags.h"
#include "vol/agent/peer_link.h"
#include "vol/agent/peer_rows.h"
#include "vol/schedule/schedule_follower.h"
#include "vol/serve/node_snapshot.h"

namespace prescient::vol::agent {

class NodeAgent {
 public:
  // Null and a message fit for the user when the agent cannot run.
  static std::pair<std::unique_ptr<NodeAgent>, std::string> Start(MPI_Comm comm,
                                                                  const AgentFlags& flags);
  ~NodeAgent();
  NodeAgent(const NodeAgent&) = delete;
  NodeAgent& operator=(const NodeAgent&) = delete;

  // Serves until the node's job is over or `stop` is set; then stops the
  // prefetching, says goodbye and returns once the peers are done (or gone).
  void Run(const std::atomic<bool>& stop);
  // False when sends to a stopped peer are still pending (MPI_Finalize could
  // hang on them: the caller then exits without it).
  bool Drained();

 private:
  NodeAgent(MPI_Comm comm, const AgentFlags& flags);
  std::string Setup();
  // Prepares and registers every field of every file of the map.
  std::string PrepareDatasets();
  std::string PlaceSamples();
  // Answers a peer's request (never throws: a failure is no answer).
  std::vector<std::byte> Serve(int peer, std::span<const std::byte> message);
  std::vector<std::byte> ServeRequest(std::span<const std::byte> message);
  // True once this node's job is over (see the header).
  bool JobOver();

  MPI_Comm comm_;
  AgentFlags flags_;
  std::uint32_t node_ = 0;
  // The schedule file, read for its layout at start and for the placement.
  std::shared_ptr<const scheduler::ScheduleReader> schedule_;
  std::unique_ptr<cache::NodeCache> cache_;
  NodeSnapshot node_snapshot_;  // the node's counters into the agent's statistics
  std::unique_ptr<ScheduleFollower> follower_;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::shared_ptr<CachedDataset>> datasets_;
  scheduler::plan::SampleOwners owners_;
  std::unique_ptr<PeerLink> link_;
  std::unique_ptr<PeerRows> peer_rows_;
  // JobOver's view of the node's ranks.
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_held_;
  bool saw_job_ = false;
  bool published_ = false;  // the ownership file is ours to remove
  bool warned_foreign_ = false;
};

}  // namespace prescient::vol::agent

#endif  // PRESCIENT_VOL_AGENT_NODE_AGENT_H_
