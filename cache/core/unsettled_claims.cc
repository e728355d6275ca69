// NodeCache's claims it could not let go of in time (node_cache.h,
// UnsettledClaim): kept when the segment lock's holder is stopped, released
// by the process's next call once the lock comes.
#include <algorithm>
#include <new>
#include <vector>

#include "cache/core/claim_state.h"
#include "cache/core/node_cache.h"

namespace prescient::cache {

using detail::kNone;
using detail::SegmentLock;
using detail::SegmentTables;

namespace {

// How long a settlement waits for the lock. A running holder keeps it for
// microseconds; one that is still stopped would cost every call of this
// process the 200 ms it takes to call it stopped, on top of the call's own
// attempt: a short wait, then the next call tries again. Longer than
// detail::kOwnerCheckPeriod, so a holder that died is recovered from.
constexpr std::chrono::milliseconds kSettleLockWait{20};

}  // namespace

void NodeCache::KeepUnsettled(DatasetSlot ds, std::uint16_t slot,
                              std::span<const std::uint64_t> rows,
                              std::span<const std::uint32_t> entries) noexcept {
  const std::int32_t pid = CurrentPid();
  MutexLock hold(&unsettled_mu_);
  try {
    for (std::size_t i = 0; i < rows.size() && unsettled_.size() < kMaxUnsettledClaims; ++i) {
      unsettled_.push_back({pid, ds, slot, entries.empty() ? kNone : entries[i], rows[i]});
    }
  } catch (const std::bad_alloc&) {
    // The rest are left to their waiters' wait_timeout.
  }
  if (!unsettled_.empty()) any_unsettled_.store(true, std::memory_order_relaxed);
}

void NodeCache::SettleClaims() noexcept {
  std::vector<UnsettledClaim> claims;
  {
    MutexLock hold(&unsettled_mu_);
    claims.swap(unsettled_);
    any_unsettled_.store(false, std::memory_order_relaxed);
  }
  // A forked child inherits its parent's list: those claims are the parent's.
  const std::int32_t pid = CurrentPid();
  std::erase_if(claims, [pid](const UnsettledClaim& c) { return c.pid != pid; });
  if (claims.empty()) return;
  std::uint64_t released = 0;
  {
    SegmentLock lock(tables_, kSettleLockWait);
    if (lock.ok()) {
      const std::uint64_t num_entries = tables_.geometry().num_entries;
      for (const UnsettledClaim& c : claims) {
        const std::uint32_t e = c.entry != kNone ? c.entry : tables_.FindClaim(c.ds, c.row, c.slot);
        if (e == kNone || e >= num_entries) continue;
        if (detail::OwnedClaim(tables_.entry(e), c.ds, c.row, c.slot)) {
          tables_.Release(e);  // its waiters wake and load the row themselves
          ++released;
        } else if (detail::RevokedClaim(tables_.entry(e), c.ds, c.row, c.slot)) {
          tables_.DisownRevoked(e);  // taken over meanwhile: only its blocks were left
        }
      }
      SegmentTables::Add(tables_.header().counters.claims_released_late,
                         static_cast<std::int64_t>(released));
      return;
    }
  }
  // Still not to be had: back on the list for the next call.
  MutexLock hold(&unsettled_mu_);
  try {
    const std::size_t room = kMaxUnsettledClaims - std::min(kMaxUnsettledClaims, unsettled_.size());
    unsettled_.insert(unsettled_.end(), claims.begin(),
                      claims.begin() + static_cast<std::ptrdiff_t>(std::min(room, claims.size())));
  } catch (const std::bad_alloc&) {
  }
  if (!unsettled_.empty()) any_unsettled_.store(true, std::memory_order_relaxed);
}

}  // namespace prescient::cache
