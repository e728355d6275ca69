// Eviction priority of a resident row as one 64-bit key: the eviction heap
// evicts the largest key first, and a row is admitted only if every row it
// would displace has a larger key. The key space orders, from evicted first:
//
//   kNeverKey            the schedule says the row is never read again
//   kStaleKey            its predicted read passed without it being read here
//   kUnknownBase + ...   no schedule (LRU): older access = larger key
//   0 .. kMaxStep        scheduled: the node step of its next read (Belady)
//
// So without any oracle the cache is exactly LRU, with a full schedule it is
// Belady's furthest-next-use, and mixed callers degrade sensibly: rows known
// to be needed are kept over rows whose future is unknown.
#ifndef PRESCIENT_CACHE_CORE_EVICTION_KEYS_H_
#define PRESCIENT_CACHE_CORE_EVICTION_KEYS_H_

#include <algorithm>
#include <cstdint>

#include "cache/core/next_use_oracle.h"

namespace prescient::cache::detail {

inline constexpr std::uint64_t kNeverKey = UINT64_MAX;
inline constexpr std::uint64_t kStaleKey = UINT64_MAX - 1;
inline constexpr std::uint64_t kUnknownBase = std::uint64_t{1} << 63;

inline std::uint64_t ScheduledKey(std::uint64_t next_use) {
  return next_use > NextUseOracle::kMaxStep ? kNeverKey : next_use;
}

// `tick` grows with every access, so the most recent access has the smallest key.
inline std::uint64_t LruKey(std::uint64_t tick) {
  return kUnknownBase + (NextUseOracle::kMaxStep - std::min(tick, NextUseOracle::kMaxStep));
}

inline bool IsScheduledKey(std::uint64_t key) { return key <= NextUseOracle::kMaxStep; }

}  // namespace prescient::cache::detail

#endif  // PRESCIENT_CACHE_CORE_EVICTION_KEYS_H_
