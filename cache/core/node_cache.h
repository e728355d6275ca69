// NodeCache: the node-shared row cache. One shared-memory segment per node and
// user, used by every process of that user on the node: independent ranks and
// their forked DataLoader workers (a handle inherited through fork() works in
// the child; the child attaches itself on first use).
//
// Rows are keyed by (DatasetSlot, row number). Exactly one process loads a
// missing row; the others sleep until it is published (futex, no spinning),
// checking every CacheOptions::liveness_poll that the loader is alive and
// taking the row over if it died. Every method is noexcept and thread-safe;
// failures come back as Status messages fit for one warning.
//
// Typical use from the VOL connector (error handling elided):
//
//   auto cache = NodeCache::Open(options);          // once per process
//   if (!cache.ok()) { warn(cache.status().message()); /* pass-through */ }
//   DatasetSlot ds = cache.value()->RegisterDataset(key, row_bytes, rows).value();
//   // In the read callback, rows in selection order (may repeat):
//   Status s = cache.value()->ReadRows(ds, rows, buffer,
//       [&](std::span<const std::uint64_t> missing, std::span<std::byte* const> dest) {
//         return ReadNative(missing, dest);  // sorted, distinct: coalesce them
//       }, oracle /* or nullptr: LRU */);
//   if (!s.ok()) { /* forward this read to the native path */ }
#ifndef PRESCIENT_CACHE_CORE_NODE_CACHE_H_
#define PRESCIENT_CACHE_CORE_NODE_CACHE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/base/mutex.h"
#include "cache/base/status.h"
#include "cache/core/admission_queue.h"
#include "cache/core/cache_options.h"
#include "cache/core/dataset_key.h"
#include "cache/core/next_use_oracle.h"
#include "cache/core/process_identity.h"
#include "cache/core/row_parts.h"
#include "cache/core/segment_file.h"
#include "cache/core/segment_registry.h"
#include "cache/core/segment_tables.h"
#include "cache/core/stall_watch.h"

namespace prescient::cache {

// Hints about a dataset's reads (NodeCache::AddDatasetHint), one bit each.
enum class DatasetHint : std::uint32_t {
  // Its readers take a small part of each row they read: whole rows loaded
  // ahead of them pay only where they stay until the other parts are read.
  kReadInParts = 1,
};

// Fills dest[i] (row_bytes each) with row rows[i]. Rows are distinct and
// ascending, so runs can be read with one call. Runs on the caller's thread
// with no cache lock held. Exceptions are caught and reported as errors.
using LoaderFn =
    std::function<Status(std::span<const std::uint64_t> rows, std::span<std::byte* const> dest)>;

// What one ReadRows call did (per process bookkeeping is the caller's).
struct ReadRowsStats {
  std::uint64_t hits = 0;          // distinct rows copied from the cache
  std::uint64_t loaded = 0;        // distinct rows this call's loader loaded and published
  std::uint64_t waited = 0;        // distinct rows obtained after waiting for another loader
  std::uint64_t not_admitted = 0;  // loaded rows not kept: declined, or claim lost meanwhile
  std::uint64_t uncached = 0;      // rows loaded privately (no free descriptor, broken chain)
  std::uint64_t taken_over = 0;    // rows taken from a stuck (or too slow) loader, loaded here
  // Of `uncached`: rows another process still loaded after this call had
  // waited about twice its own loads' time for them (ReadRows, "Waiting").
  std::uint64_t not_awaited = 0;
  // Of `loaded`: rows whose copy into the segment was left to the admission
  // queue (admission_queue.h); they become hits when its thread publishes them.
  std::uint64_t admitted_behind = 0;
  // Of those: rows the queue reads again itself, the caller's bytes not copied.
  std::uint64_t admitted_read_again = 0;
  // Of `loaded`: rows delivered and not kept, as the admission queue asked
  // (AdmissionQueue::LeavesUnkept); their claims were released.
  std::uint64_t not_kept = 0;
  // Where the call's time went, for the connector's stall figures (both are
  // time the caller waited for rows; hits cost neither):
  std::chrono::nanoseconds wait_time{0};  // asleep, waiting for another process's/thread's load
  std::chrono::nanoseconds load_time{0};  // inside this call's own loader (its misses)
  // Placing this call's loaded rows into the cache (or handing them to the
  // admission thread), after the loader: what keeping them cost the caller.
  std::chrono::nanoseconds admit_time{0};
};

// Node-wide counters (all processes), read without locking.
struct CacheStats {
  std::uint64_t hits = 0, misses = 0, waits = 0, evictions = 0, rejections = 0;
  std::uint64_t recoveries = 0;         // lock-owner deaths repaired
  std::uint64_t takeovers = 0;          // claims of dead loaders released for reloading
  std::uint64_t prefetch_declined = 0;  // rows ClaimForPrefetch left out (no-admit rule)
  std::uint64_t bytes_resident = 0, rows_resident = 0;  // rows' own bytes
  std::uint64_t capacity_bytes = 0;                     // data blocks only (segment minus metadata)
  std::uint64_t segment_bytes = 0;                      // address space reserved
  // Memory the segment holds in its filesystem: the metadata plus the data
  // extents backed so far (the data area is backed as it fills, low first).
  std::uint64_t backed_bytes = 0;
  std::uint64_t backing_failures = 0;  // extents the filesystem could not back (full)
  std::uint64_t dropped_rows = 0;      // rows of dropped datasets (resident or in flight)
  std::uint64_t corruptions = 0;       // out-of-range values found in the segment, repaired
  std::uint64_t stall_takeovers = 0;   // rows taken from live loaders that made no progress
  std::uint64_t leader_takeovers = 0;  // leaderships taken from stuck live leaders
  // Claims a process let go of late: it could not publish or release them
  // when it loaded them (the lock's holder was stopped).
  std::uint64_t claims_released_late = 0;
  std::uint64_t node_step = 0;
};

// A row for the prefetcher and its eviction key: the node step of its next
// use (NextUseOracle::kNever if none), computed by the caller outside the lock.
struct RowWithKey {
  std::uint64_t row = 0;
  std::uint64_t next_use = NextUseOracle::kNever;
};

enum class PublishOutcome {
  kStored,       // resident; waiters woken
  kNotAdmitted,  // every row it would displace is needed sooner: dropped
  kNotClaimed,   // this process holds no claim on the row (e.g. it was taken over)
};

class NodeCache {
 public:
  // Opens (or creates) the segment named by SegmentPath(options); reclaims a
  // stale segment whose processes are all dead (reusing it only if it was
  // kept and has the requested geometry). Errors: /dev/shm full or not
  // writable, bad options, a segment of another user or version.
  static Result<std::unique_ptr<NodeCache>> Open(const CacheOptions& options) noexcept;

  // Detaches this process (when it is the one that attached): resigns
  // leadership, drops its claims; the last process unlinks the segment unless
  // keep_after_exit. Processes that die or _exit without it are cleaned up by
  // the others' liveness checks.
  ~NodeCache();
  NodeCache(const NodeCache&) = delete;
  NodeCache& operator=(const NodeCache&) = delete;

  // Same key -> same slot in every process. Fails if the key is known with a
  // different row size or count, or the dataset table is full.
  Result<DatasetSlot> RegisterDataset(const DatasetKey& key, std::uint64_t row_bytes,
                                      std::uint64_t num_rows) noexcept;

  // Copies rows[i] to dest + i * row_bytes for every i. Cached rows are copied;
  // missing ones nobody loads are claimed and handed to `loader` in one call,
  // then published; rows others are loading are waited for. Rows the cache
  // will not admit are still delivered. On loader failure the claims are
  // released (others retry) and the loader's error is returned; dest is then
  // partly written. `oracle` may be null (LRU).
  //
  // Waiting: for a live loader CacheOptions::wait_patience_loads times as
  // long as this process's own loads take (a running average; at least
  // 0.1 ms, at most liveness_poll), then the rows it still loads are loaded
  // privately, not cached by this call (its loader publishes them). With
  // patience 0, before this process has loaded anything itself, and for
  // claims of a process that loads for the whole node
  // (CacheOptions::claims_awaited_in_full): at most wait_timeout, then the
  // rows are taken over. A dead loader is detected within liveness_poll.
  // A caller that holds a lock (HDF5's global lock, in the VOL read
  // callback) may wait only for loads that can finish without that lock:
  // rows claimed by other processes, or by this process's I/O threads that
  // never take it. Claims are per process, not per thread.
  //
  // With `parts`, of a hit only the parts of rows[i] are copied, each to its
  // place (dest + i * row_bytes + offset); the rest of the row's space in
  // dest may be left as it was. Loaded rows are written whole.
  Status ReadRows(DatasetSlot ds, std::span<const std::uint64_t> rows, std::byte* dest,
                  const LoaderFn& loader, const NextUseOracle* oracle,
                  ReadRowsStats* stats = nullptr, RowParts parts = {}) noexcept;

  // True if the row is resident (a snapshot).
  bool Contains(DatasetSlot ds, std::uint64_t row) noexcept;
  // Contains for each of `rows` under one lock: resident[i] for rows[i]
  // (sizes equal). Returns how many are resident; 0, with every flag 0, when
  // the cache cannot answer.
  std::size_t Resident(DatasetSlot ds, std::span<const std::uint64_t> rows,
                       std::span<std::uint8_t> resident) noexcept;

  // What a process found out about a dataset's reads, for every process of
  // the node to see (lock-free; set once, never cleared; false for a slot
  // not registered).
  void AddDatasetHint(DatasetSlot ds, DatasetHint hint) noexcept;
  bool HasDatasetHint(DatasetSlot ds, DatasetHint hint) noexcept;

  // Admission behind the reader (admission_queue.h): with a queue set, the
  // rows a ReadRows call loads are handed to it with a copy of their bytes
  // (when it has room), instead of being placed in the segment by the reader.
  // Null (the default) turns it off. The queue must outlive its use: its
  // owner drains it and sets null before either goes.
  void SetAdmissionQueue(AdmissionQueue* queue) noexcept { admission_queue_.store(queue); }
  // Publishes rows a ReadRows call of this process loaded and handed to the
  // admission queue, from any thread of that process: each still claimed is
  // made resident, or released if the cache declines it (their readers'
  // waiters then load them). Rows whose claim was taken over or dropped
  // meanwhile are skipped.
  PublishedRows PublishLoaded(LoadedRows&& loaded) noexcept EXCLUDES(tables_);

  // For the prefetcher: claims rows to load ahead of need. `rows` come in
  // order of need, each with its eviction key. A row is claimed only if it is
  // neither resident nor in flight and is admissible now by Belady's no-admit
  // rule: free blocks exist, or the resident rows it displaces are all needed
  // later than it ("do no harm"). Its blocks are reserved at claim time
  // (evicting those rows now), so a row in flight counts against capacity,
  // is never evicted, and its Publish never declines it. Returns the claimed
  // rows in the order given. Every claimed row must later be Published or
  // Abandoned by this process (a dead process's claims are released by the
  // others; a stuck process's are taken over).
  Result<std::vector<std::uint64_t>> ClaimForPrefetch(DatasetSlot ds,
                                                      std::span<const RowWithKey> rows) noexcept;
  // ClaimForPrefetch with keys from `oracle` (LRU keys without one); rows in
  // any order, repeats allowed; returns the claimed rows ascending.
  Result<std::vector<std::uint64_t>> Claim(DatasetSlot ds, std::span<const std::uint64_t> rows,
                                           const NextUseOracle* oracle) noexcept;
  // `data` holds row_bytes bytes of a row this process claimed. A claim made
  // by ClaimForPrefetch/Claim is always stored (its blocks are reserved); the
  // key is the oracle's answer now, or the one given at claim time when
  // `oracle` is null.
  Result<PublishOutcome> Publish(DatasetSlot ds, std::uint64_t row, const std::byte* data,
                                 const NextUseOracle* oracle) noexcept;
  Status Abandon(DatasetSlot ds, std::uint64_t row) noexcept;
  // Sets the eviction key of resident (or in-flight) rows, e.g. a row just
  // read gets its following use. Rows not present are skipped.
  Status UpdateKeys(DatasetSlot ds, std::span<const RowWithKey> rows) noexcept;

  // Forgets a dataset whose file changed under an open handle: its resident
  // rows are freed now (pinned ones as soon as their copy-out ends), rows in
  // flight become unpublishable (their Publish says kNotClaimed and their
  // blocks are freed), and the slot stops working everywhere (calls on it
  // fail; RegisterDataset of the same key gets a new slot). O(entries).
  Status DropDataset(DatasetSlot ds) noexcept;

  // Prefetch leadership: at most one live process per segment. A forked child
  // is never leader by inheritance. When the leader exits (resigns), dies, or
  // makes no progress for stall_timeout (stopped: its IsLeader calls and
  // publishes are its heartbeat), the next TryBecomeLeader by anyone
  // succeeds: callers retry every few hundred ms. IsLeader() counts as the
  // leader's heartbeat: a leader calls it every round.
  bool TryBecomeLeader() noexcept;
  // Takes leadership whoever holds it: the node agent (vol/agent), which does
  // the node's prefetching while it runs. The previous leader's next IsLeader()
  // is false, and its TryBecomeLeader fails while the taker lives and beats.
  // False only when this process cannot attach.
  bool TakeLeadership() noexcept;
  bool IsLeader() const noexcept;
  void ResignLeader() noexcept;
  // fork(): the process-local locks of the cache that background threads
  // take (the prefetch leader's view, in TryBecomeLeader; the list of claims
  // still to let go of, which any thread's failed publication adds to). Held
  // across fork() by the connector's handlers, so that a child, which has
  // only the forking thread, never inherits one held and hangs on it.
  void LockForFork() ACQUIRE(leader_watch_mu_, unsettled_mu_) {
    leader_watch_mu_.Lock();
    unsettled_mu_.Lock();
  }
  void UnlockAfterFork() RELEASE(leader_watch_mu_, unsettled_mu_) {
    unsettled_mu_.Unlock();
    leader_watch_mu_.Unlock();
  }

  // --- progress (participants.cc) ---
  // Participants are the schedule's ranks on this node (at most 256 at once).
  // Each reports the step it has reached: the quantity AdvanceNodeStep would
  // get for that rank alone (the step it reads, minus one). `owner_pid` is the
  // rank's long-lived process; a DataLoader worker reports the rank's (or its
  // forkserver's) pid, so the participant lives as long as the rank, not the
  // worker. The step only increases (atomic max) while the owner stays the
  // same; a new owner (a restarted rank) starts afresh. Lock-free after the
  // first report.
  Status ReportProgress(std::uint32_t participant, std::uint64_t step,
                        std::int32_t owner_pid) noexcept;
  // The rank read its last step: it no longer holds the node step back.
  Status FinishParticipant(std::uint32_t participant) noexcept;
  // The participant's step, lock-free; nullopt if it never reported.
  std::optional<std::uint64_t> ParticipantStep(std::uint32_t participant) const noexcept;
  struct ParticipantProgress {
    std::uint32_t participant = 0;
    std::uint64_t step = 0;
    std::int32_t owner_pid = 0;
    bool finished = false;
    bool owner_alive = true;  // as of the last liveness check (at most ~250 ms old)
  };
  std::vector<ParticipantProgress> Participants() const;

  // Marks this process as making progress (every call into the cache does).
  // A loader that works for longer than stall_timeout without calling the
  // cache or using CPU (e.g. waiting on slow storage) may call it so waiters
  // do not take its rows over.
  void Heartbeat() noexcept;

  // The node step (see NextUseOracle): the minimum step of the live,
  // unfinished participants. It increases as they progress and goes back only
  // when a participant registers behind it (a rank whose first read came
  // late, or a restarted rank: its reads are still to come). A participant whose
  // owner died or finished stops holding it back (owners' liveness is checked
  // at most every 250 ms, by whichever caller comes first, so this stays a
  // few atomic loads). When every participant has finished or died it is the
  // furthest step any reached. With no participant at all it is the largest
  // value given to AdvanceNodeStep (once a participant reports, that value is
  // no longer consulted).
  void AdvanceNodeStep(std::uint64_t step) noexcept;
  std::uint64_t NodeStep() const noexcept;

  // Whether a live process other than this one holds the segment: one
  // attached to it, or a keeper holding it for a process that lives
  // (segment_keeper.h: a training process between two generations of
  // DataLoader workers, which may be seconds apart: a validation pass, a
  // checkpoint, spawned workers importing torch). The node agent's test that
  // its node's job is still there. Lock-free while a process is attached;
  // otherwise takes the node's registry lock for at most 100 ms (a lock it
  // cannot get counts as held: someone is opening the cache).
  bool OthersHold() const noexcept;

  CacheStats Stats() const noexcept;
  std::uint64_t RowBytes(DatasetSlot ds) const noexcept;  // 0 if not registered
  // <directory>/<base name> of the node's files (<path>.lock, <path>.kept);
  // the segment itself is unnamed.
  const std::string& path() const { return path_; }
  // <path>.resolved: a file the cache's users may keep beside the segment
  // (the connector's memo of resolved datasets), removed with the registry.
  std::string memo_path() const { return path_ + detail::kMemoSuffix; }
  // A path that opens the segment from this process and its forked children
  // (/proc/self/fd/<n>): for tools and tests.
  std::string segment_file() const { return segment_.ProcPath(); }
  // The segment file's identity: processes attached to the same segment see
  // the same pair.
  std::pair<std::uint64_t, std::uint64_t> segment_identity() const {
    return {static_cast<std::uint64_t>(segment_.device),
            static_cast<std::uint64_t>(segment_.inode)};
  }
  // What Open had to do that a user should hear about once (e.g. a corrupt
  // segment found and replaced), each a message fit for one warning.
  const std::vector<std::string>& notices() const { return notices_; }

 private:
  NodeCache(const CacheOptions& options, detail::SegmentPlace place, detail::MappedSegment segment,
            const ProcessIdentity& self, std::uint16_t slot, std::vector<std::string> notices);
  // Attaches `self` to a segment found through the registry or by its kept
  // name (reusing a kept one after repair); kUnavailable "cache: retry" when
  // it cannot be used (a stale or foreign leftover, now removed).
  static Result<std::uint16_t> Join(const CacheOptions& options, const detail::SegmentPlace& place,
                                    const detail::MappedSegment& segment, bool kept,
                                    const detail::LayoutPlan& plan, const ProcessIdentity& self,
                                    detail::SegmentRegistry& registry,
                                    std::vector<std::string>* notices);
  // This process's own record of a registered dataset: sizes come from here,
  // never from the segment (whose bytes anyone running as the user could
  // change), so a corrupt record cannot make a copy overrun a buffer.
  // What this process registered in dataset slot i: row_bytes (0 = not
  // registered by this process) and num_rows, read lock-free through
  // std::atomic_ref. Zeroed by calloc, so a large dataset table costs a
  // process only the pages of the slots it uses.
  struct LocalDataset {
    std::uint64_t row_bytes;
    std::uint64_t num_rows;
  };
  struct FreeDeleter {
    void operator()(void* p) const noexcept { std::free(p); }
  };
  struct DatasetShape {
    std::uint64_t row_bytes = 0;
    std::uint64_t num_rows = 0;
    std::uint32_t blocks_per_row = 0;
  };
  // The shape of `ds` if this process registered it and it is not dropped
  // (`or_retired`: dropped too, for an owner letting go of revoked claims).
  bool ShapeOf(DatasetSlot ds, DatasetShape* shape, bool or_retired = false) const noexcept;
  // This process's attach slot; attaches after a fork.
  Result<std::uint16_t> EnsureAttached() noexcept EXCLUDES(tables_);
  bool ValidSlot(DatasetSlot ds) const noexcept;
  // Index of `participant`'s record, or kMaxParticipants (lock-free).
  std::uint32_t FindParticipant(std::uint32_t participant) const noexcept;
  // Marks participants whose owner died, at most every 250 ms node-wide.
  void CheckParticipantsLiveness() const noexcept;
  // ClaimForPrefetch; `lru`: ignore next_use, key rows by recency instead.
  Result<std::vector<std::uint64_t>> ClaimReserved(DatasetSlot ds, std::span<const RowWithKey> rows,
                                                   bool lru) noexcept EXCLUDES(tables_);
  class ReadCall;  // read_rows.cc: one ReadRows call, in phases
  // A loader call of this process that succeeded took `took` (read_rows.cc).
  void NoteOwnLoad(std::chrono::nanoseconds took) noexcept;
  // How long a reader waits for another process's claim before it loads the
  // row itself; zero (wait as long as it takes) before any NoteOwnLoad and
  // with CacheOptions::wait_patience_loads 0.
  std::chrono::nanoseconds WaitPatience() const noexcept;
  // A one-row hit in one lock round; false (nothing done) if the row is not
  // resident or the lock is unavailable: the general path then takes over.
  bool ReadOneHit(DatasetSlot ds, std::uint16_t slot, std::uint64_t row, std::byte* dest,
                  std::span<const RowPart> parts, const NextUseOracle* oracle,
                  ReadRowsStats* stats) noexcept EXCLUDES(tables_);
  // Loads claimed rows (entries `claimed`, rows ascending) through `loader`
  // into their first destinations, then publishes them (read_rows.cc).
  Status LoadAndPublish(DatasetSlot ds, std::uint16_t slot, std::span<const std::uint64_t> rows,
                        std::span<const std::uint32_t> entries, std::span<std::byte* const> dest,
                        const LoaderFn& loader, std::span<const std::uint64_t> keys,
                        ReadRowsStats* stats) noexcept EXCLUDES(tables_);
  // Lets go of loaded rows' claims (a failed load, rows not publishable):
  // each still ours is freed, its waiters woken to load it themselves.
  Status ReleaseClaims(DatasetSlot ds, std::uint16_t slot, std::span<const std::uint64_t> rows,
                       std::span<const std::uint32_t> entries) noexcept EXCLUDES(tables_);
  // The second half of LoadAndPublish: loaded rows still claimed by `slot`
  // get their blocks and bytes (`sources`, one row each) and become resident.
  Status PublishClaims(DatasetSlot ds, std::uint16_t slot, std::span<const std::uint64_t> rows,
                       std::span<const std::uint32_t> entries,
                       std::span<const std::byte* const> sources,
                       std::span<const std::uint64_t> keys, PublishedRows* out) noexcept
      EXCLUDES(tables_);
  // Claims this process loaded (or reserved) and could not publish, release
  // or abandon because the segment lock was not to be had: its holder is
  // stopped (kHolderStopped after 200 ms). Left as they are, they stay
  // Loading under an owner that is alive and busy, which no stall check
  // overtakes, so every reader of those rows would wait its whole
  // wait_timeout. Kept here instead and released by this process's next call
  // that gets the lock (EnsureAttached): the readers waiting for them are
  // woken and load the rows themselves. `entries` may be empty (the claims
  // are then found by row). Bounded: beyond kMaxUnsettledClaims the rest are
  // left to the waiters' wait_timeout, as before.
  struct UnsettledClaim {
    std::int32_t pid = 0;  // the claimer: a forked child drops what it inherited
    DatasetSlot ds = kInvalidDatasetSlot;
    std::uint16_t slot = 0;
    std::uint32_t entry = 0;  // detail::kNone: look the claim up by row
    std::uint64_t row = 0;
  };
  static constexpr std::size_t kMaxUnsettledClaims = 1 << 16;
  void KeepUnsettled(DatasetSlot ds, std::uint16_t slot, std::span<const std::uint64_t> rows,
                     std::span<const std::uint32_t> entries) noexcept EXCLUDES(unsettled_mu_);
  // Releases the kept claims if the lock comes within a moment; keeps them
  // for the next call otherwise.
  void SettleClaims() noexcept EXCLUDES(tables_, unsettled_mu_);
  // Whether the admission queue asks for loaded rows to go unkept
  // (AdmissionQueue::LeavesUnkept), given their runs of consecutive rows.
  bool LeftUnkept(DatasetSlot ds, std::span<const std::uint64_t> rows,
                  std::uint64_t row_bytes) noexcept;
  // Hands loaded rows to the admission queue (copying their bytes, unless the
  // queue reads them again itself: *read_again); false if there is none or it
  // has no room.
  bool AdmitBehind(DatasetSlot ds, std::uint16_t slot, std::span<const std::uint64_t> rows,
                   std::span<const std::uint32_t> entries, std::span<std::byte* const> dest,
                   std::span<const std::uint64_t> keys, std::uint64_t row_bytes,
                   bool* read_again) noexcept;

  CacheOptions options_;
  detail::SegmentPlace place_;  // the node's directory and file names
  std::string path_;
  std::vector<std::string> notices_;
  detail::MappedSegment segment_;
  detail::FileBacking backing_;  // puts memory behind the data area as it fills
  // The segment's tables; also the capability "segment lock" that guards them
  // (taken with detail::SegmentLock).
  mutable detail::SegmentTables tables_;
  std::unique_ptr<LocalDataset[], FreeDeleter> local_datasets_;  // geometry.max_datasets of them
  // TryBecomeLeader's view of the current leader's progress.
  Mutex leader_watch_mu_;
  detail::StallWatch leader_watch_ GUARDED_BY(leader_watch_mu_);
  // This process's attachment, packed as pid << 16 | slot so a forked child
  // sees a foreign pid (and attaches itself) in one atomic read.
  std::atomic<std::uint64_t> attachment_{0};
  // Reads of this process that missed while the cache was full and had no
  // next-use order to choose by (read_rows.cc: one in kAdmitWhenFullEvery
  // keeps its misses).
  std::atomic<std::uint64_t> full_cache_misses_{0};
  // How long this process's own loader calls take: a running average in ns,
  // 0 before the first (NoteOwnLoad). Inherited by forked children, whose
  // storage it is too.
  std::atomic<std::int64_t> own_load_ns_{0};
  // Start time of the process named in attachment_ (for leadership checks).
  std::atomic<std::uint64_t> self_start_time_{0};
  std::atomic<AdmissionQueue*> admission_queue_{nullptr};
  Mutex unsettled_mu_;
  std::vector<UnsettledClaim> unsettled_ GUARDED_BY(unsettled_mu_);
  std::atomic<bool> any_unsettled_{false};  // unsettled_ is not empty (lock-free check)
};

}  // namespace prescient::cache

#endif  // PRESCIENT_CACHE_CORE_NODE_CACHE_H_
