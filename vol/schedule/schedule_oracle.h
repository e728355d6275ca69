// The cache's eviction oracle under a schedule: "when is this cached row read
// next on this node?" for every dataset bound to a field of the sample map.
//
// A row of field j in file f holds sample FirstSample(f) + row; all fields of
// a sample share its next use (an image and its label are read together). The
// next use is asked per rank: the first read of the sample by any local rank
// at or after the step that rank has reached, so rows a faster rank has
// consumed are not kept as if urgent for it. Datasets of small rows cached
// several to an entry (CachedDataset::grouped) are small by construction and
// kept as needed right away, unless they are a group of a map of groups: its
// index reads the group whole, so every entry has the next use of its first
// row. Unbound datasets are "never" (evicted first).
// While the node's agent runs, keys also say whether this node owns the
// sample (node_ownership.h: HeldKey), so owned rows are evicted last.
#ifndef PRESCIENT_VOL_SCHEDULE_SCHEDULE_ORACLE_H_
#define PRESCIENT_VOL_SCHEDULE_SCHEDULE_ORACLE_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "cache/core/next_use_oracle.h"
#include "vol/schedule/bound_fields.h"
#include "vol/schedule/node_ownership.h"
#include "vol/schedule/rank_progress.h"
#include "vol/schedule/schedule_binding.h"

namespace prescient::vol {

class ScheduleOracle : public cache::NextUseOracle {
 public:
  // `failures` counts next-use queries that threw (answered "never"): a
  // fallback its owner reports. `ownership` may be null (no agent possible).
  ScheduleOracle(const ScheduleBinding& binding, const BoundFields& bound,
                 const RankProgress& progress, std::atomic<std::uint64_t>& failures,
                 const NodeOwnership* ownership)
      : binding_(binding),
        bound_(bound),
        progress_(progress),
        failures_(failures),
        ownership_(ownership) {}
  std::uint64_t NextUse(cache::DatasetSlot ds, std::uint64_t row,
                        std::uint64_t now) const noexcept override;

 protected:
  // `consumed`: a local rank and the step it is reading now (its use there is done).
  std::uint64_t Ask(cache::DatasetSlot ds, std::uint64_t row, std::uint64_t now,
                    std::optional<std::pair<std::uint32_t, std::uint64_t>> consumed) const noexcept;

 private:
  const ScheduleBinding& binding_;
  const BoundFields& bound_;
  const RankProgress& progress_;
  std::atomic<std::uint64_t>& failures_;
  const NodeOwnership* ownership_;
};

// The oracle for the rows of one read at global step `read_step` by local
// rank `local_rank`: a row just read is needed next at its use *after* this
// read, by this rank or another.
class ReadOracle final : public ScheduleOracle {
 public:
  ReadOracle(const ScheduleBinding& binding, const BoundFields& bound, const RankProgress& progress,
             std::atomic<std::uint64_t>& failures, const NodeOwnership* ownership,
             std::uint32_t local_rank, std::uint64_t read_step)
      : ScheduleOracle(binding, bound, progress, failures, ownership),
        local_rank_(local_rank),
        read_step_(read_step) {}
  std::uint64_t NextUse(cache::DatasetSlot ds, std::uint64_t row,
                        std::uint64_t now) const noexcept override {
    return Ask(ds, row, now, std::make_pair(local_rank_, read_step_));
  }

 private:
  std::uint32_t local_rank_;
  std::uint64_t read_step_;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_SCHEDULE_ORACLE_H_
