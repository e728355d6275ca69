// Whose claim an entry is: the two tests every path that publishes, releases
// or abandons a claim makes under the segment lock before touching it.
#ifndef PRESCIENT_CACHE_CORE_CLAIM_STATE_H_
#define PRESCIENT_CACHE_CORE_CLAIM_STATE_H_

#include <cstdint>

#include "cache/core/dataset_key.h"
#include "cache/core/segment_layout.h"

namespace prescient::cache::detail {

// The entry is still our live claim on the row (Loading, owned by `slot`).
inline bool OwnedClaim(const Entry& x, DatasetSlot ds, std::uint64_t row, std::uint16_t slot) {
  return x.state == kEntryLoading && x.owner == slot && x.dataset == ds && x.row == row;
}

// Our claim on the row was revoked (dataset dropped, claim taken over): only
// its blocks are still ours to let go of.
inline bool RevokedClaim(const Entry& x, DatasetSlot ds, std::uint64_t row, std::uint16_t slot) {
  return x.state == kEntryRevoked && x.owner == slot && x.dataset == ds && x.row == row;
}

}  // namespace prescient::cache::detail

#endif  // PRESCIENT_CACHE_CORE_CLAIM_STATE_H_
