// NextUseOracle: the schedule's answer to "when is this row read next on this
// node?", supplied by the caller and evaluated in the calling process (every
// process holds the schedule, so no schedule lives in shared memory).
//
// Time is a node step: a counter the cache keeps in shared memory and callers
// advance with NodeCache::AdvanceNodeStep. It should be the step the slowest
// local rank is reading, minus one: then every read still to come on the node
// lies strictly after `now`, and a row just read by that rank is next needed
// at its following use. (A faster rank's reads in between look "future" until
// the slowest catches up: at worst a row is kept a little longer.) The cache
// asks NextUse(ds, row, now) with now = the node step when a row is inserted
// and whenever it is read, and orders eviction by the answer: kNever first,
// then the furthest. Rows whose predicted step passed without a read are
// treated as stale (evicted right after kNever rows).
#ifndef PRESCIENT_CACHE_CORE_NEXT_USE_ORACLE_H_
#define PRESCIENT_CACHE_CORE_NEXT_USE_ORACLE_H_

#include <cstdint>
#include <limits>

#include "cache/core/dataset_key.h"

namespace prescient::cache {

class NextUseOracle {
 public:
  static constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();
  // Steps at or above this are treated as kNever.
  static constexpr std::uint64_t kMaxStep = (std::uint64_t{1} << 62) - 1;

  virtual ~NextUseOracle() = default;

  // The first node step strictly after `now` at which `row` of `ds` is read by
  // any rank of this node, or kNever. When the cache asks during a read of the
  // row, that read counts as done: an oracle that knows the reading rank's
  // position (vol/ does) should answer with the use after it, so a row just
  // consumed is not kept as if it were about to be needed. Called with the cache's lock NOT held
  // but on the hot path: must be fast, thread-safe and must not throw.
  virtual std::uint64_t NextUse(DatasetSlot ds, std::uint64_t row,
                                std::uint64_t now) const noexcept = 0;
};

}  // namespace prescient::cache

#endif  // PRESCIENT_CACHE_CORE_NEXT_USE_ORACLE_H_
