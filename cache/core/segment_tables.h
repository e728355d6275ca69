// SegmentTables: the operations on a mapped segment's tables, and the segment
// lock as a clang thread-safety capability. A thin view (one pointer); every
// method REQUIRES the segment lock (the robust mutex in the segment header)
// unless it says so, and clang checks that with -Wthread-safety: the lock is
// taken with a SegmentLock, which names this object as the capability it
// holds. Keep one SegmentTables per mapping (NodeCache::tables_) so the
// analysis can match the lock a caller holds to the tables it touches.
//
// The entry array is the source of truth. The row index (open addressing,
// linear probing, backward-shift deletion), the eviction heap, the block and
// entry free lists and the pin counts are derived from it and from the attach
// records, so Repair() can rebuild them after a process died half-way through
// any critical section (see segment_repair.cc).
#ifndef PRESCIENT_CACHE_CORE_SEGMENT_TABLES_H_
#define PRESCIENT_CACHE_CORE_SEGMENT_TABLES_H_

#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include "cache/base/status.h"
#include "cache/base/thread_annotations.h"
#include "cache/core/dataset_key.h"
#include "cache/core/process_identity.h"
#include "cache/core/row_parts.h"
#include "cache/core/segment_layout.h"
#include "cache/core/shm_sync.h"

namespace prescient::cache::detail {

// Puts memory behind a range of the segment file before blocks there are
// handed out (the data area starts as a hole). An error means the filesystem
// is full: the cache then behaves as full (evicts or declines).
class SegmentBacking {
 public:
  virtual ~SegmentBacking() = default;
  // `offset` and `length` are in bytes from the segment start, page aligned.
  virtual Status Back(std::uint64_t offset, std::uint64_t length) const noexcept = 0;
  // Writes the pieces, one after another, at `offset` (backed blocks) through
  // the segment's file instead of its mapping. On tmpfs a write fills a fresh
  // page without the page fault and zeroing that a first store through the
  // mapping costs (measured: 3.6-4.4 us per 16 KiB row against 8.3-10.8 us);
  // one vectored write spares a system call per row. False when not all was
  // written (no file, an error): the caller copies through the mapping,
  // which stays correct.
  virtual bool WriteThrough(std::uint64_t /*offset*/,
                            std::span<const struct iovec> /*pieces*/) const noexcept {
    return false;
  }
  bool WriteThrough(std::uint64_t offset, const std::byte* source,
                    std::uint64_t length) const noexcept {
    const struct iovec piece = {const_cast<std::byte*>(source), static_cast<std::size_t>(length)};
    return WriteThrough(offset, std::span<const struct iovec>(&piece, 1));
  }
};

class CAPABILITY("segment lock") SegmentTables {
 public:
  // `geometry` comes from CheckedGeometry (a segment opened) or PlanLayout (a
  // segment created); it is kept here and trusted, the header's copy never
  // read again. `backing` may be null: the segment is all memory already.
  SegmentTables(void* base, const LayoutPlan& geometry, const SegmentBacking* backing = nullptr)
      : base_(static_cast<unsigned char*>(base)), geo_(geometry), backing_(backing) {}
  // Geometry from the header as it is: for segments this process built and
  // initialised itself (creation, tests).
  explicit SegmentTables(void* base)
      : SegmentTables(base, GeometryOf(*static_cast<const SegmentHeader*>(base))) {}

  const LayoutPlan& geometry() const { return geo_; }
  // An index or size read from the segment was out of range during this lock
  // hold: the operation went on with a safe value, and the tables are
  // repaired before the lock is released (counted in `corruptions`).
  bool corrupt() const { return corrupt_.load(std::memory_order_relaxed); }
  void MarkCorrupt() const { corrupt_.store(true, std::memory_order_relaxed); }

  // --- the lock (use SegmentLock; these are its primitives) ---
  // Acquires the robust mutex; after an owner's death, repairs the tables and
  // counts a recovery. Not ok(): the lock is not held.
  Status AcquireLock(std::chrono::milliseconds timeout) NO_THREAD_SAFETY_ANALYSIS;
  void ReleaseLock() RELEASE() NO_THREAD_SAFETY_ANALYSIS;
  // For single-threaded code that owns the mapping alone (a segment being
  // created, white-box tests): tells the analysis the tables may be touched.
  void AssumeExclusive() const ASSERT_CAPABILITY(this) {}

  // Lock-free: the immutable geometry and the fields accessed through
  // std::atomic_ref (counters, node step, leader identity, stall memo).
  SegmentHeader& raw_header() const { return *reinterpret_cast<SegmentHeader*>(base_); }
  // The whole header, guarded fields included.
  SegmentHeader& header() const REQUIRES(this) { return raw_header(); }
  // Table elements. Every index is checked where it is used, not only where it
  // was first read: a process that writes the segment without the lock (a
  // stray pointer, a bug) can change a value between a check and its use, so
  // an earlier check proves nothing. An index out of range marks the tables
  // corrupt and yields a scratch element private to the thread: the access
  // never leaves the mapping.
  DatasetRecord& dataset(std::uint32_t i) const REQUIRES(this) { return dataset_unlocked(i); }
  AttachRecord& attach(std::uint32_t i) const REQUIRES(this) { return attach_unlocked(i); }
  Entry& entry(std::uint32_t i) const REQUIRES(this) { return entry_unlocked(i); }
  // Lock-free (every field through std::atomic_ref; written under the lock).
  ParticipantRecord& participant(std::uint32_t i) const {
    return Element<ParticipantRecord>(geo_.off_participants, i, kMaxParticipants);
  }
  std::byte* block_data(std::uint32_t b) const {
    return reinterpret_cast<std::byte*>(base_ + geo_.off_data +
                                        std::uint64_t{b} * geo_.block_bytes);
  }

  // Lock-free: the dataset record `ds` if it is complete (state 1), else null.
  // Records are written once, state last, so a complete record never changes.
  const DatasetRecord* PublishedDataset(std::uint32_t ds) const;
  // Lock-free: the record `ds` was retired (dropped, or invalidated by repair).
  bool RetiredDataset(std::uint32_t ds) const;
  // Lock-free: the hints of the complete record `ds` (0 for any other), and
  // setting some (DatasetRecord::hints).
  std::uint32_t DatasetHints(std::uint32_t ds) const;
  void AddDatasetHints(std::uint32_t ds, std::uint32_t hints) const;
  // Lock-free: the heartbeat of attach slot `slot` (0 for a bad slot), and
  // bumping it.
  std::uint64_t Heartbeat(std::uint32_t slot) const {
    if (slot >= kMaxAttach) return 0;
    return std::atomic_ref<std::uint64_t>(attach_unlocked(slot).heartbeat)
        .load(std::memory_order_relaxed);
  }
  void Beat(std::uint32_t slot) const {
    if (slot < kMaxAttach) {
      std::atomic_ref<std::uint64_t>(attach_unlocked(slot).heartbeat)
          .fetch_add(1, std::memory_order_relaxed);
    }
  }
  // Lock-free: the futex word of entry `e` (bumped on every state change).
  std::uint32_t* SeqWord(std::uint32_t e) const { return &entry_unlocked(e).seq; }

  // Lock-free counter access (relaxed).
  static void Add(std::uint64_t& counter, std::int64_t delta) {
    std::atomic_ref<std::uint64_t>(counter).fetch_add(static_cast<std::uint64_t>(delta),
                                                      std::memory_order_relaxed);
  }
  static std::uint64_t Load(std::uint64_t& counter) {
    return std::atomic_ref<std::uint64_t>(counter).load(std::memory_order_relaxed);
  }

  // --- datasets ---
  // The slot of `key`, adding it if new; fails if the key is known with
  // another row size or row count, or the table is full.
  Result<DatasetSlot> FindOrAddDataset(const DatasetKey& key, std::uint64_t row_bytes,
                                       std::uint64_t num_rows) REQUIRES(this);

  // --- row index ---
  // The live (Loading or Ready) entry of the row; kNone if absent.
  std::uint32_t Find(std::uint32_t ds, std::uint64_t row) const REQUIRES(this);
  // Asks the CPU for the memory a Find of each row will touch, so that the
  // lookups of one read (a sample stored as 64 entries, a batch) wait for
  // memory together rather than one after another: the buckets first, then
  // the entries they name. Each Find is a cache and TLB miss into tables of
  // tens of megabytes, and was the largest cost of such reads (RESULTS.md,
  // "A read is kept whole or not at all"). With `declined`, also the records
  // DeclinedBefore will look at. Changes nothing.
  void PrefetchLookups(std::uint32_t ds, std::span<const std::uint64_t> rows, bool declined) const
      REQUIRES(this);
  // The entry of the row claimed by `owner`, live (Loading) or revoked; kNone if none.
  std::uint32_t FindClaim(std::uint32_t ds, std::uint64_t row, std::uint16_t owner) const
      REQUIRES(this);
  void IndexInsert(std::uint32_t e) REQUIRES(this);
  void IndexErase(std::uint32_t e) REQUIRES(this);

  // --- entries ---
  // A free entry set to Loading(ds, row, owner) and indexed; kNone if none is free.
  std::uint32_t Claim(std::uint32_t ds, std::uint64_t row, std::uint16_t owner) REQUIRES(this);
  // Any state -> Free: unindexed, out of the heap, blocks released, waiters woken.
  void Release(std::uint32_t e) REQUIRES(this);
  // Loading -> Ready with `key`: counted resident, in the eviction heap.
  void MarkReady(std::uint32_t e, std::uint64_t key) REQUIRES(this);
  // Takes the row away from a live entry: Ready rows leave the heap and the
  // resident counts; the entry becomes Revoked (see kEntryRevoked) and is
  // freed at once if nobody owns or pins it. Waiters are woken.
  void Revoke(std::uint32_t e) REQUIRES(this);
  // The owner of a revoked claim lets go of it (frees it unless pinned).
  void DisownRevoked(std::uint32_t e) REQUIRES(this);
  // Revokes every live entry of dataset `ds` and retires its record; returns
  // how many rows were resident or in flight. O(entries).
  std::uint64_t DropDataset(std::uint32_t ds) REQUIRES(this);
  // Bumps the entry's futex word and wakes its sleepers, if any.
  void BumpAndWake(std::uint32_t e) REQUIRES(this);

  // --- eviction heap: a max-heap of every Ready row on Entry::heap_key ---
  // A key that grows is sifted at once (the row may now be the best victim);
  // a key that shrinks (an LRU hit, the common case) is only recorded, and
  // fixed when the row reaches the top: hits cost O(1), not O(log n).
  void HeapPush(std::uint32_t e) REQUIRES(this);
  void HeapRemove(std::uint32_t e) REQUIRES(this);
  void SetKey(std::uint32_t e, std::uint64_t key) REQUIRES(this);
  // The row with the largest current key (freshens stale tops); kNone if empty.
  std::uint32_t HeapTop() REQUIRES(this);

  // --- blocks ---
  // Pops `count` blocks off the free list, backing a new extent first if the
  // list is short; kNone if that is not possible.
  std::uint32_t AllocChain(std::uint32_t count) REQUIRES(this);
  // Backs at least `blocks` more blocks (an extent of ~2 MiB, low blocks
  // first) and puts them on the free list. False when the data area is all
  // backed or the filesystem is full (counted; not retried for a second).
  bool Grow(std::uint64_t blocks) REQUIRES(this);
  // Lock-free: while the data area is still growing, backs the extent the
  // next Grow will back (for at least `blocks`), so that Grow, under the
  // lock, finds it backed already and the node's other processes do not wait
  // behind a fallocate (0.6 ms per 2 MiB extent, measured). Values read here
  // are hints: Grow still checks and backs what it hands out.
  void BackAhead(std::uint64_t blocks) const;
  void FreeChain(std::uint32_t head, std::uint32_t count) REQUIRES(this);
  // Copies bytes [offset, offset + bytes) of a row (within the caller's own
  // record of the row size, never the segment's) from its block chain to
  // memory. False (and the tables marked corrupt) if the chain leaves the
  // data area: the row's bytes are then not to be trusted. REQUIRES the lock,
  // or that this process pinned `e` (nobody evicts or rewrites it),
  // respectively owns its claim with blocks attached (only the owner
  // publishes or releases it).
  bool CopyOutPinned(std::uint32_t e, std::byte* dest, std::uint64_t offset,
                     std::uint64_t bytes) const;
  // CopyOutPinned of each of `parts` to its own place (dest + offset), in one
  // walk of the chain while they ascend: a 3-D patch takes 128 pieces of each
  // z-plane, and walking the chain anew for each cost a pointer chase per
  // block before it.
  bool CopyOutPinnedParts(std::uint32_t e, std::byte* dest, std::span<const RowPart> parts) const;
  bool CopyInOwned(std::uint32_t e, const std::byte* source, std::uint64_t row_bytes) const;
  // CopyInOwned for many rows at once: blocks adjacent in the segment are
  // written as one run, across rows too where a row's chain starts in the
  // block after the previous row's last (that block's unused tail is written
  // with filler, never served). copied[i] false: entries[i] has a broken
  // chain (the tables marked corrupt) and nothing of it was written.
  void CopyInOwnedRows(std::span<const std::uint32_t> entries,
                       std::span<const std::byte* const> sources, std::uint64_t row_bytes,
                       std::span<bool> copied) const;

  // --- eviction and admission ---
  // Evicts unpinned rows with a key larger than incoming_key until `blocks`
  // are free.
  // False (and nothing more evicted) when that would need a row with a key
  // <= incoming_key: the incoming row is not worth admitting.
  bool MakeRoom(std::uint32_t blocks, std::uint64_t incoming_key) REQUIRES(this);
  // Looks at `count` entries round-robin; scheduled rows whose predicted use
  // lies before `now` get kStaleKey. Amortised cleanup, O(count).
  void SweepStale(std::uint64_t now, std::uint32_t count) REQUIRES(this);
  // A miss of (ds, row) that a full cache without a next-use order would
  // decline: true when the same row was declined within the last half a
  // cache's worth of such misses (another reader is close behind: admit it);
  // otherwise the miss is remembered in a ghost record and false. Ghosts are
  // hints: a stale or corrupt one costs at most one admission.
  bool DeclinedBefore(std::uint32_t ds, std::uint64_t row) REQUIRES(this);

  // --- pins ---
  // Pins `e` for `slot` (it is not evicted or rewritten until unpinned);
  // returns the pin's index in the slot's table, or -1 if the table is full
  // (after dropping the slot's finished pins).
  int Pin(std::uint16_t slot, std::uint32_t e) REQUIRES(this);
  void Unpin(std::uint16_t slot, std::uint32_t e) REQUIRES(this);
  // Lock-free: the copy-out under pin `index` of `slot` is finished. The pin
  // is dropped later by a lock holder (ReapDonePins).
  void PinDone(std::uint16_t slot, int index) const;
  // Drops the finished pins of `slot`, or of every process (kMaxAttach).
  void ReapDonePins(std::uint32_t slot) REQUIRES(this);

  // --- processes ---
  // A free attach slot for `self` with `flags` (kAttach*); reaps dead
  // processes first if the table is full.
  Result<std::uint16_t> Attach(const ProcessIdentity& self, std::uint32_t flags) REQUIRES(this);
  // Drops the slot's pins and claims (their rows are freed, waiters woken)
  // and frees the slot. `died`: count the claims as takeovers.
  void ReleaseAttachment(std::uint16_t slot, bool died) REQUIRES(this);
  // ReleaseAttachment for every attached process that is no longer alive.
  // Returns how many live processes remain attached.
  std::uint32_t ReapDead() REQUIRES(this);
  // Lock-free and racy (for a segment whose lock may itself be broken): is
  // any process recorded as attached still alive (other than `except`)?
  bool AnyAttachedAliveUnlocked(std::int32_t except = 0) const;
  ProcessIdentity AttachedIdentity(std::uint16_t slot) const REQUIRES(this) {
    if (slot >= kMaxAttach) {
      MarkCorrupt();
      return {};
    }
    return {attach(slot).pid, attach(slot).start_time};
  }
  // Whether readers wait for the claims of `slot` until they are published.
  bool AwaitedInFull(std::uint16_t slot) const REQUIRES(this) {
    return slot < kMaxAttach && (attach(slot).flags & kAttachAwaitedInFull) != 0;
  }

  // --- recovery (segment_repair.cc) ---
  // Rebuilds every derived structure from the entry array after a process died
  // holding the lock or a value was out of range; drops entries that fail
  // validation. `verify_backing`: the recorded backed extent is not trusted
  // (a corrupt or kept segment) and is backed again. Idempotent.
  void Repair(bool verify_backing = false) REQUIRES(this);

 private:
  // Element `i` of the array at `offset` with `count` elements, or (marked
  // corrupt) a zeroed scratch element of this thread.
  template <typename T>
  T& Element(std::uint64_t offset, std::uint64_t i, std::uint64_t count) const {
    if (i >= count) [[unlikely]] {
      MarkCorrupt();
      thread_local T scratch;
      scratch = T{};
      return scratch;
    }
    return reinterpret_cast<T*>(base_ + offset)[i];
  }
  AttachRecord& attach_unlocked(std::uint32_t i) const {
    return Element<AttachRecord>(geo_.off_attach, i, kMaxAttach);
  }
  DatasetRecord& dataset_unlocked(std::uint32_t i) const {
    return Element<DatasetRecord>(geo_.off_datasets, i, geo_.max_datasets);
  }
  Entry& entry_unlocked(std::uint32_t i) const {
    return Element<Entry>(geo_.off_entries, i, geo_.num_entries);
  }
  // The row index: a bucket holds entry + 1, and 0 (zeroed memory) is empty
  // (row_index.cc).
  std::uint32_t& bucket(std::uint64_t i) const REQUIRES(this) {
    return Element<std::uint32_t>(geo_.off_buckets, i, geo_.hash_buckets);
  }
  std::uint32_t* buckets() const REQUIRES(this) {  // whole-array resets only
    return reinterpret_cast<std::uint32_t*>(base_ + geo_.off_buckets);
  }
  // Entries a scan must look at: [0, fresh_entries), at least one (the
  // stale sweep takes its hand modulo this).
  std::uint64_t UsedEntriesBound() const REQUIRES(this) {
    return std::max<std::uint64_t>(1, std::min(header().fresh_entries, geo_.num_entries));
  }
  // The eviction heap: entry indices, heap_size of them in use.
  std::uint32_t& heap_at(std::uint64_t pos) const REQUIRES(this) {
    return Element<std::uint32_t>(geo_.off_heap, pos, geo_.num_entries);
  }
  // The block after `b` in its chain (a row's blocks, or the free list).
  std::uint32_t& next_block(std::uint64_t b) const REQUIRES(this) { return next_block_unlocked(b); }
  std::uint32_t& next_block_unlocked(std::uint64_t b) const {
    return Element<std::uint32_t>(geo_.off_block_next, b, geo_.num_blocks);
  }
  // Repair's mark of blocks that belong to a row: one bit per block.
  bool BlockMarked(std::uint64_t b) const REQUIRES(this) {
    return (BitmapWord(b) >> (b % 64) & 1) != 0;
  }
  void MarkBlock(std::uint64_t b) const REQUIRES(this) {
    BitmapWord(b) |= std::uint64_t{1} << (b % 64);
  }
  void UnmarkBlock(std::uint64_t b) const REQUIRES(this) {
    BitmapWord(b) &= ~(std::uint64_t{1} << (b % 64));
  }
  std::uint64_t& BitmapWord(std::uint64_t b) const REQUIRES(this) {
    return Element<std::uint64_t>(geo_.off_bitmap, b / 64, (geo_.num_blocks + 63) / 64);
  }
  std::uint64_t* bitmap() const REQUIRES(this) {  // whole-array resets only
    return reinterpret_cast<std::uint64_t*>(base_ + geo_.off_bitmap);
  }
  // Ghosts of declined misses: row tag << 32 | ghost tick, 0 = none.
  std::uint64_t& ghost(std::uint64_t hash) const REQUIRES(this) {
    return Element<std::uint64_t>(geo_.off_ghosts, hash & (geo_.ghost_slots - 1), geo_.ghost_slots);
  }
  std::uint64_t Bucket(std::uint32_t ds, std::uint64_t row) const;
  // The hash DeclinedBefore keys a row's record by.
  static std::uint64_t GhostHash(std::uint32_t ds, std::uint64_t row);
  // The record of dataset `ds` if it exists and is self-consistent, else
  // null (and the tables marked corrupt).
  const DatasetRecord* RecordOf(std::uint32_t ds) const REQUIRES(this);
  // Follows `count - 1` links from `head`; kNone (and corrupt) if the chain
  // leaves the backed blocks.
  std::uint32_t ChainEnd(std::uint32_t head, std::uint32_t count) const REQUIRES(this);
  // The index rebuild of Repair: an entry for a row already indexed (the
  // trace of a corrupt index) is revoked, the first one stays.
  void IndexInsertOrRevoke(std::uint32_t e) REQUIRES(this);
  void SiftUp(std::uint64_t pos) REQUIRES(this);
  void SiftDown(std::uint64_t pos) REQUIRES(this);
  void HeapPlace(std::uint64_t pos, std::uint32_t e) REQUIRES(this);
  bool ValidChain(std::uint32_t head, std::uint32_t count) REQUIRES(this);  // marks the bitmap
  void DropPin(AttachRecord& a, int index) REQUIRES(this);
  void UnmarkChain(std::uint32_t head, std::uint32_t count) REQUIRES(this);
  void VerifyBacking() REQUIRES(this);

  unsigned char* base_;
  LayoutPlan geo_;
  const SegmentBacking* backing_;
  mutable std::atomic<bool> corrupt_{false};
};

// Holds the segment lock of `tables` for a scope (clang: the capability
// `tables`). Check ok() right after construction: when the lock could not be
// taken (a live holder stuck past the timeout, a broken mutex) it is not held,
// and the caller must return status() at once without touching the tables.
class SCOPED_CAPABILITY SegmentLock {
 public:
  SegmentLock(SegmentTables& tables, std::chrono::milliseconds timeout) ACQUIRE(tables)
      : tables_(tables), timeout_(timeout), status_(tables.AcquireLock(timeout)) {}
  ~SegmentLock() RELEASE() {
    if (status_.ok()) tables_.ReleaseLock();
  }
  SegmentLock(const SegmentLock&) = delete;
  SegmentLock& operator=(const SegmentLock&) = delete;

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  // Drops the lock before the end of the scope (e.g. to copy a pinned row).
  void Unlock() RELEASE() {
    if (status_.ok()) tables_.ReleaseLock();
    status_ = Status::Unavailable("cache: segment lock released");
  }
  // Takes it again; on failure return the status at once.
  Status Relock() ACQUIRE() {
    status_ = tables_.AcquireLock(timeout_);
    return status_;
  }

 private:
  SegmentTables& tables_;
  const std::chrono::milliseconds timeout_;
  Status status_;
};

}  // namespace prescient::cache::detail

#endif  // PRESCIENT_CACHE_CORE_SEGMENT_TABLES_H_
