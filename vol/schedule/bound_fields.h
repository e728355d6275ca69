// Which field of the schedule's sample map each registered dataset slot is.
//
// Written when a dataset binds (on the application's thread, or on the
// prefetch thread for datasets it resolves) and read by the eviction oracle on
// every thread, inside the cache's operations: reads are lock-free. Slots are
// the cache's dataset slots (dense, below the segment's dataset limit), so the
// table is a two-level array of atomics, grown in chunks, never moved, and
// holds no lock (fork() may come at any point of a Set on another thread).
#ifndef PRESCIENT_VOL_SCHEDULE_BOUND_FIELDS_H_
#define PRESCIENT_VOL_SCHEDULE_BOUND_FIELDS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "cache/core/node_cache.h"
#include "vol/schedule/schedule_binding.h"

namespace prescient::vol {

class BoundFields {
 public:
  struct Entry {
    FieldRef field;
    bool grouped = false;  // cached several rows to an entry (CachedDataset::grouped)
  };

  BoundFields() = default;
  ~BoundFields();
  BoundFields(const BoundFields&) = delete;
  BoundFields& operator=(const BoundFields&) = delete;

  // False when the slot is beyond the table (2^22 slots) or the field index
  // beyond 2^15: such a dataset stays unbound.
  bool Set(cache::DatasetSlot slot, const Entry& entry);
  std::optional<Entry> Get(cache::DatasetSlot slot) const noexcept;
  std::uint64_t bound() const { return bound_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::size_t kChunkSlots = 1024;
  static constexpr std::size_t kChunks = 4096;
  using Chunk = std::array<std::atomic<std::uint64_t>, kChunkSlots>;
  // 0 = unbound; else bit 63 grouped, bits 16..62 file + 1, bits 0..15 field.
  static std::uint64_t Pack(const Entry& entry);

  std::array<std::atomic<Chunk*>, kChunks> chunks_{};
  std::atomic<std::uint64_t> bound_{0};
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_BOUND_FIELDS_H_
