// Entries, blocks, pins and attach records of SegmentTables.
//
// Every index read from the segment is checked before it is used (an entry,
// block, heap position, attach slot or dataset out of range): the segment is
// shared memory another process may have left half-written or that anything
// running as the user may overwrite. A bad value marks the tables corrupt;
// the operation goes on with a safe value (the row is absent, the chain is not
// freed) and the lock holder repairs the tables before releasing the lock.
#include "cache/core/segment_tables.h"

#include <time.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "cache/core/shm_sync.h"

namespace prescient::cache::detail {

Status SegmentTables::AcquireLock(std::chrono::milliseconds timeout) {
  SegmentHeader& h = raw_header();
  switch (AcquireSharedLock(&h.lock, timeout)) {
    case LockOutcome::kLocked:
      return Status::Ok();
    case LockOutcome::kRecovered:  // its holder died inside a critical section
      Repair();
      Add(h.counters.recoveries, 1);
      return Status::Ok();
    case LockOutcome::kTimedOut:
      return Status::Unavailable("cache: segment lock not acquired within " +
                                 std::to_string(timeout.count()) +
                                 " ms (a process holding it is stopped or hung)");
    case LockOutcome::kHolderStopped:
      return Status::Unavailable(
          "cache: the process holding the segment lock is stopped (SIGSTOP or a debugger)");
    case LockOutcome::kFailed:
      break;
  }
  return Status::Unavailable("cache: this process cannot name itself to the segment lock");
}

void SegmentTables::ReleaseLock() {
  SegmentHeader& h = raw_header();
  if (corrupt()) {  // something read under this hold was out of range
    Repair(/*verify_backing=*/true);
    Add(h.counters.corruptions, 1);
  }
  ReleaseSharedLock(&h.lock);
}

const DatasetRecord* SegmentTables::PublishedDataset(std::uint32_t ds) const {
  if (ds >= geo_.max_datasets) return nullptr;
  DatasetRecord& d = dataset_unlocked(ds);
  return std::atomic_ref<std::uint32_t>(d.state).load(std::memory_order_acquire) == 1 ? &d
                                                                                      : nullptr;
}

bool SegmentTables::RetiredDataset(std::uint32_t ds) const {
  if (ds >= geo_.max_datasets) return false;
  return std::atomic_ref<std::uint32_t>(dataset_unlocked(ds).state)
             .load(std::memory_order_acquire) == 2;
}

std::uint32_t SegmentTables::DatasetHints(std::uint32_t ds) const {
  const DatasetRecord* d = PublishedDataset(ds);
  if (d == nullptr) return 0;
  return std::atomic_ref<std::uint32_t>(const_cast<DatasetRecord*>(d)->hints)
      .load(std::memory_order_relaxed);
}

void SegmentTables::AddDatasetHints(std::uint32_t ds, std::uint32_t hints) const {
  const DatasetRecord* d = PublishedDataset(ds);
  if (d == nullptr) return;
  std::atomic_ref<std::uint32_t>(const_cast<DatasetRecord*>(d)->hints)
      .fetch_or(hints, std::memory_order_relaxed);
}

const DatasetRecord* SegmentTables::RecordOf(std::uint32_t ds) const {
  if (ds >= geo_.max_datasets) {
    MarkCorrupt();
    return nullptr;
  }
  const DatasetRecord& d = dataset(ds);
  const std::uint64_t blocks = (d.row_bytes + geo_.block_bytes - 1) / geo_.block_bytes;
  if (d.state == 0 || d.row_bytes == 0 || d.blocks_per_row != blocks || blocks > geo_.num_blocks) {
    MarkCorrupt();
    return nullptr;
  }
  return &d;
}

void SegmentTables::BumpAndWake(std::uint32_t e) {
  Entry& x = entry(e);
  std::atomic_ref<std::uint32_t>(x.seq).fetch_add(1, std::memory_order_release);
  if (x.waiters != 0) {
    x.waiters = 0;
    FutexWakeAll(&x.seq);
  }
}

std::uint32_t SegmentTables::Claim(std::uint32_t ds, std::uint64_t row, std::uint16_t owner) {
  SegmentHeader& h = header();
  std::uint32_t e = h.free_entry_head;
  if (e == kNone) {
    if (h.fresh_entries > geo_.num_entries) {
      MarkCorrupt();
      return kNone;
    }
    if (h.fresh_entries == geo_.num_entries) return kNone;
    e = static_cast<std::uint32_t>(h.fresh_entries);  // never used: zeroed, free
    if (entry(e).state != kEntryFree) {
      MarkCorrupt();
      return kNone;
    }
    h.fresh_entries++;
  } else {
    if (e >= geo_.num_entries || entry(e).state != kEntryFree) {
      MarkCorrupt();
      return kNone;
    }
    h.free_entry_head = entry(e).first_block;  // checked when it is popped in turn
  }
  Entry& x = entry(e);
  h.used_entries++;
  x.row = row;
  x.dataset = ds;
  x.first_block = kNone;
  x.heap_pos = kNone;
  x.owner = owner;
  x.pins = 0;
  x.key = 0;
  x.heap_key = 0;
  x.waiters = 0;
  x.state = kEntryLoading;
  IndexInsert(e);
  BumpAndWake(e);
  return e;
}

void SegmentTables::Release(std::uint32_t e) {
  SegmentHeader& h = header();
  if (e >= geo_.num_entries) {
    MarkCorrupt();
    return;
  }
  Entry& x = entry(e);
  if (x.state == kEntryFree) return;
  HeapRemove(e);
  IndexErase(e);
  const DatasetRecord* d = RecordOf(x.dataset);
  if (x.first_block != kNone && d != nullptr) FreeChain(x.first_block, d->blocks_per_row);
  if (x.state == kEntryReady && d != nullptr) {
    Add(h.counters.bytes_resident, -static_cast<std::int64_t>(d->row_bytes));
    Add(h.counters.rows_resident, -1);
  }
  x.state = kEntryFree;
  x.pins = 0;
  x.first_block = h.free_entry_head;
  h.free_entry_head = e;
  h.used_entries--;
  BumpAndWake(e);
}

void SegmentTables::Revoke(std::uint32_t e) {
  SegmentHeader& h = header();
  Entry& x = entry(e);
  if (x.state == kEntryReady) {
    HeapRemove(e);
    if (const DatasetRecord* d = RecordOf(x.dataset)) {
      Add(h.counters.bytes_resident, -static_cast<std::int64_t>(d->row_bytes));
      Add(h.counters.rows_resident, -1);
    }
    x.owner = kNoOwner;
  } else if (x.state != kEntryLoading) {
    return;
  }
  x.state = kEntryRevoked;
  if (x.owner == kNoOwner && x.pins == 0) {
    Release(e);  // wakes
  } else {
    BumpAndWake(e);
  }
}

void SegmentTables::DisownRevoked(std::uint32_t e) {
  Entry& x = entry(e);
  if (x.state != kEntryRevoked) return;
  x.owner = kNoOwner;
  if (x.pins == 0) Release(e);
}

std::uint64_t SegmentTables::DropDataset(std::uint32_t ds) {
  SegmentHeader& h = header();
  if (ds >= geo_.max_datasets) return 0;
  std::uint64_t dropped = 0;
  for (std::uint64_t i = 0; i < UsedEntriesBound(); ++i) {
    const std::uint32_t e = static_cast<std::uint32_t>(i);
    const Entry& x = entry(e);
    if (x.dataset != ds || (x.state != kEntryReady && x.state != kEntryLoading)) continue;
    Revoke(e);
    ++dropped;
  }
  std::atomic_ref<std::uint32_t>(dataset(ds).state).store(2, std::memory_order_release);
  Add(h.counters.dropped_rows, static_cast<std::int64_t>(dropped));
  return dropped;
}

void SegmentTables::MarkReady(std::uint32_t e, std::uint64_t key) {
  SegmentHeader& h = header();
  Entry& x = entry(e);
  x.key = key;
  x.state = kEntryReady;
  if (const DatasetRecord* d = RecordOf(x.dataset)) {
    Add(h.counters.bytes_resident, static_cast<std::int64_t>(d->row_bytes));
    Add(h.counters.rows_resident, 1);
  }
  HeapPush(e);
  BumpAndWake(e);
}

namespace {

constexpr std::uint64_t kPageBytes = 4096;
constexpr std::uint64_t kExtentBytes = 2 << 20;  // backed at once: a fallocate of ~1 ms
constexpr std::uint64_t kBackingRetryNs = 1'000'000'000;

std::uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace

bool SegmentTables::Grow(std::uint64_t blocks) {
  SegmentHeader& h = header();
  const std::uint64_t first = h.backed_blocks;  // read once: checked, then used
  if (first > geo_.num_blocks || h.free_blocks > first) {
    MarkCorrupt();
    return false;
  }
  const std::uint64_t block = geo_.block_bytes;
  const std::uint64_t left = geo_.num_blocks - first;
  if (blocks == 0 || left < blocks) return false;
  const std::uint64_t retry_ns = Load(h.backing_retry_ns);
  if (backing_ != nullptr && retry_ns != 0 && MonotonicNs() < retry_ns) {
    return false;
  }
  // Whole pages: blocks smaller than a page are backed a page at a time.
  const std::uint64_t per_page = block >= kPageBytes ? 1 : kPageBytes / block;
  auto round = [&](std::uint64_t n) {
    return std::min(left, (n + per_page - 1) / per_page * per_page);
  };
  std::uint64_t extent = round(std::max(blocks, kExtentBytes / block));
  if (backing_ != nullptr) {
    const std::uint64_t offset = geo_.off_data + first * block;
    bool backed = backing_->Back(offset, extent * block).ok();
    if (!backed && extent > round(blocks)) {  // nearly full: just what is needed
      extent = round(blocks);
      backed = backing_->Back(offset, extent * block).ok();
    }
    if (!backed) {
      Add(h.counters.backing_failures, 1);
      std::atomic_ref<std::uint64_t>(h.backing_retry_ns)
          .store(MonotonicNs() + kBackingRetryNs, std::memory_order_relaxed);
      return false;
    }
    std::atomic_ref<std::uint64_t>(h.backing_retry_ns).store(0, std::memory_order_relaxed);
  }
  // Chain the new blocks in address order in front of the free list, so the
  // lowest are handed out first.
  for (std::uint64_t b = first; b < first + extent; ++b) {
    next_block(b) = b + 1 < first + extent ? static_cast<std::uint32_t>(b + 1) : h.free_block_head;
  }
  h.free_block_head = static_cast<std::uint32_t>(first);
  h.free_blocks += extent;
  std::atomic_ref<std::uint64_t>(h.backed_blocks).store(first + extent, std::memory_order_relaxed);
  return true;
}

void SegmentTables::BackAhead(std::uint64_t blocks) const {
  if (backing_ == nullptr) return;
  // Only fields written atomically are read here (backed_blocks, the retry
  // time): the free list's count is plain data of the lock holder's. So the
  // extent after the backed ones is backed whenever the data area is still
  // growing: one extent (2 MiB) ahead of need at most, and once backed,
  // FileBacking's memo makes every later call (and Grow's) free.
  SegmentHeader& h = raw_header();
  const std::uint64_t retry_ns = Load(h.backing_retry_ns);
  if (retry_ns != 0 && MonotonicNs() < retry_ns) return;  // full a moment ago
  const std::uint64_t first = Load(h.backed_blocks);
  if (first >= geo_.num_blocks) return;  // all backed (or a corrupt value: Grow decides)
  const std::uint64_t block = geo_.block_bytes;
  const std::uint64_t per_page = block >= kPageBytes ? 1 : kPageBytes / block;
  const std::uint64_t left = geo_.num_blocks - first;
  const std::uint64_t want = std::max(blocks, kExtentBytes / block);
  const std::uint64_t extent = std::min(left, (want + per_page - 1) / per_page * per_page);
  // A failure (the filesystem full) is left for Grow to find and count.
  (void)backing_->Back(geo_.off_data + first * block, extent * block);
}

std::uint32_t SegmentTables::ChainEnd(std::uint32_t head, std::uint32_t count) const {
  const std::uint64_t backed = std::min(header().backed_blocks, geo_.num_blocks);
  std::uint32_t last = head;
  for (std::uint32_t i = 0;; ++i) {
    if (last >= backed) {
      MarkCorrupt();
      return kNone;
    }
    if (i + 1 >= count) return last;
    last = next_block(last);
  }
}

std::uint32_t SegmentTables::AllocChain(std::uint32_t count) {
  SegmentHeader& h = header();
  if (count == 0) return kNone;
  if (h.free_blocks < count && !Grow(count - h.free_blocks)) return kNone;
  // The free list is itself a chain: cut its first `count` blocks off.
  const std::uint32_t head = h.free_block_head;
  const std::uint32_t last = ChainEnd(head, count);
  if (last == kNone) return kNone;  // a broken free list: repaired at unlock
  h.free_block_head = next_block(last);
  next_block(last) = kNone;
  h.free_blocks -= count;
  return head;
}

void SegmentTables::FreeChain(std::uint32_t head, std::uint32_t count) {
  SegmentHeader& h = header();
  const std::uint32_t last = ChainEnd(head, count);
  if (last == kNone) return;  // a broken chain: its blocks come back at repair
  next_block(last) = h.free_block_head;
  h.free_block_head = head;
  h.free_blocks += count;
}

bool SegmentTables::CopyOutPinned(std::uint32_t e, std::byte* dest, std::uint64_t offset,
                                  std::uint64_t bytes) const {
  const std::uint64_t block = geo_.block_bytes;
  std::uint32_t b = entry_unlocked(e).first_block;
  for (std::uint64_t skip = offset / block; skip > 0; --skip) {
    if (b >= geo_.num_blocks) {
      MarkCorrupt();
      return false;
    }
    b = next_block_unlocked(b);
  }
  std::uint64_t at = offset % block;
  for (std::uint64_t left = bytes; left > 0;) {
    if (b >= geo_.num_blocks) {
      MarkCorrupt();
      return false;
    }
    const std::uint64_t n = std::min(left, block - at);
    std::memcpy(dest, block_data(b) + at, n);
    dest += n;
    left -= n;
    at = 0;
    if (left > 0) b = next_block_unlocked(b);
  }
  return true;
}

bool SegmentTables::CopyOutPinnedParts(std::uint32_t e, std::byte* dest,
                                       std::span<const RowPart> parts) const {
  const std::uint64_t block = geo_.block_bytes;
  const std::uint32_t head = entry_unlocked(e).first_block;
  std::uint32_t b = head;
  std::uint64_t b_start = 0;  // the row offset of block b's first byte
  for (const RowPart& part : parts) {
    if (part.offset < b_start) {  // not ascending: from the head again
      b = head;
      b_start = 0;
    }
    std::uint64_t at = part.offset;
    std::byte* out = dest + part.offset;
    for (std::uint64_t left = part.bytes; left > 0;) {
      if (b >= geo_.num_blocks) {
        MarkCorrupt();
        return false;
      }
      if (at >= b_start + block) {
        b = next_block_unlocked(b);
        b_start += block;
        continue;
      }
      const std::uint64_t in = at - b_start;
      const std::uint64_t n = std::min(left, block - in);
      std::memcpy(out, block_data(b) + in, n);
      out += n;
      at += n;
      left -= n;
    }
  }
  return true;
}

bool SegmentTables::CopyInOwned(std::uint32_t e, const std::byte* source,
                                std::uint64_t row_bytes) const {
  bool copied = false;
  CopyInOwnedRows({&e, 1}, {&source, 1}, row_bytes, {&copied, 1});
  return copied;
}

void SegmentTables::CopyInOwnedRows(std::span<const std::uint32_t> entries,
                                    std::span<const std::byte* const> sources,
                                    std::uint64_t row_bytes, std::span<bool> copied) const {
  const std::uint64_t block = geo_.block_bytes;
  // A run of adjacent blocks: written through the file when it spans a page
  // (see SegmentBacking::WriteThrough), else through the mapping (a label's
  // few bytes share a page already faulted in). Filler pieces (the unused
  // tail of a row's last block, between two rows) are skipped by the mapping
  // copy.
  struct Piece {
    const std::byte* source;
    std::uint64_t bytes;
    bool filler;
  };
  thread_local std::vector<Piece> pieces;
  thread_local std::vector<struct iovec> vectors;
  pieces.clear();
  std::uint64_t run_first = 0;  // the run's first block
  std::uint64_t run_bytes = 0;
  auto flush = [&] {
    if (run_bytes == 0) return;
    const std::uint64_t offset = geo_.off_data + run_first * block;
    vectors.clear();
    for (const Piece& p : pieces) {
      vectors.push_back({const_cast<std::byte*>(p.source), static_cast<std::size_t>(p.bytes)});
    }
    if (run_bytes < kPageBytes || backing_ == nullptr || !backing_->WriteThrough(offset, vectors)) {
      std::uint64_t at = offset;
      for (const Piece& p : pieces) {
        if (!p.filler) std::memcpy(base_ + at, p.source, p.bytes);
        at += p.bytes;
      }
    }
    pieces.clear();
    run_bytes = 0;
  };
  for (std::size_t i = 0; i < entries.size(); ++i) {
    // The whole chain is checked before any of it joins a run: a broken row
    // writes nothing.
    const std::uint32_t head = entry_unlocked(entries[i]).first_block;
    const std::uint64_t blocks = row_bytes == 0 ? 0 : (row_bytes + block - 1) / block;
    bool whole = true;
    std::uint32_t b = head;
    for (std::uint64_t k = 0; k < blocks; ++k, b = next_block_unlocked(b)) {
      if (b >= geo_.num_blocks) {
        whole = false;
        break;
      }
    }
    copied[i] = whole;
    if (!whole) {
      MarkCorrupt();
      continue;
    }
    const std::byte* source = sources[i];
    std::uint64_t left = row_bytes;
    for (b = head; left > 0; b = next_block_unlocked(b)) {
      const std::uint64_t n = left < block ? left : block;
      const bool adjacent =
          run_bytes != 0 && run_bytes % block == 0 && b == run_first + run_bytes / block;
      // The previous row ended inside its last block, and this row's chain
      // goes on in the next one: fill that block's tail, from any bytes of
      // this row long enough.
      const std::uint64_t tail = run_bytes % block == 0 ? 0 : block - run_bytes % block;
      const bool after_tail = tail != 0 && tail <= row_bytes && left == row_bytes &&
                              b == run_first + run_bytes / block + 1;
      if (after_tail) {
        pieces.push_back({source, tail, true});
        run_bytes += tail;
      } else if (!adjacent) {
        flush();
        run_first = b;
      }
      pieces.push_back({source, n, false});
      run_bytes += n;
      source += n;
      left -= n;
    }
  }
  flush();
}

int SegmentTables::Pin(std::uint16_t slot, std::uint32_t e) {
  AttachRecord& a = attach(slot);
  if (a.pins_used >= kPinsPerAttach) ReapDonePins(slot);
  if (a.pins_used >= kPinsPerAttach) return -1;
  for (int i = 0; i < static_cast<int>(kPinsPerAttach); ++i) {
    std::uint32_t& p = a.pin[i];
    if (p != kNone) continue;
    p = e;  // the record first: Repair() recounts pins from these
    a.pins_used++;
    entry(e).pins++;  // stays in the heap: MakeRoom skips pinned rows
    return i;
  }
  return -1;
}

void SegmentTables::DropPin(AttachRecord& a, int i) {
  const std::uint32_t e = a.pin[i];
  a.pin[i] = kNone;
  if (a.pins_used > 0) a.pins_used--;
  std::atomic_ref<std::uint64_t>(a.pins_done)
      .fetch_and(~(std::uint64_t{1} << i), std::memory_order_relaxed);
  if (e >= geo_.num_entries) {
    MarkCorrupt();
    return;
  }
  Entry& x = entry(e);
  if (x.pins > 0) x.pins--;
  if (x.state == kEntryRevoked && x.pins == 0 && x.owner == kNoOwner) Release(e);
}

void SegmentTables::Unpin(std::uint16_t slot, std::uint32_t e) {
  AttachRecord& a = attach(slot);
  for (int i = 0; i < static_cast<int>(kPinsPerAttach); ++i) {
    if (a.pin[i] != e) continue;
    DropPin(a, i);
    return;
  }
}

void SegmentTables::PinDone(std::uint16_t slot, int index) const {
  AttachRecord& a = reinterpret_cast<AttachRecord*>(base_ + geo_.off_attach)[slot];
  // Release: the copy-out happens-before whoever drops the pin and reuses the blocks.
  std::atomic_ref<std::uint64_t>(a.pins_done)
      .fetch_or(std::uint64_t{1} << index, std::memory_order_release);
}

void SegmentTables::ReapDonePins(std::uint32_t slot) {
  const std::uint32_t first = slot < kMaxAttach ? slot : 0;
  const std::uint32_t last = slot < kMaxAttach ? slot + 1 : kMaxAttach;
  for (std::uint32_t s = first; s < last; ++s) {
    AttachRecord& a = attach(s);
    std::uint64_t done =
        std::atomic_ref<std::uint64_t>(a.pins_done).load(std::memory_order_acquire);
    while (done != 0) {
      const int i = std::countr_zero(done);
      done &= done - 1;
      if (a.pin[i] != kNone) {
        DropPin(a, i);
      } else {
        std::atomic_ref<std::uint64_t>(a.pins_done)
            .fetch_and(~(std::uint64_t{1} << i), std::memory_order_relaxed);
      }
    }
  }
}

Result<std::uint16_t> SegmentTables::Attach(const ProcessIdentity& self, std::uint32_t flags) {
  for (int pass = 0; pass < 2; ++pass) {
    for (std::uint32_t s = 0; s < kMaxAttach; ++s) {
      AttachRecord& a = attach(s);
      if (a.pid != 0) continue;
      a.start_time = self.start_time;
      a.flags = flags;
      a.pins_used = 0;
      std::atomic_ref<std::uint64_t>(a.pins_done).store(0, std::memory_order_relaxed);
      for (std::uint32_t& p : a.pin) p = kNone;
      std::atomic_ref<std::int32_t>(a.pid).store(self.pid, std::memory_order_release);
      return static_cast<std::uint16_t>(s);
    }
    ReapDead();
  }
  return Status::ResourceExhausted("cache: more than " + std::to_string(kMaxAttach) +
                                   " live processes attached to the segment");
}

void SegmentTables::ReleaseAttachment(std::uint16_t slot, bool died) {
  if (slot >= kMaxAttach) {
    MarkCorrupt();
    return;
  }
  AttachRecord& a = attach(slot);
  for (int i = 0; i < static_cast<int>(kPinsPerAttach); ++i) {
    if (a.pin[i] != kNone) DropPin(a, i);
  }
  a.pins_used = 0;
  std::atomic_ref<std::uint64_t>(a.pins_done).store(0, std::memory_order_relaxed);
  // Its claims: a scan, but only when a process leaves or died.
  for (std::uint64_t i = 0; i < UsedEntriesBound(); ++i) {
    Entry& x = entry(static_cast<std::uint32_t>(i));
    if (x.state == kEntryLoading && x.owner == slot) {
      Release(static_cast<std::uint32_t>(i));
      if (died) Add(header().counters.takeovers, 1);
    } else if (x.state == kEntryRevoked && x.owner == slot) {
      DisownRevoked(static_cast<std::uint32_t>(i));
    }
  }
  std::atomic_ref<std::int32_t>(a.pid).store(0, std::memory_order_release);
  a.start_time = 0;
}

bool SegmentTables::AnyAttachedAliveUnlocked(std::int32_t except) const {
  const auto* records = reinterpret_cast<AttachRecord*>(base_ + geo_.off_attach);
  for (std::uint32_t s = 0; s < kMaxAttach; ++s) {
    AttachRecord& a = const_cast<AttachRecord&>(records[s]);
    const std::int32_t pid = std::atomic_ref<std::int32_t>(a.pid).load(std::memory_order_acquire);
    if (pid != 0 && pid != except &&
        IsAlive({pid, std::atomic_ref<std::uint64_t>(a.start_time).load()})) {
      return true;
    }
  }
  return false;
}

std::uint32_t SegmentTables::ReapDead() {
  std::uint32_t live = 0;
  for (std::uint32_t s = 0; s < kMaxAttach; ++s) {
    const AttachRecord& a = attach(s);
    if (a.pid == 0) continue;
    if (IsAlive({a.pid, a.start_time})) {
      ++live;
    } else {
      ReleaseAttachment(static_cast<std::uint16_t>(s), /*died=*/true);
    }
  }
  return live;
}

}  // namespace prescient::cache::detail
