// NodeCache::ReadRows: the read path (hit, claim-load-publish, wait).
#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <numeric>
#include <string>
#include <vector>

#include "cache/core/eviction_keys.h"
#include "cache/core/node_cache.h"
#include "cache/core/shm_sync.h"

namespace prescient::cache {

using detail::Entry;
using detail::kNone;
using detail::SegmentHeader;
using detail::SegmentLock;
using detail::SegmentTables;

namespace {

// Rows up to this size are copied while holding the lock (cheaper than a
// pin/unpin round trip); larger rows are pinned and copied without it...
constexpr std::uint64_t kCopyUnderLockBytes = 16 * 1024;
// ...as long as one lock hold copies at most this much (bounds lock hold time).
constexpr std::uint64_t kLockHoldCopyBudget = 256 * 1024;

// One distinct requested row and where it goes.
struct Wanted {
  std::uint64_t row;
  std::uint64_t key;    // scheduled eviction key (only with an oracle)
  std::uint32_t first;  // its positions are order[first, first + count)
  std::uint32_t count;
  bool waited = false;
};

// Runs the loader on this thread, timing it into stats->load_time.
Status CallLoader(const LoaderFn& loader, std::span<const std::uint64_t> rows,
                  std::span<std::byte* const> dest, ReadRowsStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  struct Timer {
    std::chrono::steady_clock::time_point start;
    ReadRowsStats* stats;
    ~Timer() { stats->load_time += std::chrono::steady_clock::now() - start; }
  } timer{start, stats};
  try {
    return loader(rows, dest);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("cache: row loader threw: ") + e.what());
  } catch (...) {
    return Status::Internal("cache: row loader threw");
  }
}

// Per-thread working storage of ReadRows, reused across calls so the hit path
// does not allocate. A nested call (a loader that reads through the cache)
// gets fresh storage.
struct Scratch {
  bool in_use = false;
  std::vector<std::uint32_t> order, pending, waiting, pinned, pinned_entries, claimed,
      claimed_entries, uncached;
  std::vector<Wanted> wanted;
  std::vector<std::uint64_t> claimed_rows, claimed_keys;
  std::vector<std::byte*> claimed_dest;
};

class ScratchLease {
 public:
  ScratchLease() {
    thread_local Scratch cached;
    if (!cached.in_use) {
      scratch_ = &cached;
    } else {
      owned_ = std::make_unique<Scratch>();
      scratch_ = owned_.get();
    }
    scratch_->in_use = true;
  }
  ~ScratchLease() { scratch_->in_use = false; }
  Scratch& operator*() { return *scratch_; }

 private:
  Scratch* scratch_;
  std::unique_ptr<Scratch> owned_;
};

bool OwnedClaim(const Entry& x, DatasetSlot ds, std::uint64_t row, std::uint16_t slot) {
  return x.state == detail::kEntryLoading && x.owner == slot && x.dataset == ds && x.row == row;
}

// Our claim on the row was revoked (dataset dropped, claim taken over).
bool RevokedClaim(const Entry& x, DatasetSlot ds, std::uint64_t row, std::uint16_t slot) {
  return x.state == detail::kEntryRevoked && x.owner == slot && x.dataset == ds && x.row == row;
}

}  // namespace

Status NodeCache::LoadAndPublish(DatasetSlot ds, std::uint16_t slot,
                                 std::span<const std::uint64_t> rows,
                                 std::span<const std::uint32_t> entries,
                                 std::span<std::byte* const> dest, const LoaderFn& loader,
                                 std::span<const std::uint64_t> keys,
                                 ReadRowsStats* stats) noexcept {
  const Status loaded = CallLoader(loader, rows, dest, stats);
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) return lock.status();  // our claims go when we detach or die
  SegmentHeader& h = tables_.header();
  if (!loaded.ok()) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Entry& x = tables_.entry(entries[i]);
      if (OwnedClaim(x, ds, rows[i], slot)) tables_.Release(entries[i]);
      if (RevokedClaim(x, ds, rows[i], slot)) tables_.DisownRevoked(entries[i]);
    }
    return loaded;
  }
  const std::uint64_t row_bytes = tables_.dataset(ds).row_bytes;
  const std::uint32_t blocks = tables_.dataset(ds).blocks_per_row;
  std::uint64_t copied_locked = 0;
  bool any_deferred = false;
  std::vector<unsigned char> deferred(rows.size(), 0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::uint32_t e = entries[i];
    if (RevokedClaim(tables_.entry(e), ds, rows[i], slot)) tables_.DisownRevoked(e);
    if (!OwnedClaim(tables_.entry(e), ds, rows[i], slot)) continue;
    const std::uint64_t key = keys.empty() ? detail::LruKey(++h.lru_tick) : keys[i];
    tables_.entry(e).key = key;
    if (!tables_.MakeRoom(blocks, key)) {
      tables_.Release(e);
      SegmentTables::Add(h.counters.rejections, 1);
      ++stats->not_admitted;
      continue;
    }
    tables_.entry(e).first_block = tables_.AllocChain(blocks);
    if (row_bytes <= kCopyUnderLockBytes && copied_locked < kLockHoldCopyBudget) {
      copied_locked += row_bytes;
      tables_.CopyIn(e, dest[i]);
      tables_.MarkReady(e, key);
    } else {
      any_deferred = true;  // copy outside the lock, still Loading to others
      deferred[i] = 1;
    }
  }
  if (!any_deferred) return Status::Ok();
  lock.Unlock();
  // Our own claims with blocks attached cannot change under us (only we, or
  // a repair after our death, release them): copy without the lock.
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (deferred[i] != 0) tables_.CopyInOwned(entries[i], dest[i]);
  }
  if (Status s = lock.Relock(); !s.ok()) return s;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::uint32_t e = entries[i];
    if (deferred[i] == 0) continue;
    if (OwnedClaim(tables_.entry(e), ds, rows[i], slot)) tables_.MarkReady(e, tables_.entry(e).key);
    if (RevokedClaim(tables_.entry(e), ds, rows[i], slot)) tables_.DisownRevoked(e);
  }
  return Status::Ok();
}

Status NodeCache::ReadRows(DatasetSlot ds, std::span<const std::uint64_t> rows, std::byte* dest,
                           const LoaderFn& loader, const NextUseOracle* oracle,
                           ReadRowsStats* stats_out) noexcept try {
  ReadRowsStats local_stats;
  ReadRowsStats* stats = stats_out != nullptr ? stats_out : &local_stats;
  auto attached = EnsureAttached();
  if (!attached.ok()) return attached.status();
  const std::uint16_t slot = attached.value();
  if (!ValidSlot(ds))
    return Status::InvalidArgument("cache: dataset slot not registered (or dropped)");
  SegmentHeader& h = tables_.raw_header();  // lock-free counters only
  const detail::DatasetRecord& record = *tables_.PublishedDataset(ds);
  const std::uint64_t row_bytes = record.row_bytes;
  const std::uint64_t num_rows = record.num_rows;
  if (rows.empty()) return Status::Ok();
  if (rows.size() >= kNone) return Status::InvalidArgument("cache: too many rows in one read");
  for (std::uint64_t r : rows) {
    if (r >= num_rows) {
      return Status::InvalidArgument("cache: row " + std::to_string(r) + " out of range (" +
                                     std::to_string(num_rows) + " rows)");
    }
  }

  ScratchLease lease;
  Scratch& sc = *lease;
  // Group the positions of each distinct row; distinct rows end up ascending
  // (and a row's positions in selection order).
  std::vector<std::uint32_t>& order = sc.order;
  order.resize(rows.size());
  std::iota(order.begin(), order.end(), 0u);
  if (rows.size() > 1) {
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return rows[a] < rows[b] || (rows[a] == rows[b] && a < b);
    });
  }
  std::vector<Wanted>& wanted = sc.wanted;
  wanted.clear();
  for (std::uint32_t i = 0; i < order.size(); ++i) {
    if (wanted.empty() || wanted.back().row != rows[order[i]]) {
      wanted.push_back({rows[order[i]], 0, i, 0});
    }
    wanted.back().count++;
  }
  const std::uint64_t now = NodeStep();
  if (oracle != nullptr) {
    for (Wanted& w : wanted) w.key = detail::ScheduledKey(oracle->NextUse(ds, w.row, now));
  }
  auto first_dest = [&](const Wanted& w) { return dest + order[w.first] * row_bytes; };
  auto fan_out = [&](const Wanted& w) {  // duplicates of a row in the selection
    for (std::uint32_t k = 1; k < w.count; ++k) {
      std::memcpy(dest + order[w.first + k] * row_bytes, first_dest(w), row_bytes);
    }
  };

  std::vector<std::uint32_t>& pending = sc.pending;
  pending.resize(wanted.size());
  std::iota(pending.begin(), pending.end(), 0u);
  std::vector<std::uint32_t>& waiting = sc.waiting;
  std::vector<std::uint32_t>& pinned = sc.pinned;
  std::vector<std::uint32_t>& pinned_entries = sc.pinned_entries;
  std::vector<std::uint32_t>& claimed = sc.claimed;
  std::vector<std::uint32_t>& claimed_entries = sc.claimed_entries;
  std::vector<std::uint32_t>& uncached = sc.uncached;
  std::vector<std::uint64_t>& claimed_rows = sc.claimed_rows;
  std::vector<std::uint64_t>& claimed_keys = sc.claimed_keys;
  std::vector<std::byte*>& claimed_dest = sc.claimed_dest;
  const auto wait_deadline = std::chrono::steady_clock::now() + options_.wait_timeout;

  while (!pending.empty()) {
    waiting.clear();
    pinned.clear();
    pinned_entries.clear();
    claimed.clear();
    claimed_entries.clear();
    uncached.clear();
    std::uint32_t wait_entry = kNone;
    std::uint32_t wait_seq = 0;
    std::uint16_t wait_owner_slot = 0;
    ProcessIdentity wait_owner;

    SegmentLock lock(tables_, options_.lock_timeout);
    if (!lock.ok()) return lock.status();
    // Amortised stale detection: a full pass over the entries every
    // ~num_entries / 2 rows read on the node.
    tables_.SweepStale(now, 4 + 2 * static_cast<std::uint32_t>(pending.size()));
    std::uint64_t copied_locked = 0;
    for (std::uint32_t u : pending) {
      Wanted& w = wanted[u];
      const std::uint32_t e = tables_.Find(ds, w.row);
      if (e == kNone) {
        const std::uint32_t c = tables_.Claim(ds, w.row, slot);
        if (c == kNone) {
          uncached.push_back(u);
        } else {
          claimed.push_back(u);
          claimed_entries.push_back(c);
          SegmentTables::Add(h.counters.misses, 1);
        }
        continue;
      }
      Entry& x = tables_.entry(e);
      if (x.state == detail::kEntryReady) {
        SegmentTables::Add(w.waited ? h.counters.waits : h.counters.hits, 1);
        ++(w.waited ? stats->waited : stats->hits);
        tables_.SetKey(e, oracle != nullptr ? w.key : detail::LruKey(++tables_.header().lru_tick));
        const bool small = row_bytes <= kCopyUnderLockBytes && copied_locked < kLockHoldCopyBudget;
        if (small || !tables_.Pin(slot, e)) {
          copied_locked += row_bytes;
          tables_.CopyOut(e, first_dest(w));
          fan_out(w);
        } else {
          pinned.push_back(u);
          pinned_entries.push_back(e);
        }
        continue;
      }
      // Loading (by another process, or another thread of ours).
      w.waited = true;
      waiting.push_back(u);
      if (wait_entry == kNone) {
        wait_entry = e;
        wait_seq = std::atomic_ref<std::uint32_t>(x.seq).load(std::memory_order_acquire);
        wait_owner_slot = x.owner;
        wait_owner = tables_.AttachedIdentity(x.owner);
        x.waiters = 1;
      }
    }
    lock.Unlock();

    // Pinned rows cannot be evicted or rewritten: copy them without the lock.
    for (std::size_t i = 0; i < pinned.size(); ++i) {
      tables_.CopyOutPinned(pinned_entries[i], first_dest(wanted[pinned[i]]));
      fan_out(wanted[pinned[i]]);
    }
    if (!pinned.empty()) {
      if (Status s = lock.Relock(); !s.ok()) return s;
      for (std::uint32_t e : pinned_entries) tables_.Unpin(slot, e);
      lock.Unlock();
    }

    if (!claimed.empty()) {
      claimed_rows.clear();
      claimed_keys.clear();
      claimed_dest.clear();
      for (std::uint32_t u : claimed) {
        claimed_rows.push_back(wanted[u].row);
        claimed_dest.push_back(first_dest(wanted[u]));
        if (oracle != nullptr) claimed_keys.push_back(wanted[u].key);
      }
      Status s = LoadAndPublish(ds, slot, claimed_rows, claimed_entries, claimed_dest, loader,
                                claimed_keys, stats);
      if (!s.ok()) return s;
      stats->loaded += claimed.size();
      for (std::uint32_t u : claimed) fan_out(wanted[u]);
    }

    // Past the wait deadline, rows still in flight elsewhere are loaded privately.
    const bool give_up = !waiting.empty() && std::chrono::steady_clock::now() >= wait_deadline;
    if (give_up) uncached.insert(uncached.end(), waiting.begin(), waiting.end());
    if (!uncached.empty()) {
      std::sort(uncached.begin(), uncached.end());  // wanted is row-ordered
      claimed_rows.clear();
      claimed_dest.clear();
      for (std::uint32_t u : uncached) {
        claimed_rows.push_back(wanted[u].row);
        claimed_dest.push_back(first_dest(wanted[u]));
      }
      if (Status s = CallLoader(loader, claimed_rows, claimed_dest, stats); !s.ok()) return s;
      stats->uncached += uncached.size();
      for (std::uint32_t u : uncached) fan_out(wanted[u]);
    }
    if (give_up || waiting.empty()) break;

    // Sleep until the first awaited row changes state, checking its loader's
    // liveness at every poll; then look everything up again.
    const auto t0 = std::chrono::steady_clock::now();
    std::uint32_t* seq = tables_.SeqWord(wait_entry);
    detail::FutexWait(seq, wait_seq, options_.liveness_poll);
    stats->wait_time += std::chrono::steady_clock::now() - t0;
    const bool unchanged =
        std::atomic_ref<std::uint32_t>(*seq).load(std::memory_order_acquire) == wait_seq;
    if (unchanged && !IsAlive(wait_owner)) {
      if (Status s = lock.Relock(); !s.ok()) return s;
      if (tables_.AttachedIdentity(wait_owner_slot) == wait_owner) {
        tables_.ReleaseAttachment(wait_owner_slot, /*died=*/true);
      }
      lock.Unlock();
    }
    pending.swap(waiting);
  }
  return Status::Ok();
} catch (const std::bad_alloc&) {
  return Status::ResourceExhausted("cache: out of memory in ReadRows");
}

}  // namespace prescient::cache
