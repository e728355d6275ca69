// The access schedule as one process of the connector uses it: its sample
// map (which file and dataset each field of a sample lives in), the node's
// next-use index (clairvoyant eviction) and the rank lists the position
// tracker and the prefetcher walk.
//
// Opened once per process from PRESCIENT_SCHEDULE; a file that cannot be used
// (missing, not a regular file, corrupt, wrong version, a rank outside its
// layout) gives one warning and the connector carries on without a schedule:
// LRU, no prefetch.
//
// Datasets are bound by what they are, not by their shape: the file must be
// one of the map's (by path after resolving links, else by device and inode)
// and unchanged since the schedule was made (size and modification time), and
// the dataset's path must be one of the map's fields, with the rows the map
// says. Anything else is cached without the schedule, and BindField says why.
//
// Read-only after construction except for the small caches of epoch lists,
// which have their own lock; safe to use from the prefetch threads.
#ifndef PRESCIENT_VOL_SCHEDULE_SCHEDULE_BINDING_H_
#define PRESCIENT_VOL_SCHEDULE_SCHEDULE_BINDING_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "cache/base/mutex.h"
#include "scheduler/core/next_use_index.h"
#include "scheduler/core/sample_map.h"
#include "scheduler/core/schedule_file.h"

namespace prescient::vol {

// A dataset's place in the sample map.
struct FieldRef {
  std::uint32_t file = 0;
  std::uint32_t field = 0;
  bool operator==(const FieldRef&) const = default;
};

// What a dataset looks like to the binding (the caller knows it from HDF5).
struct DatasetFacts {
  std::string path;  // the file as the application named it
  std::uint64_t device = 0, inode = 0, size = 0;
  std::int64_t mtime_ns = 0;
  std::string name;  // the dataset's path in the file
  std::uint64_t rows = 0, row_bytes = 0;
};

class ScheduleBinding {
 public:
  // Null (after one warning through `warn`) when the schedule is unusable.
  // The node's next-use index comes from `<path>.node<N>.index` when that
  // file was made from this very schedule (its checksum is recorded in it;
  // `prescient-schedule index <path> --node N --output <path>.node<N>.index`);
  // otherwise it is built in memory (seconds and ~100 MB per process at
  // ImageNet scale), and `on_rebuild` says why.
  static std::shared_ptr<ScheduleBinding> Open(
      const std::string& path, std::uint32_t rank,
      const std::function<void(const std::string&)>& warn,
      const std::function<void(const std::string&)>& on_rebuild = {});
  // Where Open looks for the prebuilt index of `node`.
  static std::string IndexPath(const std::string& schedule_path, std::uint32_t node);
  bool index_loaded() const { return index_loaded_; }

  const scheduler::ScheduleHeader& header() const { return reader_.header(); }
  const scheduler::SampleMap& map() const { return map_; }
  // "3 files (/data/a.h5 ... /data/c.h5), fields images, labels": for messages.
  std::string DescribeMap() const;
  std::uint32_t rank() const { return rank_; }
  std::uint32_t node() const { return node_; }
  // Ranks of this node, as the schedule lays them out, and a rank's index
  // among them (nullopt for a rank of another node).
  std::vector<std::uint32_t> LocalRanks() const;
  std::optional<std::uint32_t> LocalIndex(std::uint32_t rank) const;
  std::uint32_t epochs() const { return header().epochs; }
  std::uint64_t total_steps() const { return index_.total_steps(); }

  // The dataset's place in the map, or why it has none.
  std::variant<FieldRef, std::string> BindField(const DatasetFacts& dataset) const;
  // The sample that row `row` of a dataset of `file` holds (every row of a
  // group that is one sample holds the same).
  std::uint64_t SampleOf(std::uint32_t file, std::uint64_t row) const {
    return map_.SampleOf(file, row);
  }

  // The node's next use of `sample` by any local rank k at a global step at
  // or after progress[k] (the step rank k has reached; its earlier reads are
  // done). `progress` has one entry per local rank. kNever if none.
  std::uint64_t NextUse(std::uint64_t sample, std::span<const std::uint64_t> progress) const;
  // Global step <-> (epoch, step).
  std::uint64_t GlobalStep(std::uint32_t epoch, std::uint64_t step) const {
    return index_.GlobalStep(epoch, step);
  }
  std::pair<std::uint32_t, std::uint64_t> EpochAndStep(std::uint64_t global_step) const;

  // One rank's epoch (kept for the two most recent epochs per rank: recipe
  // schedules regenerate a list on every miss of this cache).
  scheduler::RankEpochView Part(std::uint32_t rank, std::uint32_t epoch) const;

  // Where each sample sits in this rank's epoch list (for the position
  // tracker). A sample may sit there more than once: padding repeats, and
  // loaders whose samples share rows (a time step read as one sample's
  // target and the next one's input) list a row at every use.
  static constexpr std::uint32_t kAbsent = UINT32_MAX;
  class EpochPositions {
   public:
    EpochPositions(std::uint64_t num_samples, const scheduler::RankEpochView& part);
    // The first position of `sample` in [from, to), if any.
    std::optional<std::uint64_t> Within(std::uint64_t sample, std::uint64_t from,
                                        std::uint64_t to) const;
    // A position p in [from, to) at which `part` (the list these positions
    // were built from) holds `samples` one after another, all before `to`:
    // of several, the one nearest `near` (the earlier of two as near). A
    // read of a window of 64 time steps is 64 samples listed in a row, found
    // by one walk of the first one's positions; the same run can also be
    // listed across two windows that follow each other, hence `near`.
    std::optional<std::uint64_t> RunWithin(std::span<const std::uint64_t> samples,
                                           const scheduler::RankEpochView& part, std::uint64_t from,
                                           std::uint64_t to, std::uint64_t near) const;

   private:
    std::vector<std::uint32_t> first_;  // per sample: its first position, or kAbsent
    std::vector<std::uint32_t> next_;   // per position: the sample's next position, or kAbsent
  };
  std::shared_ptr<const EpochPositions> PositionsOf(std::uint32_t epoch) const;

  // fork(): every use of the reader happens under mutex_, so holding it
  // across fork() guarantees no thread of the parent is inside the reader
  // (whose own lock would stay taken in the child) at that moment.
  void LockForFork() const ACQUIRE(mutex_) { mutex_.Lock(); }
  void UnlockAfterFork() const RELEASE(mutex_) { mutex_.Unlock(); }

 private:
  ScheduleBinding(scheduler::ScheduleReader reader, std::uint32_t rank, const std::string& path,
                  const std::function<void(const std::string&)>& on_rebuild);
  std::optional<std::string> TryLoadIndex(const std::string& schedule_path);
  // The map's path of the file with this identity (a view into map_).
  std::optional<std::string_view> PathByIdentity(std::uint64_t device, std::uint64_t inode) const;

  scheduler::ScheduleReader reader_;
  scheduler::SampleMap map_;
  std::uint32_t rank_;
  std::uint32_t node_;
  std::uint32_t first_local_rank_;
  scheduler::NextUseIndex index_;
  bool index_loaded_ = false;
  mutable cache::Mutex mutex_;  // guards the caches below
  mutable std::map<std::pair<std::uint32_t, std::uint32_t>, scheduler::RankEpochView> parts_
      GUARDED_BY(mutex_);
  mutable std::map<std::uint32_t, std::shared_ptr<const EpochPositions>> positions_
      GUARDED_BY(mutex_);
  // (device, inode) -> the map's path, built on the first lookup a path did
  // not answer.
  mutable std::optional<std::map<std::pair<std::uint64_t, std::uint64_t>, std::string_view>>
      paths_by_identity_ GUARDED_BY(mutex_);
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_SCHEDULE_BINDING_H_
