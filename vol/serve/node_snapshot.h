// The node's counters in this process's statistics file.
//
// The node cache's counters (hits, evictions, takeovers, repairs, ...) are
// node-wide: every process and the agent of the node add to them in the
// segment. Each process copies them into the "node" block of its statistics
// file now and then, so that what happened on the node is on record even
// after the segment is gone.
#ifndef PRESCIENT_VOL_SERVE_NODE_SNAPSHOT_H_
#define PRESCIENT_VOL_SERVE_NODE_SNAPSHOT_H_

#include <atomic>
#include <chrono>
#include <cstdint>

#include "cache/core/node_cache.h"
#include "vol/runtime/stats.h"

namespace prescient::vol {

class NodeSnapshot {
 public:
  // Writes `cache`'s node-wide counters into `stats` unless the last snapshot
  // of this object is younger than `interval`. Lock-free when not due (a
  // clock read); any thread.
  void MaybeTake(const cache::NodeCache& cache, Stats& stats,
                 std::chrono::milliseconds interval = std::chrono::milliseconds(100)) noexcept;
  // Now, whatever the interval.
  void Take(const cache::NodeCache& cache, Stats& stats) noexcept;

  static NodeValues ValuesOf(const cache::CacheStats& s);

 private:
  static void Write(const cache::NodeCache& cache, Stats& stats) noexcept;

  std::atomic<std::int64_t> last_ns_{0};  // steady clock; 0: never
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SERVE_NODE_SNAPSHOT_H_
