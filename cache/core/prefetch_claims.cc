// NodeCache's prefetcher interface: Contains, Claim, Publish, Abandon.
#include <algorithm>
#include <new>
#include <vector>

#include "cache/core/eviction_keys.h"
#include "cache/core/node_cache.h"

namespace prescient::cache {

using detail::Entry;
using detail::kNone;
using detail::SegmentHeader;
using detail::SegmentLock;
using detail::SegmentTables;

namespace {

// Could a row with `key` needing `blocks` be admitted right now? (A snapshot:
// the prefetcher uses it to skip loads that would be thrown away.)
bool WouldAdmit(SegmentTables& t, std::uint32_t blocks, std::uint64_t key) REQUIRES(t) {
  const SegmentHeader& h = t.header();
  if (h.free_blocks >= blocks) return true;
  // Cheap test against the best victim only; MakeRoom decides for real.
  const std::uint32_t top = t.HeapTop();
  return top != kNone && t.entry(top).key > key;
}

bool OwnedClaim(const Entry& x, DatasetSlot ds, std::uint64_t row, std::uint16_t slot) {
  return x.state == detail::kEntryLoading && x.owner == slot && x.dataset == ds && x.row == row;
}

}  // namespace

bool NodeCache::Contains(DatasetSlot ds, std::uint64_t row) noexcept {
  if (!ValidSlot(ds) || !EnsureAttached().ok()) return false;
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) return false;
  const std::uint32_t e = tables_.Find(ds, row);
  return e != kNone && tables_.entry(e).state == detail::kEntryReady;
}

Result<std::vector<std::uint64_t>> NodeCache::Claim(DatasetSlot ds,
                                                    std::span<const std::uint64_t> rows,
                                                    const NextUseOracle* oracle) noexcept try {
  auto slot = EnsureAttached();
  if (!slot.ok()) return slot.status();
  if (!ValidSlot(ds)) return Status::InvalidArgument("cache: dataset slot not registered");
  const detail::DatasetRecord& record = *tables_.PublishedDataset(ds);
  const std::uint64_t num_rows = record.num_rows;
  const std::uint32_t blocks = record.blocks_per_row;
  std::vector<std::uint64_t> distinct(rows.begin(), rows.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (!distinct.empty() && distinct.back() >= num_rows) {
    return Status::InvalidArgument("cache: row " + std::to_string(distinct.back()) +
                                   " out of range");
  }
  std::vector<std::uint64_t> keys;
  if (oracle != nullptr) {
    const std::uint64_t now = NodeStep();
    for (std::uint64_t r : distinct)
      keys.push_back(detail::ScheduledKey(oracle->NextUse(ds, r, now)));
  }
  std::vector<std::uint64_t> out;
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) return lock.status();
  for (std::size_t i = 0; i < distinct.size(); ++i) {
    if (tables_.Find(ds, distinct[i]) != kNone) continue;  // resident or in flight
    if (oracle != nullptr && !WouldAdmit(tables_, blocks, keys[i])) continue;
    if (tables_.Claim(ds, distinct[i], slot.value()) == kNone) break;  // descriptors exhausted
    out.push_back(distinct[i]);
  }
  return out;
} catch (const std::bad_alloc&) {
  return Status::ResourceExhausted("cache: out of memory in Claim");
}

Result<PublishOutcome> NodeCache::Publish(DatasetSlot ds, std::uint64_t row, const std::byte* data,
                                          const NextUseOracle* oracle) noexcept {
  auto slot = EnsureAttached();
  if (!slot.ok()) return slot.status();
  if (!ValidSlot(ds)) return Status::InvalidArgument("cache: dataset slot not registered");
  const std::uint64_t scheduled =
      oracle != nullptr ? detail::ScheduledKey(oracle->NextUse(ds, row, NodeStep())) : 0;
  const std::uint16_t self = slot.value();
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) return lock.status();
  SegmentHeader& h = tables_.header();
  const std::uint32_t e = tables_.Find(ds, row);
  if (e == kNone || !OwnedClaim(tables_.entry(e), ds, row, self))
    return PublishOutcome::kNotClaimed;
  tables_.SweepStale(NodeStep(), 4);
  const std::uint64_t key = oracle != nullptr ? scheduled : detail::LruKey(++h.lru_tick);
  const std::uint32_t blocks = tables_.dataset(ds).blocks_per_row;
  if (!tables_.MakeRoom(blocks, key)) {
    tables_.Release(e);
    SegmentTables::Add(h.counters.rejections, 1);
    return PublishOutcome::kNotAdmitted;
  }
  tables_.entry(e).first_block = tables_.AllocChain(blocks);
  tables_.entry(e).key = key;
  lock.Unlock();
  // Still Loading to everyone else, and only we release our claims.
  tables_.CopyInOwned(e, data);
  if (Status s = lock.Relock(); !s.ok()) return s;
  if (!OwnedClaim(tables_.entry(e), ds, row, self)) return PublishOutcome::kNotClaimed;
  tables_.MarkReady(e, key);
  return PublishOutcome::kStored;
}

Status NodeCache::Abandon(DatasetSlot ds, std::uint64_t row) noexcept {
  auto slot = EnsureAttached();
  if (!slot.ok()) return slot.status();
  if (!ValidSlot(ds)) return Status::InvalidArgument("cache: dataset slot not registered");
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) return lock.status();
  const std::uint32_t e = tables_.Find(ds, row);
  const bool owned = e != kNone && OwnedClaim(tables_.entry(e), ds, row, slot.value());
  if (owned) tables_.Release(e);
  return owned ? Status::Ok()
               : Status::InvalidArgument("cache: Abandon of a row this process did not claim");
}

}  // namespace prescient::cache
