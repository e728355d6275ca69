// SegmentTables: the operations on a mapped segment's tables. A thin view
// (one pointer); every method REQUIRES the segment lock unless it says so.
//
// The entry array is the source of truth. The row index (open addressing,
// linear probing, backward-shift deletion), the eviction heap, the block and
// entry free lists and the pin counts are derived from it and from the attach
// records, so Repair() can rebuild them after a process died half-way through
// any critical section (see segment_repair.cc).
#ifndef PRESCIENT_CACHE_CORE_SEGMENT_TABLES_H_
#define PRESCIENT_CACHE_CORE_SEGMENT_TABLES_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cache/base/status.h"
#include "cache/core/dataset_key.h"
#include "cache/core/process_identity.h"
#include "cache/core/segment_layout.h"

namespace prescient::cache::detail {

class SegmentTables {
 public:
  explicit SegmentTables(void* base) : base_(static_cast<unsigned char*>(base)) {}

  SegmentHeader& header() const { return *reinterpret_cast<SegmentHeader*>(base_); }
  DatasetRecord& dataset(std::uint32_t i) const {
    return reinterpret_cast<DatasetRecord*>(base_ + header().off_datasets)[i];
  }
  AttachRecord& attach(std::uint32_t i) const {
    return reinterpret_cast<AttachRecord*>(base_ + header().off_attach)[i];
  }
  Entry& entry(std::uint32_t i) const {
    return reinterpret_cast<Entry*>(base_ + header().off_entries)[i];
  }
  std::byte* block_data(std::uint32_t b) const {
    return reinterpret_cast<std::byte*>(base_ + header().off_data +
                                        std::uint64_t{b} * header().block_bytes);
  }

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
                                       std::uint64_t num_rows);

  // --- row index ---
  std::uint32_t Find(std::uint32_t ds, std::uint64_t row) const;  // kNone if absent
  void IndexInsert(std::uint32_t e);
  void IndexErase(std::uint32_t e);

  // --- entries ---
  // A free entry set to Loading(ds, row, owner) and indexed; kNone if none is free.
  std::uint32_t Claim(std::uint32_t ds, std::uint64_t row, std::uint16_t owner);
  // Any state -> Free: unindexed, out of the heap, blocks released, waiters woken.
  void Release(std::uint32_t e);
  // Loading -> Ready with `key`: counted resident, in the eviction heap.
  void MarkReady(std::uint32_t e, std::uint64_t key);
  // Bumps the entry's futex word and wakes its sleepers, if any.
  void BumpAndWake(std::uint32_t e);

  // --- eviction heap: a max-heap of every Ready row on Entry::heap_key ---
  // A key that grows is sifted at once (the row may now be the best victim);
  // a key that shrinks (an LRU hit, the common case) is only recorded, and
  // fixed when the row reaches the top: hits cost O(1), not O(log n).
  void HeapPush(std::uint32_t e);
  void HeapRemove(std::uint32_t e);
  void SetKey(std::uint32_t e, std::uint64_t key);
  // The row with the largest current key (freshens stale tops); kNone if empty.
  std::uint32_t HeapTop();

  // --- blocks ---
  std::uint32_t AllocChain(std::uint32_t count);  // kNone if fewer free
  void FreeChain(std::uint32_t head, std::uint32_t count);
  void CopyOut(std::uint32_t e, std::byte* dest) const;         // lock not needed if pinned
  void CopyIn(std::uint32_t e, const std::byte* source) const;  // lock not needed if Loading

  // --- eviction and admission ---
  // Evicts unpinned rows with a key larger than incoming_key until `blocks`
  // are free.
  // False (and nothing more evicted) when that would need a row with a key
  // <= incoming_key: the incoming row is not worth admitting.
  bool MakeRoom(std::uint32_t blocks, std::uint64_t incoming_key);
  // Looks at `count` entries round-robin; scheduled rows whose predicted use
  // lies before `now` get kStaleKey. Amortised cleanup, O(count).
  void SweepStale(std::uint64_t now, std::uint32_t count);

  // --- pins ---
  bool Pin(std::uint16_t slot, std::uint32_t e);  // false if the slot's pin table is full
  void Unpin(std::uint16_t slot, std::uint32_t e);

  // --- processes ---
  // A free attach slot for `self`; reaps dead processes first if the table is full.
  Result<std::uint16_t> Attach(const ProcessIdentity& self);
  // Drops the slot's pins and claims (their rows are freed, waiters woken)
  // and frees the slot. `died`: count the claims as takeovers.
  void ReleaseAttachment(std::uint16_t slot, bool died);
  // ReleaseAttachment for every attached process that is no longer alive.
  // Returns how many live processes remain attached.
  std::uint32_t ReapDead();
  ProcessIdentity AttachedIdentity(std::uint16_t slot) const {
    return {attach(slot).pid, attach(slot).start_time};
  }

  // --- recovery (segment_repair.cc) ---
  // Rebuilds every derived structure from the entry array after a process died
  // holding the lock; drops entries that fail validation. Idempotent.
  void Repair();

 private:
  std::uint32_t* buckets() const {
    return reinterpret_cast<std::uint32_t*>(base_ + header().off_buckets);
  }
  std::uint32_t* heap() const {
    return reinterpret_cast<std::uint32_t*>(base_ + header().off_heap);
  }
  std::uint32_t* block_next() const {
    return reinterpret_cast<std::uint32_t*>(base_ + header().off_block_next);
  }
  std::uint64_t* bitmap() const {
    return reinterpret_cast<std::uint64_t*>(base_ + header().off_bitmap);
  }
  std::uint64_t Bucket(std::uint32_t ds, std::uint64_t row) const;
  void SiftUp(std::uint64_t pos);
  void SiftDown(std::uint64_t pos);
  void HeapPlace(std::uint64_t pos, std::uint32_t e);
  bool ValidChain(std::uint32_t head, std::uint32_t count);  // marks the bitmap

  unsigned char* base_;
};

}  // namespace prescient::cache::detail

#endif  // PRESCIENT_CACHE_CORE_SEGMENT_TABLES_H_
