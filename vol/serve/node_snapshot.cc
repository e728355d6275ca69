#include "vol/serve/node_snapshot.h"

#include <string>

namespace prescient::vol {
namespace {

std::int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The segment's file name: the same on every process of the node.
std::string SegmentName(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

NodeValues NodeSnapshot::ValuesOf(const cache::CacheStats& s) {
  NodeValues v{};
  auto set = [&v](NodeCounter c, std::uint64_t value) { v[static_cast<std::size_t>(c)] = value; };
  set(NodeCounter::kHits, s.hits);
  set(NodeCounter::kMisses, s.misses);
  set(NodeCounter::kWaits, s.waits);
  set(NodeCounter::kEvictions, s.evictions);
  set(NodeCounter::kRejections, s.rejections);
  set(NodeCounter::kPrefetchDeclined, s.prefetch_declined);
  set(NodeCounter::kRecoveries, s.recoveries);
  set(NodeCounter::kTakeovers, s.takeovers);
  set(NodeCounter::kStallTakeovers, s.stall_takeovers);
  set(NodeCounter::kLeaderTakeovers, s.leader_takeovers);
  set(NodeCounter::kClaimsReleasedLate, s.claims_released_late);
  set(NodeCounter::kCorruptions, s.corruptions);
  set(NodeCounter::kBackingFailures, s.backing_failures);
  set(NodeCounter::kDroppedRows, s.dropped_rows);
  set(NodeCounter::kRowsResident, s.rows_resident);
  set(NodeCounter::kBytesResident, s.bytes_resident);
  set(NodeCounter::kBackedBytes, s.backed_bytes);
  set(NodeCounter::kCapacityBytes, s.capacity_bytes);
  return v;
}

void NodeSnapshot::Write(const cache::NodeCache& cache, Stats& stats) noexcept {
  try {
    stats.SetNode(SegmentName(cache.path()), ValuesOf(cache.Stats()));
  } catch (...) {
    // Out of memory for the name: the next snapshot tries again.
  }
}

void NodeSnapshot::Take(const cache::NodeCache& cache, Stats& stats) noexcept {
  last_ns_.store(SteadyNs(), std::memory_order_relaxed);
  Write(cache, stats);
}

void NodeSnapshot::MaybeTake(const cache::NodeCache& cache, Stats& stats,
                             std::chrono::milliseconds interval) noexcept {
  const std::int64_t now = SteadyNs();
  std::int64_t last = last_ns_.load(std::memory_order_relaxed);
  if (last != 0 && now - last < std::chrono::nanoseconds(interval).count()) return;
  // One thread takes it; the others go on.
  if (!last_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) return;
  Write(cache, stats);
}

}  // namespace prescient::vol
