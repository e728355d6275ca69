// NodeCache::ReadRows: the read path, in phases.
//
//   Prepare      group the requested rows (repeats, any order) and compute
//                their keys from the oracle, without the lock
//   LookUp       one lock round: hits are copied (small rows) or pinned,
//                missing rows claimed, rows in flight elsewhere noted
//   CopyPinned   pinned hits copied without the lock; each pin is then marked
//                done and dropped lazily by a later lock holder, so a hit
//                never takes the lock twice
//   LoadClaimed  our claims go to the loader in one call, then are published
//   Wait         sleep until a row in flight elsewhere changes, then LookUp
//                again for those rows; once waited about twice as long as
//                this process's own loads take, LookUp hands the rows still
//                in flight to LoadUncached instead (not for claims awaited in
//                full: the node agent's)
//
// A one-row hit (h5py's dset[i]) takes ReadOneHit: one lock round, no
// allocation, one counter update.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "cache/core/claim_state.h"
#include "cache/core/eviction_keys.h"
#include "cache/core/node_cache.h"
#include "cache/core/shm_sync.h"
#include "cache/core/stall_watch.h"

namespace prescient::cache {

using detail::Entry;
using detail::kNone;
using detail::OwnedClaim;
using detail::RevokedClaim;
using detail::SegmentHeader;
using detail::SegmentLock;
using detail::SegmentTables;

namespace {

// Rows up to this size are copied while holding the lock (cheaper than
// pinning); larger rows are pinned and copied without it...
constexpr std::uint64_t kCopyUnderLockBytes = 16 * 1024;
// ...as long as one lock hold copies at most this much (bounds lock hold time).
constexpr std::uint64_t kLockHoldCopyBudget = 256 * 1024;
// A loaded row is copied in under the lock only up to a page: blocks fresh
// from the backing take a page fault (allocation and zeroing) at their first
// write, which must not stall every other process of the node waiting for
// the lock. Larger rows are copied outside it, still Loading to others.
constexpr std::uint64_t kCopyInUnderLockBytes = 4 * 1024;
// Without a next-use order (LRU), a miss that would have to evict is kept
// only one time in this many. A training epoch reads every sample once in a
// new order, so a row just read is not needed sooner than the one it would
// push out: evicting for it buys no hits and costs the copy into the segment,
// and with a cyclic order (no shuffle) LRU would evict every row just before
// its next use. Admitting some keeps the cache following a changed working set,
// and a row declined again soon after (another reader close behind, within
// half a cache's worth of declined misses: SegmentTables::DeclinedBefore) is
// admitted at its second miss, so readers that trail each other still share.
// The choice is made once per read, for all its rows: a sample stored as many
// rows (a dataset of its own, 64 entries for 256 KiB) is kept whole or not at
// all. Chosen row by row, every sample kept an eighth of its rows, and the
// rest became scattered misses, each read from storage with its own read and
// its own 64 KiB around it (RESULTS.md, "A read is kept whole or not at all").
constexpr std::uint64_t kAdmitWhenFullEvery = 8;
// A reader waits for a row another process loads for at most its patience:
// CacheOptions::wait_patience_loads times its own loads' average. Waiting in
// full, a reader that caught up with the prefetcher waited 1.7-2.3 ms a row
// for rows it reads in about 0.1 ms (RESULTS.md, "Readers that stop
// waiting"). The patience is at least this long: a load under way elsewhere
// is nearly done, and one futex sleep and wake-up costs tens of microseconds.
constexpr std::chrono::nanoseconds kMinPatience = std::chrono::microseconds(100);
// The newest own load weighs 1/8 in the running average.
constexpr int kOwnLoadWeightShift = 3;
// Stale-prediction sweep per lock round: a full pass over the entries every
// ~num_entries / 2 rows read on the node (eviction_heap.cc).
constexpr std::uint32_t kSweepBase = 4;
constexpr std::uint32_t kSweepPerRow = 2;

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

// One distinct requested row and where it goes.
struct Wanted {
  std::uint64_t row;
  std::uint64_t key;    // scheduled eviction key (only with an oracle)
  std::uint32_t first;  // its positions are order[first, first + count)
  std::uint32_t count;
  std::uint64_t copy_bytes;  // what a hit copies: the row, or its positions' parts
  bool waited = false;
};

// Per-thread working storage of ReadRows, reused across calls so a batch hit
// does not allocate. A nested call (a loader that reads through the cache)
// gets fresh storage.
struct Scratch {
  bool in_use = false;
  std::vector<std::uint32_t> order, pending, waiting, claimed, claimed_entries, uncached;
  std::vector<Wanted> wanted;
  std::vector<std::uint64_t> lookup_rows;  // the pending rows, for PrefetchLookups
  struct Pinned {
    std::uint32_t wanted;
    std::uint32_t entry;
    int pin;
  };
  std::vector<Pinned> pinned;
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
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  Scratch& operator*() { return *scratch_; }

 private:
  Scratch* scratch_;
  std::unique_ptr<Scratch> owned_;
};

}  // namespace

// One ReadRows call with more than a one-row hit to do.
class NodeCache::ReadCall {
 public:
  ReadCall(NodeCache& cache, DatasetSlot ds, std::uint16_t slot,
           std::span<const std::uint64_t> rows, std::byte* dest, std::uint64_t row_bytes,
           RowParts parts, const LoaderFn& loader, const NextUseOracle* oracle,
           ReadRowsStats* stats, Scratch& scratch)
      : c_(cache),
        t_(cache.tables_),
        ds_(ds),
        slot_(slot),
        rows_(rows),
        dest_(dest),
        row_bytes_(row_bytes),
        parts_(parts),
        loader_(loader),
        oracle_(oracle),
        stats_(stats),
        sc_(scratch) {}

  Status Run() EXCLUDES(t_) {
    Prepare();
    wait_deadline_ = std::chrono::steady_clock::now() + c_.options_.wait_timeout;
    while (!sc_.pending.empty()) {
      Awaited awaited;
      PRESCIENT_RETURN_IF_ERROR(LookUp(&awaited));
      CopyPinned();
      PRESCIENT_RETURN_IF_ERROR(TimedOwnLoad([this] { return LoadClaimed(); }));
      PRESCIENT_RETURN_IF_ERROR(TimedOwnLoad([this] { return LoadUncached(); }));
      if (sc_.waiting.empty()) break;
      PRESCIENT_RETURN_IF_ERROR(Wait(awaited));
      sc_.pending.swap(sc_.waiting);
    }
    return Status::Ok();
  }

 private:
  // The first row in flight elsewhere that LookUp found: Wait sleeps on it.
  struct Awaited {
    std::uint32_t entry = kNone;
    std::uint32_t seq = 0;
    std::uint16_t owner_slot = 0;
    bool in_full = false;  // its owner's claims are awaited until published
    ProcessIdentity owner;
  };

  // Runs one of the load phases; a loader call that succeeded tells the
  // process how long its own loads take (the measure of its patience).
  template <typename Phase>
  Status TimedOwnLoad(Phase phase) {
    const std::chrono::nanoseconds before = stats_->load_time;
    const Status status = phase();
    if (status.ok() && stats_->load_time != before) c_.NoteOwnLoad(stats_->load_time - before);
    return status;
  }

  std::byte* FirstDest(const Wanted& w) const {
    return dest_ + std::uint64_t{sc_.order[w.first]} * row_bytes_;
  }
  // Duplicates of a row in the selection (the parts they need).
  void FanOut(const Wanted& w) const {
    for (std::uint32_t k = 1; k < w.count; ++k) {
      const std::uint32_t at = sc_.order[w.first + k];
      std::byte* const to = dest_ + std::uint64_t{at} * row_bytes_;
      if (parts_.empty()) {
        std::memcpy(to, FirstDest(w), row_bytes_);
        continue;
      }
      for (const RowPart& part : parts_.of(at)) {
        std::memcpy(to + part.offset, FirstDest(w) + part.offset, part.bytes);
      }
    }
  }
  // What a resident row's positions need, copied to its first position:
  // under the lock (LookUp), or of a row this process pinned (CopyPinned).
  bool CopyHit(std::uint32_t e, const Wanted& w) const {
    if (parts_.empty()) return t_.CopyOutPinned(e, FirstDest(w), 0, row_bytes_);
    for (std::uint32_t k = 0; k < w.count; ++k) {
      if (!t_.CopyOutPinnedParts(e, FirstDest(w), parts_.of(sc_.order[w.first + k]))) return false;
    }
    return true;
  }

  // Groups the positions of each distinct row; distinct rows end up ascending
  // (and a row's positions in selection order). Keys from the oracle.
  void Prepare() {
    std::vector<std::uint32_t>& order = sc_.order;
    order.resize(rows_.size());
    std::iota(order.begin(), order.end(), 0u);
    if (rows_.size() > 1) {
      std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
        return rows_[a] < rows_[b] || (rows_[a] == rows_[b] && a < b);
      });
    }
    sc_.wanted.clear();
    for (std::uint32_t i = 0; i < order.size(); ++i) {
      if (sc_.wanted.empty() || sc_.wanted.back().row != rows_[order[i]]) {
        sc_.wanted.push_back(
            {.row = rows_[order[i]], .key = 0, .first = i, .count = 0, .copy_bytes = 0});
      }
      Wanted& w = sc_.wanted.back();
      w.count++;
      if (parts_.empty()) {
        w.copy_bytes = row_bytes_;
      } else {
        for (const RowPart& part : parts_.of(order[i])) w.copy_bytes += part.bytes;
      }
    }
    now_ = c_.NodeStep();
    if (oracle_ != nullptr) {
      for (Wanted& w : sc_.wanted) w.key = detail::ScheduledKey(oracle_->NextUse(ds_, w.row, now_));
    }
    sc_.pending.resize(sc_.wanted.size());
    std::iota(sc_.pending.begin(), sc_.pending.end(), 0u);
  }

  // Whether a row of this dataset can only be stored by evicting another.
  bool MustEvict(const SegmentHeader& h) const REQUIRES(t_) {
    const detail::LayoutPlan& geo = t_.geometry();
    const std::uint64_t blocks = (row_bytes_ + geo.block_bytes - 1) / geo.block_bytes;
    const std::uint64_t unbacked = geo.num_blocks - std::min(h.backed_blocks, geo.num_blocks);
    return h.free_blocks + unbacked < blocks;
  }

  // One lock round over the pending rows.
  Status LookUp(Awaited* awaited) EXCLUDES(t_) {
    sc_.waiting.clear();
    sc_.pinned.clear();
    sc_.claimed.clear();
    sc_.claimed_entries.clear();
    sc_.uncached.clear();
    std::uint64_t hits = 0, waits = 0, misses = 0;
    SegmentLock lock(t_, c_.options_.lock_timeout);
    if (!lock.ok()) return lock.status();
    SegmentHeader& h = t_.header();
    t_.SweepStale(now_, kSweepBase + kSweepPerRow * static_cast<std::uint32_t>(sc_.pending.size()));
    if (sc_.pending.size() > 1) {
      sc_.lookup_rows.clear();
      for (std::uint32_t u : sc_.pending) sc_.lookup_rows.push_back(sc_.wanted[u].row);
      t_.PrefetchLookups(ds_, sc_.lookup_rows, oracle_ == nullptr && MustEvict(h));
    }
    std::uint64_t copied_locked = 0;
    for (std::uint32_t u : sc_.pending) {
      Wanted& w = sc_.wanted[u];
      const std::uint32_t e = t_.Find(ds_, w.row);
      if (e == kNone) {
        if (MustEvict(h) && DeclinesWhenFull(w, h)) {
          sc_.uncached.push_back(u);  // loaded for this read only
          ++declined_;
          continue;
        }
        const std::uint32_t c = t_.Claim(ds_, w.row, slot_);
        if (c == kNone) {
          sc_.uncached.push_back(u);  // no free descriptor
        } else {
          sc_.claimed.push_back(u);
          sc_.claimed_entries.push_back(c);
          ++misses;
        }
        continue;
      }
      Entry& x = t_.entry(e);
      if (x.state == detail::kEntryReady) {
        ++(w.waited ? waits : hits);
        t_.SetKey(e, oracle_ != nullptr ? w.key : detail::LruKey(++h.lru_tick));
        const std::uint64_t bytes = w.copy_bytes;
        const bool small = bytes <= kCopyUnderLockBytes && copied_locked < kLockHoldCopyBudget;
        const int pin = small ? -1 : t_.Pin(slot_, e);
        if (pin < 0) {
          copied_locked += bytes;
          if (CopyHit(e, w)) {
            FanOut(w);
          } else {
            sc_.uncached.push_back(u);  // a broken chain: load the row privately
          }
        } else {
          sc_.pinned.push_back({u, e, pin});
        }
        continue;
      }
      // Loading (by another process, or another thread of ours).
      const bool in_full = t_.AwaitedInFull(x.owner);
      if (impatient_ && !in_full) {
        sc_.uncached.push_back(u);  // waited long enough: loaded here, published by its owner
        ++not_awaited_;
        continue;
      }
      w.waited = true;
      sc_.waiting.push_back(u);
      if (awaited->entry == kNone) {
        awaited->entry = e;
        awaited->seq = std::atomic_ref<std::uint32_t>(x.seq).load(std::memory_order_acquire);
        awaited->owner_slot = x.owner;
        awaited->in_full = in_full;
        awaited->owner = t_.AttachedIdentity(x.owner);
        x.waiters = 1;
      }
    }
    // One update per counter per round: they share a cache line node-wide.
    if (hits != 0) SegmentTables::Add(h.counters.hits, static_cast<std::int64_t>(hits));
    if (waits != 0) SegmentTables::Add(h.counters.waits, static_cast<std::int64_t>(waits));
    if (misses != 0) SegmentTables::Add(h.counters.misses, static_cast<std::int64_t>(misses));
    stats_->hits += hits;
    stats_->waited += waits;
    return Status::Ok();
  }

  // Whether a miss that can only be stored by evicting is loaded for this
  // read only. Without a next-use order: unless the row was declined shortly
  // before or this read is one that keeps such misses. With one: when no
  // resident row is needed later than it (Belady's no-admit rule, which its
  // publication would apply after it was copied into the segment: at a cache
  // a quarter of an epoch, three of four misses were copied in and declined,
  // a copy in and the fresh pages it touched for nothing).
  bool DeclinesWhenFull(const Wanted& w, SegmentHeader& h) REQUIRES(t_) {
    if (oracle_ == nullptr) return !t_.DeclinedBefore(ds_, w.row) && !AdmittedWhenFull();
    const std::uint32_t top = t_.HeapTop();
    if (top != kNone && t_.entry(top).heap_key > w.key) return false;
    SegmentTables::Add(h.counters.rejections, 1);
    return true;
  }

  // Whether this read keeps its misses that must evict (no next-use order):
  // one read in kAdmitWhenFullEvery, decided at its first such miss.
  bool AdmittedWhenFull() {
    if (!admitted_when_full_) {
      admitted_when_full_ =
          c_.full_cache_misses_.fetch_add(1, std::memory_order_relaxed) % kAdmitWhenFullEvery == 0;
    }
    return *admitted_when_full_;
  }

  // Pinned rows cannot be evicted or rewritten: copy them without the lock.
  void CopyPinned() {
    for (const Scratch::Pinned& p : sc_.pinned) {
      const Wanted& w = sc_.wanted[p.wanted];
      const bool copied = CopyHit(p.entry, w);
      t_.PinDone(slot_, p.pin);
      if (copied) {
        FanOut(w);
      } else {
        sc_.uncached.push_back(p.wanted);  // a broken chain: load the row privately
      }
    }
  }

  Status LoadClaimed() EXCLUDES(t_) {
    if (sc_.claimed.empty()) return Status::Ok();
    sc_.claimed_rows.clear();
    sc_.claimed_keys.clear();
    sc_.claimed_dest.clear();
    for (std::uint32_t u : sc_.claimed) {
      sc_.claimed_rows.push_back(sc_.wanted[u].row);
      sc_.claimed_dest.push_back(FirstDest(sc_.wanted[u]));
      if (oracle_ != nullptr) sc_.claimed_keys.push_back(sc_.wanted[u].key);
    }
    PRESCIENT_RETURN_IF_ERROR(c_.LoadAndPublish(ds_, slot_, sc_.claimed_rows, sc_.claimed_entries,
                                                sc_.claimed_dest, loader_, sc_.claimed_keys,
                                                stats_));
    stats_->loaded += sc_.claimed.size();
    for (std::uint32_t u : sc_.claimed) FanOut(sc_.wanted[u]);
    return Status::Ok();
  }

  // Rows delivered without caching them (no free descriptor, not admitted,
  // a broken chain, or still loading elsewhere when our patience ran out).
  Status LoadUncached() {
    if (sc_.uncached.empty()) return Status::Ok();
    std::sort(sc_.uncached.begin(), sc_.uncached.end());  // wanted is row-ordered
    sc_.claimed_rows.clear();
    sc_.claimed_dest.clear();
    for (std::uint32_t u : sc_.uncached) {
      sc_.claimed_rows.push_back(sc_.wanted[u].row);
      sc_.claimed_dest.push_back(FirstDest(sc_.wanted[u]));
    }
    PRESCIENT_RETURN_IF_ERROR(CallLoader(loader_, sc_.claimed_rows, sc_.claimed_dest, stats_));
    stats_->uncached += sc_.uncached.size();
    stats_->not_admitted += declined_;
    stats_->not_awaited += not_awaited_;
    declined_ = 0;
    not_awaited_ = 0;
    for (std::uint32_t u : sc_.uncached) FanOut(sc_.wanted[u]);
    return Status::Ok();
  }

  // Sleeps until the awaited row changes state (at most liveness_poll, or
  // what is left of our patience). If it did not: a dead loader's claims are
  // released; once our patience ran out, the next LookUp hands the rows still
  // loading to LoadUncached (unless awaited in full); a live loader that made
  // no progress for stall_timeout (stopped, hung) has the rows we wait for
  // taken from it, and so has any loader once we waited wait_timeout. The
  // next LookUp then claims and loads those rows here.
  Status Wait(const Awaited& awaited) EXCLUDES(t_) {
    // The row may be one of our own claims a publication could not let go
    // of, still kept because our call's settlement found the lock busy: let
    // go of them first, or we would wait for ourselves until wait_timeout.
    if (c_.any_unsettled_.load(std::memory_order_relaxed)) c_.SettleClaims();
    const auto t0 = std::chrono::steady_clock::now();
    std::chrono::nanoseconds sleep = c_.options_.liveness_poll;
    const bool patient = !awaited.in_full && !impatient_;
    if (patient && !patience_end_) {
      const std::chrono::nanoseconds patience = c_.WaitPatience();
      if (patience.count() > 0) patience_end_ = t0 + patience;
    }
    if (patient && patience_end_) {
      sleep = std::clamp<std::chrono::nanoseconds>(*patience_end_ - t0, {}, sleep);
    }
    std::uint32_t* seq = t_.SeqWord(awaited.entry);
    detail::FutexWait(seq, awaited.seq, sleep);
    const auto now = std::chrono::steady_clock::now();
    stats_->wait_time += now - t0;
    const bool unchanged =
        std::atomic_ref<std::uint32_t>(*seq).load(std::memory_order_acquire) == awaited.seq;
    if (now >= wait_deadline_) return TakeOver(/*any_owner=*/true, awaited);
    if (!unchanged) return Status::Ok();
    const ProcessStatus status = StatusOf(awaited.owner);
    if (!status.alive) {
      SegmentLock lock(t_, c_.options_.lock_timeout);
      if (!lock.ok()) return lock.status();
      if (t_.AttachedIdentity(awaited.owner_slot) == awaited.owner) {
        t_.ReleaseAttachment(awaited.owner_slot, /*died=*/true);
      }
      return Status::Ok();
    }
    if (patient && patience_end_ && now >= *patience_end_) {
      impatient_ = true;
      return Status::Ok();
    }
    const std::uint64_t beat = t_.Heartbeat(awaited.owner_slot);
    const std::uint64_t pid_beat =
        (static_cast<std::uint64_t>(static_cast<std::uint32_t>(awaited.owner.pid)) << 32) |
        (beat & 0xffffffffu);
    // The node's memo of the last stuck loader (SegmentHeader::stuck_pid_beat).
    SegmentHeader& h = t_.raw_header();  // lock-free fields
    std::atomic_ref<std::uint64_t> stuck_pid_beat(h.stuck_pid_beat);
    std::atomic_ref<std::uint64_t> stuck_cpu(h.stuck_cpu);
    if (stuck_pid_beat.load(std::memory_order_relaxed) == pid_beat &&
        stuck_cpu.load(std::memory_order_relaxed) == status.cpu_ticks) {
      return TakeOver(/*any_owner=*/false, awaited);  // found stuck before, no progress since
    }
    const auto quiet = watch_.Observe(awaited.owner, beat, status, now);
    if (quiet >= c_.options_.stall_timeout) {
      stuck_cpu.store(status.cpu_ticks, std::memory_order_relaxed);
      stuck_pid_beat.store(pid_beat, std::memory_order_relaxed);
      return TakeOver(/*any_owner=*/false, awaited);
    }
    return Status::Ok();
  }

  // Revokes the claims on the rows we wait for: all of them (`any_owner`),
  // or those of the awaited loader. Their owners keep any blocks they may be
  // writing until they come back (kEntryRevoked); we claim the rows anew.
  Status TakeOver(bool any_owner, const Awaited& awaited) EXCLUDES(t_) {
    std::uint64_t taken = 0;
    {
      SegmentLock lock(t_, c_.options_.lock_timeout);
      if (!lock.ok()) return lock.status();
      for (std::uint32_t u : sc_.waiting) {
        const std::uint32_t e = t_.Find(ds_, sc_.wanted[u].row);
        if (e == kNone || t_.entry(e).state != detail::kEntryLoading) continue;
        if (!any_owner && (t_.entry(e).owner != awaited.owner_slot ||
                           !(t_.AttachedIdentity(awaited.owner_slot) == awaited.owner))) {
          continue;
        }
        t_.Revoke(e);
        ++taken;
      }
      SegmentTables::Add(t_.header().counters.stall_takeovers, static_cast<std::int64_t>(taken));
    }
    stats_->taken_over += taken;
    // A fresh start for whoever loads them now.
    wait_deadline_ = std::chrono::steady_clock::now() + c_.options_.wait_timeout;
    return Status::Ok();
  }

  NodeCache& c_;
  detail::SegmentTables& t_;
  const DatasetSlot ds_;
  const std::uint16_t slot_;
  const std::span<const std::uint64_t> rows_;
  std::byte* const dest_;
  const std::uint64_t row_bytes_;
  const RowParts parts_;  // empty: whole rows
  const LoaderFn& loader_;
  const NextUseOracle* const oracle_;
  ReadRowsStats* const stats_;
  Scratch& sc_;
  std::uint64_t now_ = 0;
  std::uint64_t declined_ = 0;     // uncached rows the full cache did not admit
  std::uint64_t not_awaited_ = 0;  // uncached rows still loading elsewhere
  std::chrono::steady_clock::time_point wait_deadline_;
  // Set at the first wait for a claim not awaited in full, if this process
  // has a measure of its own loads; impatient_ once it has passed.
  std::optional<std::chrono::steady_clock::time_point> patience_end_;
  bool impatient_ = false;
  std::optional<bool> admitted_when_full_;  // AdmittedWhenFull's choice for this read
  detail::StallWatch watch_;                // the progress of the loader we wait for
};

Status NodeCache::LoadAndPublish(DatasetSlot ds, std::uint16_t slot,
                                 std::span<const std::uint64_t> rows,
                                 std::span<const std::uint32_t> entries,
                                 std::span<std::byte* const> dest, const LoaderFn& loader,
                                 std::span<const std::uint64_t> keys,
                                 ReadRowsStats* stats) noexcept {
  const Status loaded = CallLoader(loader, rows, dest, stats);
  if (!loaded.ok()) {
    const Status released = ReleaseClaims(ds, slot, rows, entries);
    return released.ok() ? loaded : released;
  }
  // What keeping the rows costs this thread, on every path out.
  struct AdmitTimer {
    ReadRowsStats* stats;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    ~AdmitTimer() { stats->admit_time += std::chrono::steady_clock::now() - start; }
  } admit_timer{stats};
  DatasetShape shape;
  if (ShapeOf(ds, &shape, /*or_retired=*/true)) {
    if (LeftUnkept(ds, rows, shape.row_bytes)) {
      const Status released = ReleaseClaims(ds, slot, rows, entries);
      if (released.ok()) stats->not_kept += rows.size();
      return released;
    }
    bool read_again = false;
    if (AdmitBehind(ds, slot, rows, entries, dest, keys, shape.row_bytes, &read_again)) {
      stats->admitted_behind += rows.size();
      if (read_again) stats->admitted_read_again += rows.size();
      return Status::Ok();
    }
    tables_.BackAhead(std::uint64_t{shape.blocks_per_row} * rows.size());
  }
  std::vector<const std::byte*> sources(dest.begin(), dest.end());
  PublishedRows published;
  const Status status = PublishClaims(ds, slot, rows, entries, sources, keys, &published);
  stats->not_admitted += published.not_admitted;
  return status;
}

bool NodeCache::LeftUnkept(DatasetSlot ds, std::span<const std::uint64_t> rows,
                           std::uint64_t row_bytes) noexcept {
  AdmissionQueue* queue = admission_queue_.load();
  if (queue == nullptr || rows.empty()) return false;
  // Runs of consecutive rows (rows ascend): a batch of scattered rows is many
  // short runs, whose hits save a read each; a sample read whole is one.
  std::uint64_t runs = 1;
  for (std::size_t i = 1; i < rows.size(); ++i) runs += rows[i] != rows[i - 1] + 1 ? 1 : 0;
  return queue->LeavesUnkept(ds, row_bytes * rows.size() / runs);
}

bool NodeCache::AdmitBehind(DatasetSlot ds, std::uint16_t slot, std::span<const std::uint64_t> rows,
                            std::span<const std::uint32_t> entries,
                            std::span<std::byte* const> dest, std::span<const std::uint64_t> keys,
                            std::uint64_t row_bytes, bool* read_again) noexcept {
  // Rows small enough to copy in under the lock are placed by the reader: a
  // read of the next row of the same entry (h5py's dset[i] over labels)
  // would otherwise wait for the thread, a wake-up per entry instead of a hit.
  if (rows.empty() || row_bytes <= kCopyInUnderLockBytes) return false;
  AdmissionQueue* queue = admission_queue_.load();
  const std::uint64_t bytes = row_bytes * rows.size();
  if (queue == nullptr) return false;
  const std::span<std::byte> buffer = queue->Reserve(ds, bytes);
  if (buffer.size() != bytes) return false;
  LoadedRows loaded;
  try {
    loaded.ds = ds;
    loaded.slot = slot;
    loaded.rows.assign(rows.begin(), rows.end());
    loaded.entries.assign(entries.begin(), entries.end());
    loaded.keys.assign(keys.begin(), keys.end());
  } catch (const std::bad_alloc&) {
    queue->Unreserve(buffer);
    return false;
  }
  // The caller's bytes are copied only when the queue cannot read the rows
  // again itself: that copy was the reader's largest cost left on a miss.
  loaded.read_again = queue->ReadsRowsAgain(ds, bytes);
  if (!loaded.read_again) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::memcpy(buffer.data() + i * row_bytes, dest[i], row_bytes);
    }
  }
  loaded.bytes = buffer;
  *read_again = loaded.read_again;
  return queue->Submit(std::move(loaded));
}

Status NodeCache::ReleaseClaims(DatasetSlot ds, std::uint16_t slot,
                                std::span<const std::uint64_t> rows,
                                std::span<const std::uint32_t> entries) noexcept {
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) {
    KeepUnsettled(ds, slot, rows, entries);
    return lock.status();
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Entry& x = tables_.entry(entries[i]);
    if (OwnedClaim(x, ds, rows[i], slot)) tables_.Release(entries[i]);
    if (RevokedClaim(x, ds, rows[i], slot)) tables_.DisownRevoked(entries[i]);
  }
  return Status::Ok();
}

PublishedRows NodeCache::PublishLoaded(LoadedRows&& loaded) noexcept {
  PublishedRows published;
  DatasetShape shape;
  const std::size_t n = loaded.rows.size();
  // Rows the queue was to read again and did not (a failed read) are not
  // publishable either: their claims go like those of any failed load.
  const bool usable = !loaded.read_again && ShapeOf(loaded.ds, &shape, /*or_retired=*/true) &&
                      loaded.entries.size() == n &&
                      (loaded.keys.empty() || loaded.keys.size() == n) &&
                      loaded.bytes.size() == n * shape.row_bytes;
  if (!usable) {
    // Not publishable (the dataset forgotten, or a malformed set): let the
    // claims go, so the rows' readers load them.
    const std::size_t paired = std::min(n, loaded.entries.size());
    (void)ReleaseClaims(loaded.ds, loaded.slot, std::span(loaded.rows).first(paired),
                        std::span(loaded.entries).first(paired));
    published.not_admitted = n;
    return published;
  }
  // Twice what these rows take: the readers' own small rows, copied in under
  // the lock, then find their blocks backed too, by this thread.
  tables_.BackAhead(2 * std::uint64_t{shape.blocks_per_row} * n);
  std::vector<const std::byte*> sources(n);
  for (std::size_t i = 0; i < n; ++i) sources[i] = loaded.bytes.data() + i * shape.row_bytes;
  (void)PublishClaims(loaded.ds, loaded.slot, loaded.rows, loaded.entries, sources, loaded.keys,
                      &published);
  return published;
}

Status NodeCache::PublishClaims(DatasetSlot ds, std::uint16_t slot,
                                std::span<const std::uint64_t> rows,
                                std::span<const std::uint32_t> entries,
                                std::span<const std::byte* const> sources,
                                std::span<const std::uint64_t> keys, PublishedRows* out) noexcept {
  DatasetShape shape;
  const bool known = ShapeOf(ds, &shape, /*or_retired=*/true);
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) {
    KeepUnsettled(ds, slot, rows, entries);
    return lock.status();
  }
  SegmentHeader& h = tables_.header();
  if (!known) {
    return Status::InvalidArgument("cache: dataset slot not registered by this process");
  }
  const std::uint64_t row_bytes = shape.row_bytes;
  const std::uint32_t blocks = shape.blocks_per_row;
  std::uint64_t copied_locked = 0;
  bool any_deferred = false;
  std::vector<unsigned char> deferred(rows.size(), 0);
  // Small rows are copied under the lock, all in one pass once their blocks
  // are attached: blocks allocated one after another are adjacent, and a run
  // of them is one write (a dataset of 4 KiB entries read whole was a write
  // and a check of the segment's descriptor per entry, under the lock).
  std::vector<std::uint32_t> small;
  std::vector<const std::byte*> small_sources;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::uint32_t e = entries[i];
    if (RevokedClaim(tables_.entry(e), ds, rows[i], slot)) tables_.DisownRevoked(e);
    if (!OwnedClaim(tables_.entry(e), ds, rows[i], slot)) {
      ++out->not_admitted;  // taken over, or its dataset dropped: not ours to keep
      continue;
    }
    const std::uint64_t key = keys.empty() ? detail::LruKey(++h.lru_tick) : keys[i];
    tables_.entry(e).key = key;
    if (!tables_.MakeRoom(blocks, key)) {
      tables_.Release(e);
      SegmentTables::Add(h.counters.rejections, 1);
      ++out->not_admitted;
      continue;
    }
    tables_.entry(e).first_block = tables_.AllocChain(blocks);
    if (row_bytes <= kCopyInUnderLockBytes && copied_locked < kLockHoldCopyBudget) {
      copied_locked += row_bytes;
      small.push_back(e);
      small_sources.push_back(sources[i]);
    } else {
      any_deferred = true;  // copy outside the lock, still Loading to others
      deferred[i] = 1;
    }
  }
  if (!small.empty()) {
    std::unique_ptr<bool[]> copied(new bool[small.size()]);
    tables_.CopyInOwnedRows(small, small_sources, row_bytes, {copied.get(), small.size()});
    for (std::size_t k = 0; k < small.size(); ++k) {
      const std::uint32_t e = small[k];
      if (copied[k]) {
        tables_.MarkReady(e, tables_.entry(e).key);
        ++out->stored;
      } else {
        tables_.Release(e);  // a broken chain (corrupt segment): not cached
      }
    }
  }
  if (!any_deferred) return Status::Ok();
  lock.Unlock();
  // Our own claims with blocks attached cannot change under us (only we, or
  // a repair after our death, release them): copy without the lock.
  {
    // One pass over every deferred row: adjacent blocks go in one write.
    std::vector<std::uint32_t> owned;
    std::vector<const std::byte*> owned_sources;
    std::vector<std::size_t> positions;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (deferred[i] == 0) continue;
      owned.push_back(entries[i]);
      owned_sources.push_back(sources[i]);
      positions.push_back(i);
    }
    std::unique_ptr<bool[]> copied(new bool[owned.size()]);
    tables_.CopyInOwnedRows(owned, owned_sources, row_bytes, {copied.get(), owned.size()});
    for (std::size_t k = 0; k < owned.size(); ++k) {
      if (!copied[k]) deferred[positions[k]] = 2;
    }
  }
  if (Status s = lock.Relock(); !s.ok()) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (deferred[i] != 0) KeepUnsettled(ds, slot, {&rows[i], 1}, {&entries[i], 1});
    }
    return s;
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::uint32_t e = entries[i];
    if (deferred[i] == 0) continue;
    if (OwnedClaim(tables_.entry(e), ds, rows[i], slot)) {
      if (deferred[i] == 1) {
        tables_.MarkReady(e, tables_.entry(e).key);
        ++out->stored;
      } else {
        tables_.Release(e);  // the copy found a broken chain: not cached
      }
    }
    if (RevokedClaim(tables_.entry(e), ds, rows[i], slot)) tables_.DisownRevoked(e);
  }
  return Status::Ok();
}

bool NodeCache::ReadOneHit(DatasetSlot ds, std::uint16_t slot, std::uint64_t row, std::byte* dest,
                           std::span<const RowPart> parts, const NextUseOracle* oracle,
                           ReadRowsStats* stats) noexcept {
  const std::uint64_t now = NodeStep();
  const std::uint64_t scheduled =
      oracle != nullptr ? detail::ScheduledKey(oracle->NextUse(ds, row, now)) : 0;
  std::uint32_t e = kNone;
  int pin = -1;
  {
    SegmentLock lock(tables_, options_.lock_timeout);
    if (!lock.ok()) return false;  // the general path reports the error
    SegmentHeader& h = tables_.header();
    tables_.SweepStale(now, kSweepBase + kSweepPerRow);
    e = tables_.Find(ds, row);
    if (e == kNone || tables_.entry(e).state != detail::kEntryReady) return false;
    tables_.SetKey(e, oracle != nullptr ? scheduled : detail::LruKey(++h.lru_tick));
    SegmentTables::Add(h.counters.hits, 1);
    std::uint64_t bytes = 0;
    for (const RowPart& part : parts) bytes += part.bytes;
    if (bytes > kCopyUnderLockBytes) pin = tables_.Pin(slot, e);
    if (pin < 0 && !tables_.CopyOutPinnedParts(e, dest, parts))
      return false;  // corrupt: general path
  }
  if (pin >= 0) {
    const bool copied = tables_.CopyOutPinnedParts(e, dest, parts);
    tables_.PinDone(slot, pin);  // dropped by a later lock holder
    if (!copied) return false;
  }
  ++stats->hits;
  return true;
}

void NodeCache::NoteOwnLoad(std::chrono::nanoseconds took) noexcept {
  // Racy read-modify-write across threads: a lost update only delays the
  // average a little.
  const std::int64_t ns = std::max<std::int64_t>(1, took.count());
  const std::int64_t old = own_load_ns_.load(std::memory_order_relaxed);
  own_load_ns_.store(old == 0 ? ns : old + ((ns - old) >> kOwnLoadWeightShift),
                     std::memory_order_relaxed);
}

std::chrono::nanoseconds NodeCache::WaitPatience() const noexcept {
  const std::int64_t own = own_load_ns_.load(std::memory_order_relaxed);
  if (own == 0 || options_.wait_patience_loads == 0) return {};
  const std::chrono::nanoseconds wait_for(own * std::int64_t{options_.wait_patience_loads});
  return std::clamp<std::chrono::nanoseconds>(
      wait_for, kMinPatience,
      std::max<std::chrono::nanoseconds>(kMinPatience, options_.liveness_poll));
}

Status NodeCache::ReadRows(DatasetSlot ds, std::span<const std::uint64_t> rows, std::byte* dest,
                           const LoaderFn& loader, const NextUseOracle* oracle,
                           ReadRowsStats* stats_out, RowParts parts) noexcept try {
  ReadRowsStats local_stats;
  ReadRowsStats* stats = stats_out != nullptr ? stats_out : &local_stats;
  auto attached = EnsureAttached();
  if (!attached.ok()) return attached.status();
  const std::uint16_t slot = attached.value();
  DatasetShape shape;
  if (!ShapeOf(ds, &shape)) {
    return Status::InvalidArgument("cache: dataset slot not registered (or dropped)");
  }
  const std::uint64_t row_bytes = shape.row_bytes;
  const std::uint64_t num_rows = shape.num_rows;
  if (rows.empty()) return Status::Ok();
  if (rows.size() >= kNone) return Status::InvalidArgument("cache: too many rows in one read");
  for (std::uint64_t r : rows) {
    if (r >= num_rows) {
      return Status::InvalidArgument("cache: row " + std::to_string(r) + " out of range (" +
                                     std::to_string(num_rows) + " rows)");
    }
  }
  if (!parts.empty()) {
    if (parts.first.size() != rows.size() + 1) {
      return Status::InvalidArgument("cache: parts given for " +
                                     std::to_string(parts.first.size() - 1) + " of " +
                                     std::to_string(rows.size()) + " rows");
    }
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (parts.first[i] > parts.first[i + 1] || parts.first[i + 1] > parts.ranges.size()) {
        return Status::InvalidArgument("cache: row parts out of order");
      }
    }
    for (const RowPart& part : parts.ranges) {
      if (part.offset > row_bytes || part.bytes > row_bytes - part.offset) {
        return Status::InvalidArgument("cache: a row part reaches past the row's " +
                                       std::to_string(row_bytes) + " bytes");
      }
    }
  }
  const RowPart whole{0, row_bytes};
  if (rows.size() == 1 &&
      ReadOneHit(ds, slot, rows[0], dest, parts.empty() ? std::span(&whole, 1) : parts.of(0),
                 oracle, stats)) {
    return Status::Ok();
  }
  ScratchLease lease;
  ReadCall call(*this, ds, slot, rows, dest, row_bytes, parts, loader, oracle, stats, *lease);
  return call.Run();
} catch (const std::bad_alloc&) {
  return Status::ResourceExhausted("cache: out of memory in ReadRows");
}

}  // namespace prescient::cache
