#include "vol/schedule/bound_fields.h"

#include <memory>

namespace prescient::vol {

BoundFields::~BoundFields() {
  for (std::atomic<Chunk*>& chunk : chunks_) delete chunk.load();
}

std::uint64_t BoundFields::Pack(const Entry& entry) {
  return (entry.grouped ? 1ull << 63 : 0) | (std::uint64_t{entry.field.file} + 1) << 16 |
         entry.field.field;
}

bool BoundFields::Set(cache::DatasetSlot slot, const Entry& entry) {
  const std::size_t chunk = slot / kChunkSlots;
  if (chunk >= kChunks || entry.field.field >= (1u << 15)) return false;
  Chunk* table = chunks_[chunk].load(std::memory_order_acquire);
  if (table == nullptr) {
    // Installed by compare-and-swap, not under a lock: a forked child must
    // never inherit a growth lock held by the parent's prefetch thread.
    auto fresh = std::make_unique<Chunk>();
    for (std::atomic<std::uint64_t>& cell : *fresh) cell.store(0, std::memory_order_relaxed);
    if (chunks_[chunk].compare_exchange_strong(table, fresh.get(), std::memory_order_acq_rel,
                                               std::memory_order_acquire)) {
      table = fresh.release();
    }  // else another thread installed one first: `table` is that one
  }
  const std::uint64_t previous =
      (*table)[slot % kChunkSlots].exchange(Pack(entry), std::memory_order_release);
  if (previous == 0) bound_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

std::optional<BoundFields::Entry> BoundFields::Get(cache::DatasetSlot slot) const noexcept {
  const std::size_t chunk = slot / kChunkSlots;
  if (chunk >= kChunks) return std::nullopt;
  const Chunk* table = chunks_[chunk].load(std::memory_order_acquire);
  if (table == nullptr) return std::nullopt;
  const std::uint64_t packed = (*table)[slot % kChunkSlots].load(std::memory_order_acquire);
  if (packed == 0) return std::nullopt;
  Entry entry;
  entry.grouped = (packed >> 63) != 0;
  entry.field.file = static_cast<std::uint32_t>(((packed >> 16) & ((1ull << 47) - 1)) - 1);
  entry.field.field = static_cast<std::uint32_t>(packed & 0xffff);
  return entry;
}

}  // namespace prescient::vol
