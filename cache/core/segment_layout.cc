#include "cache/core/segment_layout.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "cache/core/shm_sync.h"

namespace prescient::cache::detail {
namespace {

constexpr std::uint64_t kPage = 4096;

constexpr std::uint64_t AlignUp(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

std::uint64_t NextPowerOfTwo(std::uint64_t value) {
  std::uint64_t p = 1;
  while (p < value) p <<= 1;
  return p;
}

// Lays out every array for `num_blocks`; returns the total size in p->segment_bytes.
void Place(LayoutPlan* p, std::uint64_t num_blocks, std::uint64_t max_rows) {
  p->num_blocks = num_blocks;
  p->num_entries = max_rows != 0 ? max_rows : num_blocks + num_blocks / 16 + 16;
  p->hash_buckets = NextPowerOfTwo(p->num_entries * 2);
  std::uint64_t at = AlignUp(sizeof(SegmentHeader), 64);
  p->off_datasets = at;
  at = AlignUp(at + std::uint64_t{p->max_datasets} * sizeof(DatasetRecord), 64);
  p->off_attach = at;
  at = AlignUp(at + std::uint64_t{kMaxAttach} * sizeof(AttachRecord), 64);
  p->off_participants = at;
  at = AlignUp(at + std::uint64_t{kMaxParticipants} * sizeof(ParticipantRecord), 64);
  p->off_entries = at;
  at = AlignUp(at + p->num_entries * sizeof(Entry), 64);
  p->off_buckets = at;
  at = AlignUp(at + p->hash_buckets * sizeof(std::uint32_t), 64);
  p->off_heap = at;
  at = AlignUp(at + p->num_entries * sizeof(std::uint32_t), 64);
  p->off_block_next = at;
  at = AlignUp(at + num_blocks * sizeof(std::uint32_t), 64);
  p->off_bitmap = at;
  at = AlignUp(at + (num_blocks + 63) / 64 * 8, 64);
  p->ghost_slots = std::max<std::uint64_t>(1024, NextPowerOfTwo(p->num_entries / 16));
  p->off_ghosts = at;
  at = AlignUp(at + p->ghost_slots * sizeof(std::uint64_t), kPage);
  p->off_data = at;
  p->segment_bytes = at + num_blocks * p->block_bytes;
}

}  // namespace

Result<LayoutPlan> PlanLayout(std::uint64_t segment_bytes, std::uint32_t block_bytes,
                              std::uint32_t max_datasets, std::uint64_t max_rows) {
  if (block_bytes < 256 || block_bytes > (1u << 20) || (block_bytes & (block_bytes - 1)) != 0) {
    return Status::InvalidArgument("cache block size " + std::to_string(block_bytes) +
                                   " is not a power of two in [256, 1 MiB]");
  }
  if (max_datasets == 0 || max_datasets > (1u << 20)) {
    return Status::InvalidArgument("cache max_datasets must be in [1, 1048576]");
  }
  LayoutPlan plan;
  plan.block_bytes = block_bytes;
  plan.max_datasets = max_datasets;
  const std::uint64_t budget = segment_bytes / kPage * kPage;
  // Largest block count whose layout fits: binary search (the size is monotonic).
  std::uint64_t lo = 0, hi = std::min<std::uint64_t>(budget / block_bytes + 1, kNone - 1);
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo + 1) / 2;
    Place(&plan, mid, max_rows);
    if (plan.segment_bytes <= budget) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  constexpr std::uint64_t kMinBlocks = 16;
  if (lo < kMinBlocks || (max_rows != 0 && max_rows >= kNone)) {
    return Status::InvalidArgument("cache capacity " + std::to_string(segment_bytes) +
                                   " bytes is too small for the segment metadata plus " +
                                   std::to_string(kMinBlocks) + " blocks of " +
                                   std::to_string(block_bytes) + " bytes");
  }
  Place(&plan, lo, max_rows);
  if (plan.num_entries >= kNone)
    return Status::InvalidArgument("cache: too many rows for 32-bit indices");
  return plan;
}

Result<LayoutPlan> CheckedGeometry(const SegmentHeader& h, std::uint64_t file_size) {
  auto bad = [&](const std::string& what) { return Status::Corruption("segment header: " + what); };
  if (h.block_bytes < 256 || h.block_bytes > (1u << 20) ||
      (h.block_bytes & (h.block_bytes - 1)) != 0)
    return bad("block size " + std::to_string(h.block_bytes));
  if (h.max_datasets == 0 || h.max_datasets > (1u << 20))
    return bad("dataset table size " + std::to_string(h.max_datasets));
  if (h.num_blocks < 16 || h.num_blocks >= kNone)
    return bad("block count " + std::to_string(h.num_blocks));
  if (h.num_entries == 0 || h.num_entries >= kNone)
    return bad("entry count " + std::to_string(h.num_entries));
  if (h.segment_bytes != file_size)
    return bad("size " + std::to_string(h.segment_bytes) + " but the file has " +
               std::to_string(file_size) + " bytes");
  LayoutPlan plan;
  plan.block_bytes = h.block_bytes;
  plan.max_datasets = h.max_datasets;
  Place(&plan, h.num_blocks, h.num_entries);
  const bool same = plan.segment_bytes == h.segment_bytes && plan.hash_buckets == h.hash_buckets &&
                    plan.ghost_slots == h.ghost_slots && plan.off_ghosts == h.off_ghosts &&
                    plan.off_datasets == h.off_datasets && plan.off_attach == h.off_attach &&
                    plan.off_participants == h.off_participants &&
                    plan.off_entries == h.off_entries && plan.off_buckets == h.off_buckets &&
                    plan.off_heap == h.off_heap && plan.off_block_next == h.off_block_next &&
                    plan.off_bitmap == h.off_bitmap && plan.off_data == h.off_data;
  if (!same) return bad("table offsets do not match its geometry");
  if (h.state != kSegmentReady && h.state != kSegmentRetired) {
    return bad("state " + std::to_string(h.state));
  }
  return plan;
}

LayoutPlan GeometryOf(const SegmentHeader& h) {
  LayoutPlan plan;
  plan.segment_bytes = h.segment_bytes;
  plan.block_bytes = h.block_bytes;
  plan.max_datasets = h.max_datasets;
  plan.num_blocks = h.num_blocks;
  plan.num_entries = h.num_entries;
  plan.hash_buckets = h.hash_buckets;
  plan.ghost_slots = h.ghost_slots;
  plan.off_ghosts = h.off_ghosts;
  plan.off_datasets = h.off_datasets;
  plan.off_attach = h.off_attach;
  plan.off_participants = h.off_participants;
  plan.off_entries = h.off_entries;
  plan.off_buckets = h.off_buckets;
  plan.off_heap = h.off_heap;
  plan.off_block_next = h.off_block_next;
  plan.off_bitmap = h.off_bitmap;
  plan.off_data = h.off_data;
  return plan;
}

void InitializeSegment(void* base, const LayoutPlan& plan, bool keep_after_exit) {
  auto* bytes = static_cast<unsigned char*>(base);
  auto* h = new (base) SegmentHeader{};
  h->version = kLayoutVersion;
  h->state = kSegmentReady;
  h->segment_bytes = plan.segment_bytes;
  h->block_bytes = plan.block_bytes;
  h->max_datasets = plan.max_datasets;
  h->num_blocks = plan.num_blocks;
  h->num_entries = plan.num_entries;
  h->hash_buckets = plan.hash_buckets;
  h->ghost_slots = plan.ghost_slots;
  h->off_ghosts = plan.off_ghosts;
  h->off_datasets = plan.off_datasets;
  h->off_attach = plan.off_attach;
  h->off_participants = plan.off_participants;
  h->off_entries = plan.off_entries;
  h->off_buckets = plan.off_buckets;
  h->off_heap = plan.off_heap;
  h->off_block_next = plan.off_block_next;
  h->off_bitmap = plan.off_bitmap;
  h->off_data = plan.off_data;
  h->keep_after_exit = keep_after_exit ? 1 : 0;
  // The lock is free as zeroed memory.

  // No block is backed yet (the data area is a hole): blocks join the free
  // list as extents are backed (SegmentTables::Grow). Every entry free.
  h->free_block_head = kNone;
  h->free_blocks = 0;
  h->backed_blocks = 0;
  // Entries and index buckets are valid as zeroed memory (free entries past
  // fresh_entries, empty buckets): nothing to write, and their pages are
  // touched only as the cache fills.
  h->free_entry_head = kNone;
  h->fresh_entries = 0;
  auto* attach = reinterpret_cast<AttachRecord*>(bytes + plan.off_attach);
  for (std::uint32_t a = 0; a < kMaxAttach; ++a) {
    for (std::uint32_t& pin : attach[a].pin) pin = kNone;
  }
  // Published last: a reader that sees the magic sees an initialised segment.
  __atomic_store_n(&h->magic, kMagic, __ATOMIC_RELEASE);
}

}  // namespace prescient::cache::detail
