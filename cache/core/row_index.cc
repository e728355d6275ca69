// The dataset table, the (dataset, row) -> entry index of SegmentTables, and
// the ghosts of misses a full cache declined.
#include <algorithm>
#include <atomic>
#include <string>

#include "cache/core/segment_tables.h"

namespace prescient::cache::detail {
namespace {

std::uint64_t Mix(std::uint64_t x) {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

Result<DatasetSlot> SegmentTables::FindOrAddDataset(const DatasetKey& key, std::uint64_t row_bytes,
                                                    std::uint64_t num_rows) {
  SegmentHeader& h = header();
  const std::uint64_t block = geo_.block_bytes;
  const std::uint64_t blocks_per_row = (row_bytes + block - 1) / block;
  if (row_bytes == 0 || blocks_per_row > geo_.num_blocks) {
    return Status::InvalidArgument("cache: row size " + std::to_string(row_bytes) +
                                   " bytes is zero or larger than the whole cache");
  }
  const std::uint32_t n = geo_.max_datasets;
  // New keys stop at 7/8 of the table (retired records count: they keep
  // their probe chains), so every probe sequence meets an empty record soon
  // and a full table costs a short probe, not a scan of all n records.
  const bool room = std::uint64_t{h.num_datasets} + 1 <= std::uint64_t{n} - n / 8;
  std::uint32_t i = static_cast<std::uint32_t>(Mix(key.hi ^ Mix(key.lo)) % n);
  for (std::uint32_t probe = 0; probe < n; ++probe, i = (i + 1) % n) {
    DatasetRecord& d = dataset(i);
    if (d.state == 0) {
      if (!room) break;
      d.key = key;
      d.row_bytes = row_bytes;
      d.num_rows = num_rows;
      d.blocks_per_row = static_cast<std::uint32_t>(blocks_per_row);
      std::atomic_ref<std::uint32_t>(d.hints).store(0, std::memory_order_relaxed);
      // Last, with release: Repair() and lock-free readers trust only complete records.
      std::atomic_ref<std::uint32_t>(d.state).store(1, std::memory_order_release);
      h.num_datasets++;
      return DatasetSlot{i};
    }
    if (d.state == 1 && d.key == key) {
      if (d.row_bytes != row_bytes || d.num_rows != num_rows) {
        return Status::InvalidArgument(
            "cache: dataset key registered with " + std::to_string(d.row_bytes) + "-byte rows x " +
            std::to_string(d.num_rows) + ", now asked for " + std::to_string(row_bytes) + " x " +
            std::to_string(num_rows) + " (key collision or inconsistent caller)");
      }
      return DatasetSlot{i};
    }
  }
  return Status::ResourceExhausted("cache: dataset table full (" + std::to_string(h.num_datasets) +
                                   " datasets)");
}

namespace {

// A bucket holds entry + 1: zeroed memory is an empty index, and an empty
// bucket reads as kNone.
constexpr std::uint32_t kEmptyBucket = 0;
constexpr std::uint32_t EntryIn(std::uint32_t bucket) { return bucket - 1; }
constexpr std::uint32_t BucketOf(std::uint32_t e) { return e + 1; }
static_assert(EntryIn(kEmptyBucket) == kNone);

}  // namespace

std::uint64_t SegmentTables::Bucket(std::uint32_t ds, std::uint64_t row) const {
  return Mix(row * 0x9e3779b97f4a7c15ull + ds) & (geo_.hash_buckets - 1);
}

// Every probe loop is bounded by the bucket count and every bucket value is
// checked against the entry count: a corrupt index ends a lookup, never
// sends it out of the mapping or into an endless loop.
std::uint32_t SegmentTables::Find(std::uint32_t ds, std::uint64_t row) const {
  const std::uint64_t mask = geo_.hash_buckets - 1;
  std::uint64_t i = Bucket(ds, row);
  for (std::uint64_t probes = 0; probes < geo_.hash_buckets; ++probes, i = (i + 1) & mask) {
    const std::uint32_t e = EntryIn(bucket(i));
    if (e == kNone) return kNone;
    if (e >= geo_.num_entries) break;
    const Entry& x = entry(e);
    if (x.row == row && x.dataset == ds && (x.state == kEntryLoading || x.state == kEntryReady)) {
      return e;
    }
  }
  MarkCorrupt();
  return kNone;
}

void SegmentTables::PrefetchLookups(std::uint32_t ds, std::span<const std::uint64_t> rows,
                                    bool declined) const {
  if (rows.size() < 2) return;
  for (const std::uint64_t row : rows) __builtin_prefetch(&bucket(Bucket(ds, row)));
  if (declined) {
    for (const std::uint64_t row : rows) __builtin_prefetch(&ghost(GhostHash(ds, row)));
  }
  for (const std::uint64_t row : rows) {
    const std::uint32_t e = EntryIn(bucket(Bucket(ds, row)));
    if (e < geo_.num_entries) __builtin_prefetch(&entry(e));
  }
}

std::uint32_t SegmentTables::FindClaim(std::uint32_t ds, std::uint64_t row,
                                       std::uint16_t owner) const {
  const std::uint64_t mask = geo_.hash_buckets - 1;
  std::uint64_t i = Bucket(ds, row);
  for (std::uint64_t probes = 0; probes < geo_.hash_buckets; ++probes, i = (i + 1) & mask) {
    const std::uint32_t e = EntryIn(bucket(i));
    if (e == kNone) return kNone;
    if (e >= geo_.num_entries) break;
    const Entry& x = entry(e);
    if (x.row == row && x.dataset == ds && x.owner == owner &&
        (x.state == kEntryLoading || x.state == kEntryRevoked)) {
      return e;
    }
  }
  MarkCorrupt();
  return kNone;
}

void SegmentTables::IndexInsert(std::uint32_t e) {
  const std::uint64_t mask = geo_.hash_buckets - 1;
  std::uint64_t i = Bucket(entry(e).dataset, entry(e).row);
  // Load factor <= 1/2: a free bucket is near, unless the index is corrupt.
  for (std::uint64_t probes = 0; probes < geo_.hash_buckets; ++probes, i = (i + 1) & mask) {
    if (bucket(i) == kEmptyBucket) {
      bucket(i) = BucketOf(e);
      return;
    }
  }
  MarkCorrupt();
}

void SegmentTables::IndexInsertOrRevoke(std::uint32_t e) {
  Entry& x = entry(e);
  if (x.state == kEntryLoading || x.state == kEntryReady) {
    const std::uint32_t other = Find(x.dataset, x.row);
    if (other != kNone && other != e) {
      // Two live entries for one row: keep the first, take the row from this one.
      if (x.state == kEntryReady) x.owner = kNoOwner;
      x.state = kEntryRevoked;
      x.waiters = 1;
    }
  }
  IndexInsert(e);
}

void SegmentTables::IndexErase(std::uint32_t e) {
  const std::uint64_t mask = geo_.hash_buckets - 1;
  std::uint64_t i = Bucket(entry(e).dataset, entry(e).row);
  std::uint64_t probes = 0;
  for (; bucket(i) != BucketOf(e); i = (i + 1) & mask) {
    if (bucket(i) == kEmptyBucket) return;  // not indexed
    if (++probes >= geo_.hash_buckets) {
      MarkCorrupt();
      return;
    }
  }
  // Backward-shift deletion: pull later members of the probe run into the hole
  // when their home bucket does not lie strictly inside (hole, j].
  std::uint64_t hole = i;
  probes = 0;
  for (std::uint64_t j = (hole + 1) & mask; bucket(j) != kEmptyBucket; j = (j + 1) & mask) {
    const std::uint32_t ej = EntryIn(bucket(j));
    if (ej >= geo_.num_entries || ++probes >= geo_.hash_buckets) {
      MarkCorrupt();
      break;
    }
    const std::uint64_t home = Bucket(entry(ej).dataset, entry(ej).row);
    const bool home_in_range = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (!home_in_range) {
      bucket(hole) = bucket(j);
      hole = j;
    }
  }
  bucket(hole) = kEmptyBucket;
}

std::uint64_t SegmentTables::GhostHash(std::uint32_t ds, std::uint64_t row) {
  return Mix(row * 0x9e3779b97f4a7c15ull + ds + 1);
}

bool SegmentTables::DeclinedBefore(std::uint32_t ds, std::uint64_t row) {
  SegmentHeader& h = header();
  const std::uint64_t hash = GhostHash(ds, row);
  const std::uint64_t tag = (hash >> 32) | 1;  // never 0: 0 is an empty record
  std::uint64_t& slot = ghost(hash);
  const auto tick = static_cast<std::uint32_t>(++h.ghost_tick);
  const std::uint64_t window = std::max<std::uint64_t>(1, Load(h.counters.rows_resident) / 2);
  const std::uint64_t last = slot;
  const bool again = (last >> 32) == tag &&
                     static_cast<std::uint32_t>(tick - static_cast<std::uint32_t>(last)) <= window;
  slot = again ? 0 : (tag << 32 | tick);
  return again;
}

}  // namespace prescient::cache::detail
