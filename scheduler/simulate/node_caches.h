// The two dynamic node caches of the simulator, each O(1) per read:
//
//   LruCache     a doubly linked recency list over a pool of `capacity`
//                entries, plus a SampleSlots from sample to entry; once full,
//                one miss in `admit_every` is admitted (the runtime's rule
//                without a schedule, cache/core/read_rows.cc: 8).
//   BeladyCache  a SampleSlots from sample to its next use (global step) and one
//                bucket of samples per step; the sample to evict is found by
//                walking down from the highest non-empty bucket. Every sample
//                keyed `now` is read at step `now` (that is what its key
//                means), so after the step EndStep frees the whole bucket:
//                stale entries never pile up.
#ifndef PRESCIENT_SCHEDULER_SIMULATE_NODE_CACHES_H_
#define PRESCIENT_SCHEDULER_SIMULATE_NODE_CACHES_H_

#include <cstdint>
#include <vector>

#include "scheduler/simulate/next_use.h"
#include "scheduler/simulate/sample_slots.h"

namespace prescient::scheduler::simulate {

class LruCache {
 public:
  LruCache(std::uint64_t capacity, std::uint64_t num_samples, std::uint32_t admit_every = 1);

  // Reads `s`: true on a hit. A miss is admitted while there is room; once
  // full, one miss in admit_every is, evicting the least recently read sample.
  bool Read(SampleId s);

 private:
  static constexpr std::uint32_t kNil = 0xffffffffu;
  void Unlink(std::uint32_t e);
  void PushFront(std::uint32_t e);

  std::uint64_t capacity_;
  SampleSlots index_;
  std::vector<SampleId> sample_;
  std::vector<std::uint32_t> prev_, next_;
  std::uint32_t head_ = kNil, tail_ = kNil;  // most / least recent
  std::uint32_t used_ = 0;
  std::uint32_t admit_every_;
  std::uint64_t full_misses_ = 0;
};

class BeladyCache {
 public:
  BeladyCache(std::uint64_t capacity, std::uint64_t num_samples, std::uint64_t total_steps);

  std::uint64_t capacity() const { return capacity_; }

  // A hit: true, and the sample's key becomes `next_use`.
  bool Hit(SampleId s, std::uint32_t next_use);
  // After a miss: admits `s` unless it is needed later than everything held
  // (or never). Returns true if admitted; *evicted is set to the victim if
  // one was evicted (kNoVictim otherwise).
  bool Admit(SampleId s, std::uint32_t next_use, SampleId* evicted);
  // Frees the bucket of step `now` once the step is over.
  void EndStep(std::uint32_t now);

  static constexpr SampleId kNoVictim = 0xffffffffu;

 private:
  void Push(SampleId s, std::uint32_t key);
  // Drops stale entries from the top; false if nothing is held.
  bool SettleTop();

  std::uint64_t capacity_;
  std::uint64_t size_ = 0;
  SampleSlots key_;
  std::vector<std::vector<SampleId>> bucket_;  // by key (global step)
  std::vector<SampleId> never_;                // held but never read here again
  std::uint64_t top_ = 0;                      // no live entry above bucket top_
};

}  // namespace prescient::scheduler::simulate

#endif  // PRESCIENT_SCHEDULER_SIMULATE_NODE_CACHES_H_
