// NodeCache's prefetcher interface: Contains, ClaimForPrefetch (and Claim, its
// oracle-driven form), Publish, Abandon, UpdateKeys.
#include <algorithm>
#include <new>
#include <vector>

#include "cache/core/claim_state.h"
#include "cache/core/eviction_keys.h"
#include "cache/core/node_cache.h"

namespace prescient::cache {

using detail::Entry;
using detail::kNone;
using detail::OwnedClaim;
using detail::SegmentHeader;
using detail::SegmentLock;
using detail::SegmentTables;

namespace {

constexpr const char* kNotRegistered = "cache: dataset slot not registered (or dropped)";

}  // namespace

bool NodeCache::Contains(DatasetSlot ds, std::uint64_t row) noexcept {
  std::uint8_t resident = 0;
  return Resident(ds, {&row, 1}, {&resident, 1}) == 1;
}

std::size_t NodeCache::Resident(DatasetSlot ds, std::span<const std::uint64_t> rows,
                                std::span<std::uint8_t> resident) noexcept {
  std::fill(resident.begin(), resident.end(), std::uint8_t{0});
  if (rows.size() != resident.size() || !ValidSlot(ds) || !EnsureAttached().ok()) return 0;
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) return 0;
  std::size_t found = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::uint32_t e = tables_.Find(ds, rows[i]);
    if (e != kNone && tables_.entry(e).state == detail::kEntryReady) {
      resident[i] = 1;
      ++found;
    }
  }
  return found;
}

void NodeCache::AddDatasetHint(DatasetSlot ds, DatasetHint hint) noexcept {
  if (!ValidSlot(ds) || !EnsureAttached().ok()) return;
  tables_.AddDatasetHints(ds, static_cast<std::uint32_t>(hint));
}

bool NodeCache::HasDatasetHint(DatasetSlot ds, DatasetHint hint) noexcept {
  if (!ValidSlot(ds) || !EnsureAttached().ok()) return false;
  return (tables_.DatasetHints(ds) & static_cast<std::uint32_t>(hint)) != 0;
}

Result<std::vector<std::uint64_t>> NodeCache::ClaimReserved(DatasetSlot ds,
                                                            std::span<const RowWithKey> rows,
                                                            bool lru) noexcept try {
  auto slot = EnsureAttached();
  if (!slot.ok()) return slot.status();
  DatasetShape shape;
  if (!ShapeOf(ds, &shape)) return Status::InvalidArgument(kNotRegistered);
  for (const RowWithKey& r : rows) {
    if (r.row >= shape.num_rows) {
      return Status::InvalidArgument("cache: row " + std::to_string(r.row) + " out of range (" +
                                     std::to_string(shape.num_rows) + " rows)");
    }
  }
  const std::uint32_t blocks = shape.blocks_per_row;
  std::vector<std::uint64_t> out;
  out.reserve(rows.size());
  tables_.BackAhead(std::uint64_t{blocks} * rows.size());
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) return lock.status();
  SegmentHeader& h = tables_.header();
  for (const RowWithKey& r : rows) {
    if (tables_.Find(ds, r.row) != kNone) continue;  // resident or in flight (also a repeat)
    const std::uint64_t key = lru ? detail::LruKey(++h.lru_tick) : detail::ScheduledKey(r.next_use);
    // Do no harm: blocks come from free space or from rows needed later than
    // this one, evicted now; otherwise the row is not worth prefetching.
    if (!tables_.MakeRoom(blocks, key)) {
      SegmentTables::Add(h.counters.prefetch_declined, 1);
      continue;
    }
    const std::uint32_t e = tables_.Claim(ds, r.row, slot.value());
    if (e == kNone) break;  // descriptors exhausted
    Entry& x = tables_.entry(e);
    x.first_block = tables_.AllocChain(blocks);  // MakeRoom made them free
    x.key = key;
    out.push_back(r.row);
  }
  return out;
} catch (const std::bad_alloc&) {
  return Status::ResourceExhausted("cache: out of memory in ClaimForPrefetch");
}

Result<std::vector<std::uint64_t>> NodeCache::ClaimForPrefetch(
    DatasetSlot ds, std::span<const RowWithKey> rows) noexcept {
  return ClaimReserved(ds, rows, /*lru=*/false);
}

Result<std::vector<std::uint64_t>> NodeCache::Claim(DatasetSlot ds,
                                                    std::span<const std::uint64_t> rows,
                                                    const NextUseOracle* oracle) noexcept try {
  std::vector<std::uint64_t> distinct(rows.begin(), rows.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::vector<RowWithKey> keyed(distinct.size());
  const std::uint64_t now = NodeStep();
  for (std::size_t i = 0; i < distinct.size(); ++i) {
    keyed[i] = {distinct[i],
                oracle != nullptr ? oracle->NextUse(ds, distinct[i], now) : NextUseOracle::kNever};
  }
  return ClaimReserved(ds, keyed, /*lru=*/oracle == nullptr);
} catch (const std::bad_alloc&) {
  return Status::ResourceExhausted("cache: out of memory in Claim");
}

Result<PublishOutcome> NodeCache::Publish(DatasetSlot ds, std::uint64_t row, const std::byte* data,
                                          const NextUseOracle* oracle) noexcept {
  auto slot = EnsureAttached();
  if (!slot.ok()) return slot.status();
  // A retired (dropped) slot still lets an owner let go of its revoked claims.
  DatasetShape shape;
  if (!ShapeOf(ds, &shape, /*or_retired=*/true)) return Status::InvalidArgument(kNotRegistered);
  const std::uint64_t now = NodeStep();
  const std::uint64_t fresh =
      oracle != nullptr ? detail::ScheduledKey(oracle->NextUse(ds, row, now)) : 0;
  const std::uint16_t self = slot.value();
  tables_.BackAhead(shape.blocks_per_row);
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) {
    KeepUnsettled(ds, self, {&row, 1}, {});
    return lock.status();
  }
  SegmentHeader& h = tables_.header();
  const std::uint32_t e = tables_.FindClaim(ds, row, self);
  if (e == kNone) return PublishOutcome::kNotClaimed;
  if (!OwnedClaim(tables_.entry(e), ds, row, self)) {  // revoked: let go of its blocks
    tables_.DisownRevoked(e);
    return PublishOutcome::kNotClaimed;
  }
  tables_.SweepStale(now, 4);
  Entry& x = tables_.entry(e);
  if (oracle != nullptr) x.key = fresh;  // else the key given at claim time
  if (x.first_block == kNone) {
    // A claim that reserved nothing (made by ReadRows): admit now or decline.
    const std::uint64_t key = oracle != nullptr ? fresh : detail::LruKey(++h.lru_tick);
    const std::uint32_t blocks = shape.blocks_per_row;
    if (!tables_.MakeRoom(blocks, key)) {
      tables_.Release(e);
      SegmentTables::Add(h.counters.rejections, 1);
      return PublishOutcome::kNotAdmitted;
    }
    x.first_block = tables_.AllocChain(blocks);
    x.key = key;
  }
  lock.Unlock();
  // Still Loading to everyone else, and only we release our claims.
  const bool copied = tables_.CopyInOwned(e, data, shape.row_bytes);
  if (Status s = lock.Relock(); !s.ok()) {
    KeepUnsettled(ds, self, {&row, 1}, {&e, 1});
    return s;
  }
  if (!OwnedClaim(tables_.entry(e), ds, row, self)) {  // revoked while we copied
    tables_.DisownRevoked(e);
    return PublishOutcome::kNotClaimed;
  }
  if (!copied) {  // a broken chain (corrupt segment): not cached
    tables_.Release(e);
    return PublishOutcome::kNotAdmitted;
  }
  tables_.MarkReady(e, tables_.entry(e).key);
  return PublishOutcome::kStored;
}

Status NodeCache::Abandon(DatasetSlot ds, std::uint64_t row) noexcept {
  auto slot = EnsureAttached();
  if (!slot.ok()) return slot.status();
  // A retired (dropped) slot still lets an owner let go of its revoked claims.
  DatasetShape shape;
  if (!ShapeOf(ds, &shape, /*or_retired=*/true)) return Status::InvalidArgument(kNotRegistered);
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) {
    KeepUnsettled(ds, slot.value(), {&row, 1}, {});
    return lock.status();
  }
  const std::uint32_t e = tables_.FindClaim(ds, row, slot.value());
  if (e == kNone) {
    return Status::InvalidArgument("cache: Abandon of a row this process did not claim");
  }
  if (OwnedClaim(tables_.entry(e), ds, row, slot.value())) {
    tables_.Release(e);
  } else {
    tables_.DisownRevoked(e);  // revoked meanwhile: nothing to abandon but its blocks
  }
  return Status::Ok();
}

Status NodeCache::DropDataset(DatasetSlot ds) noexcept {
  if (auto slot = EnsureAttached(); !slot.ok()) return slot.status();
  if (!ValidSlot(ds)) return Status::InvalidArgument(kNotRegistered);
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) return lock.status();
  if (tables_.dataset(ds).state == 1) tables_.DropDataset(ds);
  return Status::Ok();
}

Status NodeCache::UpdateKeys(DatasetSlot ds, std::span<const RowWithKey> rows) noexcept {
  if (auto slot = EnsureAttached(); !slot.ok()) return slot.status();
  if (!ValidSlot(ds)) return Status::InvalidArgument(kNotRegistered);
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) return lock.status();
  for (const RowWithKey& r : rows) {
    const std::uint32_t e = tables_.Find(ds, r.row);
    if (e == kNone) continue;
    const std::uint64_t key = detail::ScheduledKey(r.next_use);
    if (tables_.entry(e).state == detail::kEntryReady) {
      tables_.SetKey(e, key);
    } else {
      tables_.entry(e).key = key;  // in flight: the key it gets when published
    }
  }
  return Status::Ok();
}

}  // namespace prescient::cache
