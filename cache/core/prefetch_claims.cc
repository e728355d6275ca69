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
using detail::SegmentTables;

namespace {

// Could a row with `key` needing `blocks` be admitted right now? (A snapshot:
// the prefetcher uses it to skip loads that would be thrown away.)
bool WouldAdmit(SegmentTables& t, std::uint32_t blocks, std::uint64_t key) {
  const SegmentHeader& h = t.header();
  if (h.free_blocks >= blocks) return true;
  // Cheap test against the best victim only; MakeRoom decides for real.
  const std::uint32_t top = t.HeapTop();
  return top != kNone && t.entry(top).key > key;
}

}  // namespace

bool NodeCache::Contains(DatasetSlot ds, std::uint64_t row) noexcept {
  if (!ValidSlot(ds) || !EnsureAttached().ok() || !Lock().ok()) return false;
  SegmentTables t = tables();
  const std::uint32_t e = t.Find(ds, row);
  const bool ready = e != kNone && t.entry(e).state == detail::kEntryReady;
  Unlock();
  return ready;
}

Result<std::vector<std::uint64_t>> NodeCache::Claim(DatasetSlot ds,
                                                    std::span<const std::uint64_t> rows,
                                                    const NextUseOracle* oracle) noexcept try {
  auto slot = EnsureAttached();
  if (!slot.ok()) return slot.status();
  if (!ValidSlot(ds)) return Status::InvalidArgument("cache: dataset slot not registered");
  SegmentTables t = tables();
  const std::uint64_t num_rows = t.dataset(ds).num_rows;
  const std::uint32_t blocks = t.dataset(ds).blocks_per_row;
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
  if (Status s = Lock(); !s.ok()) return s;
  for (std::size_t i = 0; i < distinct.size(); ++i) {
    if (t.Find(ds, distinct[i]) != kNone) continue;  // resident or in flight
    if (oracle != nullptr && !WouldAdmit(t, blocks, keys[i])) continue;
    if (t.Claim(ds, distinct[i], slot.value()) == kNone) break;  // descriptors exhausted
    out.push_back(distinct[i]);
  }
  Unlock();
  return out;
} catch (const std::bad_alloc&) {
  return Status::ResourceExhausted("cache: out of memory in Claim");
}

Result<PublishOutcome> NodeCache::Publish(DatasetSlot ds, std::uint64_t row, const std::byte* data,
                                          const NextUseOracle* oracle) noexcept {
  auto slot = EnsureAttached();
  if (!slot.ok()) return slot.status();
  if (!ValidSlot(ds)) return Status::InvalidArgument("cache: dataset slot not registered");
  SegmentTables t = tables();
  SegmentHeader& h = t.header();
  const std::uint64_t scheduled =
      oracle != nullptr ? detail::ScheduledKey(oracle->NextUse(ds, row, NodeStep())) : 0;
  auto owned = [&](std::uint32_t e) {
    return e != kNone && t.entry(e).state == detail::kEntryLoading &&
           t.entry(e).owner == slot.value();
  };
  if (Status s = Lock(); !s.ok()) return s;
  const std::uint32_t e = t.Find(ds, row);
  if (!owned(e)) {
    Unlock();
    return PublishOutcome::kNotClaimed;
  }
  t.SweepStale(NodeStep(), 4);
  const std::uint64_t key = oracle != nullptr ? scheduled : detail::LruKey(++h.lru_tick);
  const std::uint32_t blocks = t.dataset(ds).blocks_per_row;
  if (!t.MakeRoom(blocks, key)) {
    t.Release(e);
    SegmentTables::Add(h.counters.rejections, 1);
    Unlock();
    return PublishOutcome::kNotAdmitted;
  }
  t.entry(e).first_block = t.AllocChain(blocks);
  t.entry(e).key = key;
  Unlock();
  // Still Loading to everyone else, and only we release our claims.
  t.CopyIn(e, data);
  if (Status s = Lock(); !s.ok()) return s;
  const bool still_owned = owned(e) && t.entry(e).row == row && t.entry(e).dataset == ds;
  if (still_owned) t.MarkReady(e, key);
  Unlock();
  return still_owned ? PublishOutcome::kStored : PublishOutcome::kNotClaimed;
}

Status NodeCache::Abandon(DatasetSlot ds, std::uint64_t row) noexcept {
  auto slot = EnsureAttached();
  if (!slot.ok()) return slot.status();
  if (!ValidSlot(ds)) return Status::InvalidArgument("cache: dataset slot not registered");
  if (Status s = Lock(); !s.ok()) return s;
  SegmentTables t = tables();
  const std::uint32_t e = t.Find(ds, row);
  const bool owned =
      e != kNone && t.entry(e).state == detail::kEntryLoading && t.entry(e).owner == slot.value();
  if (owned) t.Release(e);
  Unlock();
  return owned ? Status::Ok()
               : Status::InvalidArgument("cache: Abandon of a row this process did not claim");
}

}  // namespace prescient::cache
