// The eviction heap of SegmentTables and the admission rule built on it.
#include <algorithm>

#include "cache/core/eviction_keys.h"
#include "cache/core/segment_tables.h"

namespace prescient::cache::detail {

// Heap positions and the entries stored at them are checked against the
// geometry (a corrupt heap stops a sift, marks the tables corrupt, and is
// rebuilt by Repair before the lock is released).
void SegmentTables::HeapPlace(std::uint64_t pos, std::uint32_t e) {
  heap_at(pos) = e;
  entry(e).heap_pos = static_cast<std::uint32_t>(pos);
}

void SegmentTables::SiftUp(std::uint64_t pos) {
  const std::uint32_t e = heap_at(pos);
  const std::uint64_t key = entry(e).heap_key;
  while (pos > 0 && !corrupt()) {
    const std::uint64_t parent = (pos - 1) / 2;
    const std::uint32_t above = heap_at(parent);
    if (above >= geo_.num_entries) {
      MarkCorrupt();
      break;
    }
    if (entry(above).heap_key >= key) break;
    HeapPlace(pos, above);
    pos = parent;
  }
  HeapPlace(pos, e);
}

void SegmentTables::SiftDown(std::uint64_t pos) {
  const std::uint64_t size = std::min(header().heap_size, geo_.num_entries);
  const std::uint32_t e = heap_at(pos);
  const std::uint64_t key = entry(e).heap_key;
  while (!corrupt()) {
    std::uint64_t child = 2 * pos + 1;
    if (child >= size) break;
    std::uint32_t below = heap_at(child);
    const std::uint32_t right = child + 1 < size ? heap_at(child + 1) : kNone;
    if (below >= geo_.num_entries || (child + 1 < size && right >= geo_.num_entries)) {
      MarkCorrupt();
      break;
    }
    if (child + 1 < size && entry(right).heap_key > entry(below).heap_key) {
      ++child;
      below = right;
    }
    if (entry(below).heap_key <= key) break;
    HeapPlace(pos, below);
    pos = child;
  }
  HeapPlace(pos, e);
}

void SegmentTables::HeapPush(std::uint32_t e) {
  if (entry(e).heap_pos != kNone) return;
  if (header().heap_size >= geo_.num_entries) {
    MarkCorrupt();
    return;
  }
  entry(e).heap_key = entry(e).key;
  const std::uint64_t pos = header().heap_size++;  // checked again by heap_at
  HeapPlace(pos, e);
  SiftUp(pos);
}

void SegmentTables::HeapRemove(std::uint32_t e) {
  const std::uint32_t pos = entry(e).heap_pos;
  if (pos == kNone) return;
  entry(e).heap_pos = kNone;
  const std::uint64_t size = header().heap_size;
  if (size == 0 || size > geo_.num_entries || pos >= size || heap_at(pos) != e ||
      heap_at(size - 1) >= geo_.num_entries) {
    MarkCorrupt();
    return;
  }
  const std::uint64_t last = size - 1;
  header().heap_size = last;
  if (pos == last) return;
  HeapPlace(pos, heap_at(last));
  // The moved element belongs either above or below `pos`; at most one sift moves it.
  SiftUp(pos);
  SiftDown(pos);
}

void SegmentTables::SetKey(std::uint32_t e, std::uint64_t key) {
  Entry& x = entry(e);
  x.key = key;
  const std::uint32_t pos = x.heap_pos;
  if (pos != kNone && key > x.heap_key) {
    if (pos >= header().heap_size || header().heap_size > geo_.num_entries || heap_at(pos) != e) {
      MarkCorrupt();
      return;
    }
    x.heap_key = key;
    SiftUp(pos);
  }
}

std::uint32_t SegmentTables::HeapTop() {
  if (header().heap_size > geo_.num_entries) {
    MarkCorrupt();
    return kNone;
  }
  // Each round either returns or pushes a lowered key down: bounded by the
  // heap size (a key lowered again meanwhile would need a concurrent writer).
  for (std::uint64_t rounds = 0; header().heap_size > 0 && rounds <= geo_.num_entries; ++rounds) {
    const std::uint32_t e = heap_at(0);
    if (e >= geo_.num_entries) break;
    Entry& top = entry(e);
    if (top.key == top.heap_key) return e;
    top.heap_key = top.key;  // lowered since it was sifted: push it down now
    SiftDown(0);
  }
  if (header().heap_size > 0) MarkCorrupt();
  return kNone;
}

bool SegmentTables::MakeRoom(std::uint32_t blocks, std::uint64_t incoming_key) {
  SegmentHeader& h = header();
  // Pinned rows met at the top are set aside and put back afterwards.
  constexpr int kMaxSkipped = 256;
  std::uint32_t skipped[kMaxSkipped];
  int num_skipped = 0;
  bool reaped = false;
  bool ok = true;
  // Unbacked space first: growing costs no row.
  if (h.free_blocks < blocks) Grow(blocks - h.free_blocks);
  while (h.free_blocks < blocks) {
    const std::uint32_t victim = corrupt() ? kNone : HeapTop();
    if (victim == kNone) {  // everything left is pinned or loading (or the heap is broken)
      ok = false;
      break;
    }
    if (entry(victim).state != kEntryReady) {  // only Ready rows belong in the heap
      MarkCorrupt();
      ok = false;
      break;
    }
    if (entry(victim).pins > 0 && !reaped) {
      // Pins whose copy-out has finished are only dropped lazily: drop them
      // now (every process's), then look at the victim again.
      ReapDonePins(kMaxAttach);
      reaped = true;
      if (entry(victim).pins == 0) continue;
    }
    if (entry(victim).pins > 0) {
      if (num_skipped == kMaxSkipped) {
        ok = false;
        break;
      }
      HeapRemove(victim);
      skipped[num_skipped++] = victim;
      continue;
    }
    if (entry(victim).key <= incoming_key) {  // Belady: keep what is needed sooner
      ok = false;
      break;
    }
    Release(victim);
    Add(h.counters.evictions, 1);
  }
  for (int i = 0; i < num_skipped; ++i) HeapPush(skipped[i]);
  return ok;
}

void SegmentTables::SweepStale(std::uint64_t now, std::uint32_t count) {
  SegmentHeader& h = header();
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint32_t e = static_cast<std::uint32_t>(h.sweep_hand % UsedEntriesBound());
    h.sweep_hand = e + 1;
    const Entry& x = entry(e);
    if (x.state == kEntryReady && IsScheduledKey(x.key) && x.key < now) SetKey(e, kStaleKey);
  }
}

}  // namespace prescient::cache::detail
