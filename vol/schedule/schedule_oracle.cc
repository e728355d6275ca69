#include "vol/schedule/schedule_oracle.h"

#include <algorithm>
#include <array>

namespace prescient::vol {

std::uint64_t ScheduleOracle::NextUse(cache::DatasetSlot ds, std::uint64_t row,
                                      std::uint64_t now) const noexcept {
  return Ask(ds, row, now, std::nullopt);
}

std::uint64_t ScheduleOracle::Ask(
    cache::DatasetSlot ds, std::uint64_t row, std::uint64_t now,
    std::optional<std::pair<std::uint32_t, std::uint64_t>> consumed) const noexcept {
  const std::optional<BoundFields::Entry> entry = bound_.Get(ds);
  if (!entry) return kNever;
  const std::uint64_t floor = consumed ? std::max(now, consumed->second) : now;
  if (entry->grouped) {
    // An entry holds several rows. Those of a group of a map of groups are
    // read together, its index's (PDEBench's seed is read whole): the first
    // row's next use is every entry's. Others are kept as needed right away.
    if (binding_.map().files()[entry->field.file].group.empty()) return floor + 1;
    row = 0;
  }
  try {
    std::array<std::uint64_t, RankProgress::kMaxLocalRanks> progress;
    const std::size_t n = progress_.Snapshot(progress);
    for (std::size_t k = 0; k < n; ++k) progress[k] = std::max(progress[k], now);
    if (consumed && consumed->first < n) {
      progress[consumed->first] = std::max(progress[consumed->first], consumed->second + 1);
    }
    const std::uint64_t sample = binding_.SampleOf(entry->field.file, row);
    std::uint64_t next = binding_.NextUse(sample, std::span(progress.data(), n));
    if (next == scheduler::NextUseIndex::kNever) next = kNever;
    if (ownership_ != nullptr) {
      if (const std::optional<bool> owned = ownership_->Owned(sample)) return HeldKey(next, *owned);
    }
    return next;
  } catch (...) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    return kNever;
  }
}

}  // namespace prescient::vol
