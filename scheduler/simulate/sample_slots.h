// Sample id -> 32-bit value (any value but kReserved). Sized once for a
// maximum number of entries. When the dataset is at most 8x that, a dense
// array indexed by sample (one memory access per lookup, at most twice the
// hash table's memory); otherwise open addressing with linear probing and
// backward-shift deletion (no tombstones), so a node cache costs memory in
// proportion to its capacity, not to the dataset.
#ifndef PRESCIENT_SCHEDULER_SIMULATE_SAMPLE_SLOTS_H_
#define PRESCIENT_SCHEDULER_SIMULATE_SAMPLE_SLOTS_H_

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "scheduler/core/access_schedule.h"

namespace prescient::scheduler::simulate {

class SampleSlots {
 public:
  static constexpr std::uint32_t kReserved = 0xfffffffeu;

  SampleSlots(std::uint64_t max_entries, std::uint64_t num_samples)
      : dense_(num_samples <= 8 * max_entries) {
    if (dense_) {
      value_.assign(num_samples, kReserved);
      return;
    }
    const std::uint64_t slots = std::bit_ceil(std::max<std::uint64_t>(16, max_entries * 2));
    shift_ = 64 - std::countr_zero(slots);
    mask_ = slots - 1;
    sample_.assign(slots, kEmpty);
    value_.assign(slots, 0);
  }

  // The value of `s`, or nullptr.
  std::uint32_t* Find(SampleId s) {
    if (dense_) return value_[s] == kReserved ? nullptr : &value_[s];
    for (std::uint64_t i = Home(s);; i = (i + 1) & mask_) {
      if (sample_[i] == s) return &value_[i];
      if (sample_[i] == kEmpty) return nullptr;
    }
  }

  // REQUIRES: `s` absent and fewer than max_entries entries.
  void Insert(SampleId s, std::uint32_t value) {
    if (dense_) {
      value_[s] = value;
      return;
    }
    std::uint64_t i = Home(s);
    while (sample_[i] != kEmpty) i = (i + 1) & mask_;
    sample_[i] = s;
    value_[i] = value;
  }

  // REQUIRES: `s` present.
  void Erase(SampleId s) {
    if (dense_) {
      value_[s] = kReserved;
      return;
    }
    std::uint64_t hole = Home(s);
    while (sample_[hole] != s) hole = (hole + 1) & mask_;
    for (std::uint64_t i = (hole + 1) & mask_; sample_[i] != kEmpty; i = (i + 1) & mask_) {
      const std::uint64_t home = Home(sample_[i]);
      // Entry i may move into the hole unless its home lies cyclically in (hole, i].
      const bool stays = hole <= i ? (hole < home && home <= i) : (hole < home || home <= i);
      if (!stays) {
        sample_[hole] = sample_[i];
        value_[hole] = value_[i];
        hole = i;
      }
    }
    sample_[hole] = kEmpty;
  }

 private:
  static constexpr SampleId kEmpty = 0xffffffffu;

  // Fibonacci hashing: the top bits of the product.
  std::uint64_t Home(SampleId s) const {
    return (static_cast<std::uint64_t>(s) * 0x9e3779b97f4a7c15ULL) >> shift_;
  }

  bool dense_;
  int shift_ = 0;
  std::uint64_t mask_ = 0;
  std::vector<SampleId> sample_;
  std::vector<std::uint32_t> value_;
};

}  // namespace prescient::scheduler::simulate

#endif  // PRESCIENT_SCHEDULER_SIMULATE_SAMPLE_SLOTS_H_
