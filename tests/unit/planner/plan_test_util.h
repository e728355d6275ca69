// Helpers shared by the planner tests.
#ifndef PRESCIENT_TESTS_UNIT_PLANNER_PLAN_TEST_UTIL_H_
#define PRESCIENT_TESTS_UNIT_PLANNER_PLAN_TEST_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "scheduler/core/access_schedule.h"

namespace prescient::scheduler::plan {

// Every sample read in `epoch`, over all ranks, sorted.
inline std::vector<SampleId> EpochMultiset(const AccessSchedule& s, std::uint32_t epoch) {
  std::vector<SampleId> all;
  for (std::uint32_t r = 0; r < s.layout().ranks; ++r) {
    const auto& p = s.Part(r, epoch).samples;
    all.insert(all.end(), p.begin(), p.end());
  }
  std::sort(all.begin(), all.end());
  return all;
}

// The samples of global step `step` over all ranks, sorted.
inline std::vector<SampleId> GlobalBatch(const AccessSchedule& s, std::uint32_t epoch,
                                         std::size_t step) {
  std::vector<SampleId> all;
  for (std::uint32_t r = 0; r < s.layout().ranks; ++r) {
    const auto part = s.Part(r, epoch).Step(step);
    all.insert(all.end(), part.begin(), part.end());
  }
  std::sort(all.begin(), all.end());
  return all;
}

inline std::vector<SampleId> Iota(std::uint64_t n) {
  std::vector<SampleId> v(n);
  for (std::uint64_t i = 0; i < n; ++i) v[i] = static_cast<SampleId>(i);
  return v;
}

}  // namespace prescient::scheduler::plan

#endif  // PRESCIENT_TESTS_UNIT_PLANNER_PLAN_TEST_UTIL_H_
