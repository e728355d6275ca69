// "When does node n next need sample s?" for clairvoyant (Belady) eviction.
//
// Built once per node from a schedule; afterwards read-only and safe to query
// from any number of threads. Steps are global steps:
//   global = EpochFirstStep(epoch) + step  (= epoch * steps_per_epoch + step
//   when every epoch has the same number of steps, as loader orders do).
// A node uses a sample at global step g if any of its ranks
// [node * ranks_per_node, (node + 1) * ranks_per_node) reads it in step g.
//
// Memory: a compressed-row table, 8 bytes per sample for the row starts plus
// 4 bytes per (sample, step) use on the node. ImageNet-1k (1,281,167 samples,
// 90 epochs, 16 ranks on 4 nodes) is about 10 MB + 4 * 28.8 M = 125 MB per
// node. Lookups are a binary search in the sample's uses (~E/nodes entries);
// a random lookup costs about two cache misses.
//
// The optional read table answers the question the cache asks most: "the
// sample I am reading now, for rank r at (epoch, position), when is it needed
// next on this node?" in one sequential array read (4 more bytes per read;
// ImageNet-1k: +115 MB per node).
//
//   NextUseIndex index = NextUseIndex::Build(reader, node, {}, {.read_table = true});
//   std::uint64_t when = index.NextUseAfter(sample, index.GlobalStep(epoch, step));
//   std::uint64_t also = index.NextUseOfRead(rank, epoch, position);
//   if (when == NextUseIndex::kNever) { /* evict first */ }
//
// Sharing one index between the processes of a node: Save() it once and
// Load() it everywhere; Load reads the file into memory the process owns (never
// mapped: a file truncated under a running job must not raise SIGBUS), so each
// rank holds one copy and its forked DataLoader workers share it. Copies of a
// NextUseIndex share their tables (cheap, immutable).
#ifndef PRESCIENT_SCHEDULER_CORE_NEXT_USE_INDEX_H_
#define PRESCIENT_SCHEDULER_CORE_NEXT_USE_INDEX_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "scheduler/core/access_schedule.h"
#include "scheduler/core/schedule_file.h"

namespace prescient::scheduler {

struct NextUseIndexOptions {
  bool read_table = false;  // also build the per-read table (NextUseOfRead)
};

class NextUseIndex {
 public:
  static constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

  // REQUIRES: node < layout.nodes(); throws std::out_of_range otherwise and
  // std::length_error if the schedule has 2^32 - 1 or more global steps.
  static NextUseIndex Build(const AccessSchedule& schedule, std::uint32_t node,
                            const NextUseIndexOptions& options = {});
  // Streams the parts from the reader (recipe files are regenerated once per
  // pass: counting, filling, and the read table). `progress` gets the
  // fraction done.
  static NextUseIndex Build(const ScheduleReader& reader, std::uint32_t node,
                            const std::function<void(double)>& progress = {},
                            const NextUseIndexOptions& options = {});

  NextUseIndex() = default;

  // Writes the index to `path` (replaced atomically), with the checksum of
  // the schedule it was built from. Throws ScheduleFileError(kIo).
  void Save(const std::string& path) const;
  // Reads an index written by Save() into memory, after checking its magic,
  // version, CRC-32s and structure (ScheduleFileError with the schedule-file
  // codes), and that it was built from `schedule`: the recorded schedule
  // checksum, the node, the sample count and the global steps must match
  // (kFingerprintMismatch otherwise: an index of another seed of the same
  // shape would silently give wrong evictions).
  static NextUseIndex Load(const std::string& path, const ScheduleReader& schedule);

  // ScheduleReader::checksum() of the schedule the index was built from (0
  // when it was built from an in-memory AccessSchedule).
  std::uint32_t schedule_checksum() const { return schedule_checksum_; }

  // The first global step > `global_step` at which the node reads `sample`,
  // or kNever. Samples >= num_samples() are never used.
  std::uint64_t NextUseAfter(SampleId sample, std::uint64_t global_step) const;
  // The same with >= (the sample's use in the current step counts).
  std::uint64_t NextUseAtOrAfter(SampleId sample, std::uint64_t global_step) const;
  // Every global step at which the node reads `sample`, ascending, distinct.
  std::span<const std::uint32_t> Uses(SampleId sample) const;

  // Needs options.read_table. For the read of rank `rank` (on this node) at
  // `position` of `epoch`: the first global step after that read's step at
  // which the node reads the same sample again, or kNever. Equal to
  // NextUseAfter(sample, step of the read). Throws std::out_of_range for a
  // rank of another node or a position past the rank's epoch, and
  // std::logic_error without the table.
  std::uint64_t NextUseOfRead(std::uint32_t rank, std::uint32_t epoch,
                              std::uint64_t position) const;
  bool has_read_table() const { return !read_begin_.empty(); }

  std::uint64_t GlobalStep(std::uint32_t epoch, std::uint64_t step) const {
    return epoch_first_step_[epoch] + step;
  }
  std::uint64_t EpochFirstStep(std::uint32_t epoch) const { return epoch_first_step_[epoch]; }
  std::uint64_t total_steps() const {
    return epoch_first_step_.empty() ? 0 : epoch_first_step_.back();
  }
  std::uint32_t node() const { return node_; }
  std::uint64_t num_samples() const { return num_samples_; }
  std::uint64_t total_uses() const { return steps_.size(); }
  std::size_t MemoryBytes() const {
    return row_begin_.size_bytes() + steps_.size_bytes() + read_next_.size_bytes() +
           read_begin_.size_bytes() + epoch_first_step_.size_bytes();
  }

  // One rank's epoch, as the builder consumes it.
  using PartSource = std::function<RankEpochView(std::uint32_t rank, std::uint32_t epoch)>;
  // The general builder behind both Build overloads.
  static NextUseIndex BuildFromParts(std::uint64_t num_samples, const WorldLayout& layout,
                                     std::span<const std::uint64_t> epoch_first_step,
                                     std::uint32_t node, const PartSource& parts,
                                     const std::function<void(double)>& progress = {},
                                     const NextUseIndexOptions& options = {});

 private:
  struct Built;  // tables in huge-page memory (next_use_index.cc)
  friend struct NextUseIndexFile;

  static void BuildReadTable(Built& built, const PartSource& parts,
                             const std::function<void(double)>& progress);
  void Adopt(std::shared_ptr<const Built> built);

  std::uint32_t node_ = 0;
  std::uint32_t schedule_checksum_ = 0;
  std::uint32_t first_rank_ = 0;
  std::uint32_t node_ranks_ = 0;
  std::uint64_t num_samples_ = 0;
  // The tables; `storage_` owns the memory they point into (built tables or
  // tables read from a file).
  std::shared_ptr<const void> storage_;
  std::span<const std::uint64_t> row_begin_;  // sample s: steps_[row_begin_[s], row_begin_[s+1])
  std::span<const std::uint32_t> steps_;
  std::span<const std::uint64_t> epoch_first_step_;
  // Read table: reads of (epoch e, rank first_rank_ + k) start at
  // read_begin_[e * node_ranks_ + k] in read_next_.
  std::span<const std::uint64_t> read_begin_;
  std::span<const std::uint32_t> read_next_;
};

}  // namespace prescient::scheduler

#endif  // PRESCIENT_SCHEDULER_CORE_NEXT_USE_INDEX_H_
