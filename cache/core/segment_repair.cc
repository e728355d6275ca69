// SegmentTables::Repair: recovery after a process died inside a critical
// section (the robust mutex reported EOWNERDEAD), after a value read under
// the lock was out of range (a corrupt segment), or when a kept segment is
// reused.
//
// Critical sections never leave the entry array itself half-valid in a way
// that matters: an entry's fields are written before its state says it is
// usable, and blocks are chained before first_block points at them. Whatever
// else a dead process was doing (a half-done heap sift, a free-list pop, a
// half-shifted hash run, a pin count) lives in derived structures, so repair
// = validate entries, then rebuild everything else. Every value it reads is
// checked against the geometry this process validated at open (never the
// header's), so repair is safe on arbitrary bytes. Cost O(entries + blocks),
// about 10 ms per GiB of 4 KiB blocks; it runs only after a crash or a
// corruption.
#include <algorithm>
#include <cstring>

#include "cache/core/segment_tables.h"

namespace prescient::cache::detail {

bool SegmentTables::ValidChain(std::uint32_t head, std::uint32_t count) {
  const std::uint64_t backed = std::min(header().backed_blocks, geo_.num_blocks);
  std::uint32_t b = head;
  std::uint32_t marked = 0;
  bool ok = true;
  if (count > geo_.num_blocks) count = static_cast<std::uint32_t>(geo_.num_blocks);
  for (; marked < count; ++marked) {
    if (b >= backed || BlockMarked(b)) {
      ok = false;
      break;
    }
    MarkBlock(b);
    b = next_block(b);
  }
  if (ok) return true;
  // Unmark the prefix we claimed: those blocks belong to nobody now.
  UnmarkChain(head, marked);
  return false;
}

void SegmentTables::UnmarkChain(std::uint32_t head, std::uint32_t count) {
  const std::uint64_t backed = std::min(header().backed_blocks, geo_.num_blocks);
  std::uint32_t b = head;
  if (count > geo_.num_blocks) count = static_cast<std::uint32_t>(geo_.num_blocks);
  for (std::uint32_t i = 0; i < count && b < backed; ++i) {
    UnmarkBlock(b);
    b = next_block(b);
  }
}

void SegmentTables::VerifyBacking() {
  // The recorded extent may be larger than what was really backed (a corrupt
  // header): back it again, extent by extent (idempotent where it is), and
  // keep only the prefix that is backed now, so no free block is a hole a
  // write could fault on with SIGBUS.
  SegmentHeader& h = header();
  if (backing_ == nullptr) return;
  constexpr std::uint64_t kStepBytes = 64 << 20;
  const std::uint64_t step = std::max<std::uint64_t>(1, kStepBytes / geo_.block_bytes);
  // Read once: the header may change under a writer that ignores the lock.
  const std::uint64_t recorded = std::min(h.backed_blocks, geo_.num_blocks);
  std::uint64_t good = 0;
  while (good < recorded) {
    const std::uint64_t n = std::min(step, recorded - good);
    if (!backing_->Back(geo_.off_data + good * geo_.block_bytes, n * geo_.block_bytes).ok()) break;
    good += n;
  }
  h.backed_blocks = good;
}

void SegmentTables::Repair(bool verify_backing) {
  SegmentHeader& h = header();
  const std::uint64_t n = geo_.num_entries;
  corrupt_.store(false, std::memory_order_relaxed);

  // 0. The backed part of the data area (blocks beyond it are a hole).
  if (h.backed_blocks > geo_.num_blocks) {
    h.backed_blocks = geo_.num_blocks;
    verify_backing = true;
  }
  if (verify_backing) VerifyBacking();
  std::atomic_ref<std::uint64_t>(h.backing_retry_ns).store(0, std::memory_order_relaxed);

  // 1. Datasets: only complete, self-consistent records stay usable.
  for (std::uint32_t i = 0; i < geo_.max_datasets; ++i) {
    DatasetRecord& d = dataset(i);
    if (d.state == 0 || d.state == 2) continue;
    const std::uint64_t expect = (d.row_bytes + geo_.block_bytes - 1) / geo_.block_bytes;
    if (d.state != 1 || d.row_bytes == 0 || d.blocks_per_row != expect ||
        expect > geo_.num_blocks) {
      d.state = 2;  // retired: keeps its probe chain, never matches again
    }
  }

  // 2. Processes: dead ones lose their slot (their claims are validated below).
  for (std::uint32_t s = 0; s < kMaxAttach; ++s) {
    AttachRecord& a = attach(s);
    if (a.pid != 0 && !IsAlive({a.pid, a.start_time})) {
      a.pid = 0;
      a.start_time = 0;
    }
  }

  // 3. Entries: keep those whose dataset, owner and block chain check out.
  // An entry whose row is gone but whose blocks a live process may still be
  // writing (its claim) or reading (a pin) becomes Revoked instead of free.
  std::memset(bitmap(), 0, (geo_.num_blocks + 63) / 64 * 8);
  auto free_entry = [](Entry& x) {
    x.state = kEntryFree;
    x.waiters = 1;  // wake anyone who slept on it: it is gone
  };
  for (std::uint64_t i = 0; i < n; ++i) {
    Entry& x = entry(static_cast<std::uint32_t>(i));
    x.heap_pos = kNone;
    x.pins = 0;
    const std::uint8_t state = x.state;
    if (state != kEntryReady && state != kEntryLoading && state != kEntryRevoked) {
      x.state = kEntryFree;
      continue;
    }
    const bool live_owner = x.owner < kMaxAttach && attach(x.owner).pid != 0;
    if (state == kEntryLoading && !live_owner) {  // a dead loader's claim
      Add(h.counters.takeovers, 1);
      free_entry(x);
      continue;
    }
    const bool record = x.dataset < geo_.max_datasets && dataset(x.dataset).state != 0;
    const bool in_use =
        record && dataset(x.dataset).state == 1 && x.row < dataset(x.dataset).num_rows;
    const bool has_blocks = state == kEntryReady || x.first_block != kNone;
    if (has_blocks && !(record && ValidChain(x.first_block, dataset(x.dataset).blocks_per_row))) {
      if (state == kEntryReady) {
        free_entry(x);
        continue;
      }
      x.first_block = kNone;  // a broken chain: nobody may use those blocks
    }
    if (state == kEntryRevoked && !live_owner) x.owner = kNoOwner;
    if (state != kEntryRevoked && !in_use) {
      if (state == kEntryReady) x.owner = kNoOwner;
      x.state = kEntryRevoked;
      x.waiters = 1;
    }
  }

  // 4. Pins, from the surviving processes' pin records. Pins whose copy-out
  // finished are dropped.
  for (std::uint32_t s = 0; s < kMaxAttach; ++s) {
    AttachRecord& a = attach(s);
    a.pins_used = 0;
    const std::uint64_t done =
        std::atomic_ref<std::uint64_t>(a.pins_done).exchange(0, std::memory_order_acquire);
    for (std::uint32_t i = 0; i < kPinsPerAttach; ++i) {
      std::uint32_t& p = a.pin[i];
      if ((done >> i & 1) != 0) p = kNone;
      if (a.pid == 0 || p >= n ||
          (entry(p).state != kEntryReady && entry(p).state != kEntryRevoked)) {
        p = kNone;
        continue;
      }
      entry(p).pins++;
      a.pins_used++;
    }
  }

  // 5. One live entry per row: a corrupt index can have let a row be claimed
  // twice; the later entry is revoked.
  std::memset(buckets(), 0, geo_.hash_buckets * sizeof(std::uint32_t));  // empty
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint32_t e = static_cast<std::uint32_t>(i);
    if (entry(e).state != kEntryFree) IndexInsertOrRevoke(e);
  }

  // 6. Revoked entries nobody owns or pins any more: their blocks are free.
  for (std::uint64_t i = 0; i < n; ++i) {
    Entry& x = entry(static_cast<std::uint32_t>(i));
    if (x.state != kEntryRevoked || x.owner != kNoOwner || x.pins != 0) continue;
    if (x.first_block != kNone && x.dataset < geo_.max_datasets) {
      UnmarkChain(x.first_block, dataset(x.dataset).blocks_per_row);
    }
    free_entry(x);
  }

  // 7. Derived structures: free lists, index, heap, resident counts.
  h.free_block_head = kNone;
  h.free_blocks = 0;
  for (std::uint64_t b = std::min(h.backed_blocks, geo_.num_blocks); b-- > 0;) {
    if (BlockMarked(b)) continue;
    next_block(b) = h.free_block_head;
    h.free_block_head = static_cast<std::uint32_t>(b);
    h.free_blocks++;
  }
  std::memset(buckets(), 0, geo_.hash_buckets * sizeof(std::uint32_t));  // empty
  h.free_entry_head = kNone;
  h.fresh_entries = n;  // every free entry goes on the list below
  h.used_entries = 0;
  h.heap_size = 0;
  std::uint64_t bytes = 0, rows = 0;
  for (std::uint64_t i = n; i-- > 0;) {
    const std::uint32_t e = static_cast<std::uint32_t>(i);
    Entry& x = entry(e);
    if (x.state == kEntryFree) {
      x.first_block = h.free_entry_head;
      h.free_entry_head = e;
      continue;
    }
    h.used_entries++;
    IndexInsert(e);
    if (x.state == kEntryReady) {
      HeapPush(e);
      bytes += dataset(x.dataset).row_bytes;
      ++rows;
    }
  }
  std::atomic_ref<std::uint64_t>(h.counters.bytes_resident).store(bytes);
  std::atomic_ref<std::uint64_t>(h.counters.rows_resident).store(rows);

  // 8. Everyone asleep on an entry re-checks what it waits for.
  for (std::uint64_t i = 0; i < n; ++i) {
    if (entry(static_cast<std::uint32_t>(i)).waiters != 0) {
      BumpAndWake(static_cast<std::uint32_t>(i));
    }
  }
  // Nothing above can mark the tables corrupt again: every value is checked
  // first. (If it did, the next unlock would repair once more.)
}

}  // namespace prescient::cache::detail
