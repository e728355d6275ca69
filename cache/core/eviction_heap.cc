// The eviction heap of SegmentTables and the admission rule built on it.
#include "cache/core/eviction_keys.h"
#include "cache/core/segment_tables.h"

namespace prescient::cache::detail {

void SegmentTables::HeapPlace(std::uint64_t pos, std::uint32_t e) {
  heap()[pos] = e;
  entry(e).heap_pos = static_cast<std::uint32_t>(pos);
}

void SegmentTables::SiftUp(std::uint64_t pos) {
  std::uint32_t* h = heap();
  const std::uint32_t e = h[pos];
  const std::uint64_t key = entry(e).heap_key;
  while (pos > 0) {
    const std::uint64_t parent = (pos - 1) / 2;
    if (entry(h[parent]).heap_key >= key) break;
    HeapPlace(pos, h[parent]);
    pos = parent;
  }
  HeapPlace(pos, e);
}

void SegmentTables::SiftDown(std::uint64_t pos) {
  std::uint32_t* h = heap();
  const std::uint64_t size = header().heap_size;
  const std::uint32_t e = h[pos];
  const std::uint64_t key = entry(e).heap_key;
  for (;;) {
    std::uint64_t child = 2 * pos + 1;
    if (child >= size) break;
    if (child + 1 < size && entry(h[child + 1]).heap_key > entry(h[child]).heap_key) ++child;
    if (entry(h[child]).heap_key <= key) break;
    HeapPlace(pos, h[child]);
    pos = child;
  }
  HeapPlace(pos, e);
}

void SegmentTables::HeapPush(std::uint32_t e) {
  if (entry(e).heap_pos != kNone) return;
  entry(e).heap_key = entry(e).key;
  const std::uint64_t pos = header().heap_size++;
  HeapPlace(pos, e);
  SiftUp(pos);
}

void SegmentTables::HeapRemove(std::uint32_t e) {
  const std::uint32_t pos = entry(e).heap_pos;
  if (pos == kNone) return;
  entry(e).heap_pos = kNone;
  const std::uint64_t last = --header().heap_size;
  if (pos == last) return;
  HeapPlace(pos, heap()[last]);
  // The moved element belongs either above or below `pos`; at most one sift moves it.
  SiftUp(pos);
  SiftDown(pos);
}

void SegmentTables::SetKey(std::uint32_t e, std::uint64_t key) {
  Entry& x = entry(e);
  x.key = key;
  if (x.heap_pos != kNone && key > x.heap_key) {
    x.heap_key = key;
    SiftUp(x.heap_pos);
  }
}

std::uint32_t SegmentTables::HeapTop() {
  while (header().heap_size > 0) {
    Entry& top = entry(heap()[0]);
    if (top.key == top.heap_key) return heap()[0];
    top.heap_key = top.key;  // lowered since it was sifted: push it down now
    SiftDown(0);
  }
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
    const std::uint32_t victim = HeapTop();
    if (victim == kNone) {  // everything left is pinned or loading
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
    const std::uint32_t e = static_cast<std::uint32_t>(h.sweep_hand % h.num_entries);
    h.sweep_hand = e + 1;
    const Entry& x = entry(e);
    if (x.state == kEntryReady && IsScheduledKey(x.key) && x.key < now) SetKey(e, kStaleKey);
  }
}

}  // namespace prescient::cache::detail
