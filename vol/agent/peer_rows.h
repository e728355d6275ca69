// The agent's RemoteRows (vol/schedule/remote_rows.h): rows of samples another
// node owns are asked of that node's agent instead of read from storage.
//
// Start groups a prefetch round's claimed rows by owner (scheduler/plan/
// ownership.h), in requests of at most kMaxRowsPerRequest rows, and queues
// them on the PeerLink; rows of samples this node owns, of samples nobody
// owns, of owners that are suspect or gone, and of fields cached in groups
// (labels: a block of them per entry) stay for storage. Finish waits for the
// replies (each is answered or expired by the link within its timeout),
// checks every reply against its request before publishing a byte, and
// returns the rows that did not arrive (counted as fallback_peer_failed), so
// the round reads them from storage.
#ifndef PRESCIENT_VOL_AGENT_PEER_ROWS_H_
#define PRESCIENT_VOL_AGENT_PEER_ROWS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "cache/core/node_cache.h"
#include "scheduler/plan/ownership.h"
#include "vol/agent/peer_link.h"
#include "vol/schedule/remote_rows.h"
#include "vol/schedule/schedule_follower.h"

namespace prescient::vol::agent {

class PeerRows final : public RemoteRows {
 public:
  PeerRows(cache::NodeCache& cache, ScheduleFollower& follower,
           const scheduler::plan::SampleOwners& owners, PeerLink& link);

  std::unique_ptr<Fetch> Start(const CachedDataset& dataset,
                               std::vector<std::uint64_t>& rows) override;

 private:
  class PendingFetch;

  cache::NodeCache& cache_;
  ScheduleFollower& follower_;
  const scheduler::plan::SampleOwners& owners_;
  PeerLink& link_;
  std::atomic<std::uint64_t> next_id_{1};
};

}  // namespace prescient::vol::agent

#endif  // PRESCIENT_VOL_AGENT_PEER_ROWS_H_
