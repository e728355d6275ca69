// The access schedule as the connector uses it: which dataset it describes,
// the node's next-use index (clairvoyant eviction) and the rank lists the
// prefetcher walks.
//
// Opened once per process from PRESCIENT_SCHEDULE; a file that cannot be used
// (missing, corrupt, wrong version, a rank outside its layout) gives one
// warning and the connector carries on without a schedule: LRU, no prefetch.
// A dataset whose fingerprint (rows, row size, file size and mtime) differs
// from the schedule's is not bound (one warning): it is still cached.
//
// Read-only after construction except for the small per-epoch list cache,
// which has its own lock; safe to use from the prefetch threads.
#ifndef PRESCIENT_VOL_SCHEDULE_SCHEDULE_BINDING_H_
#define PRESCIENT_VOL_SCHEDULE_SCHEDULE_BINDING_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cache/core/next_use_oracle.h"
#include "scheduler/core/next_use_index.h"
#include "scheduler/core/schedule_file.h"

namespace prescient::vol {

class ScheduleBinding {
 public:
  // Null (after one warning through `warn`) when the schedule is unusable.
  // The node's next-use index comes from `<path>.node<N>.index` when that
  // file exists, is newer than the schedule and was built from it (written by
  // `prescient-schedule index <path> --node N --output <path>.node<N>.index`;
  // Load checks the schedule checksum it records and reads it into memory);
  // otherwise it is built in memory (seconds and ~100 MB per process at
  // ImageNet scale).
  static std::shared_ptr<ScheduleBinding> Open(const std::string& path, std::uint32_t rank,
                                               const std::function<void(const std::string&)>& warn);
  // Where Open looks for the prebuilt index of `node`.
  static std::string IndexPath(const std::string& schedule_path, std::uint32_t node);
  bool index_loaded() const { return index_loaded_; }

  const scheduler::ScheduleHeader& header() const { return reader_.header(); }
  std::uint32_t rank() const { return rank_; }
  std::uint32_t node() const { return node_; }
  // Ranks of this node, as the schedule lays them out.
  std::vector<std::uint32_t> LocalRanks() const;
  std::uint32_t epochs() const { return header().epochs; }
  std::uint64_t total_steps() const { return index_.total_steps(); }

  // "" when the dataset is the one the schedule was made for, else why not.
  std::string Mismatch(std::uint64_t rows, std::uint64_t row_bytes, std::uint64_t file_size,
                       std::int64_t mtime_ns) const;

  // The node's next use of `sample` strictly after global step `now`.
  std::uint64_t NextUse(std::uint64_t sample, std::uint64_t now) const;
  // Global step <-> (epoch, step).
  std::uint64_t GlobalStep(std::uint32_t epoch, std::uint64_t step) const {
    return index_.GlobalStep(epoch, step);
  }
  std::pair<std::uint32_t, std::uint64_t> EpochAndStep(std::uint64_t global_step) const;

  // One rank's epoch (kept for the two most recent epochs per rank: recipe
  // schedules regenerate a list on every miss of this cache).
  scheduler::RankEpochView Part(std::uint32_t rank, std::uint32_t epoch) const;

  // Where each sample sits in this rank's epoch list (for the position
  // tracker); kAbsent for samples the rank does not read that epoch.
  static constexpr std::uint32_t kAbsent = UINT32_MAX;
  std::shared_ptr<const std::vector<std::uint32_t>> PositionsOf(std::uint32_t epoch) const;

  // fork(): every use of the reader happens under mutex_, so holding it
  // across fork() guarantees no thread of the parent is inside the reader
  // (whose own lock would stay taken in the child) at that moment.
  void LockForFork() const { mutex_.lock(); }
  void UnlockAfterFork() const { mutex_.unlock(); }

 private:
  ScheduleBinding(scheduler::ScheduleReader reader, std::uint32_t rank, const std::string& path);
  bool TryLoadIndex(const std::string& schedule_path);

  scheduler::ScheduleReader reader_;
  std::uint32_t rank_;
  std::uint32_t node_;
  scheduler::NextUseIndex index_;
  bool index_loaded_ = false;
  mutable std::mutex mutex_;  // guards the two caches below
  mutable std::map<std::pair<std::uint32_t, std::uint32_t>, scheduler::RankEpochView> parts_;
  mutable std::map<std::uint32_t, std::shared_ptr<const std::vector<std::uint32_t>>> positions_;
};

// The cache's eviction oracle for the dataset bound to a schedule. A dataset
// of small rows cached several rows to an entry (CachedDataset::grouped) is
// small by construction: its entries are kept as needed right away.
class ScheduleOracle final : public cache::NextUseOracle {
 public:
  ScheduleOracle(std::shared_ptr<const ScheduleBinding> binding, cache::DatasetSlot slot,
                 std::uint64_t rows_per_entry)
      : binding_(std::move(binding)), slot_(slot), rows_per_entry_(rows_per_entry) {}
  std::uint64_t NextUse(cache::DatasetSlot ds, std::uint64_t row,
                        std::uint64_t now) const noexcept override;

 private:
  std::shared_ptr<const ScheduleBinding> binding_;
  cache::DatasetSlot slot_;
  std::uint64_t rows_per_entry_;
};

// The oracle for the rows of one read at global step `read_step`: a row just
// read is needed next at its use *after* this read. The cache's node step
// trails the readers (it must not pass the slowest), so asking relative to
// it would key a consumed row by the use that just happened, keep it as if
// urgent, and turn away rows that are needed soon.
class ReadOracle final : public cache::NextUseOracle {
 public:
  ReadOracle(const ScheduleBinding& binding, cache::DatasetSlot slot, std::uint64_t rows_per_entry,
             std::uint64_t read_step)
      : binding_(binding), slot_(slot), rows_per_entry_(rows_per_entry), read_step_(read_step) {}
  std::uint64_t NextUse(cache::DatasetSlot ds, std::uint64_t row,
                        std::uint64_t now) const noexcept override;

 private:
  const ScheduleBinding& binding_;
  cache::DatasetSlot slot_;
  std::uint64_t rows_per_entry_;
  std::uint64_t read_step_;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_SCHEDULE_BINDING_H_
