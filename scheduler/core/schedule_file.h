// The schedule file: a versioned, checksummed binary file holding an access
// schedule (or the recipe that regenerates it) plus the fingerprint of the
// dataset it was made for. The byte layout is specified in
// scheduler/README.md ("Schedule file format").
//
// Writers produce the file under a temporary name and rename it into place, so
// a reader never sees a half-written file and an open reader keeps the file it
// opened. Readers never map the file (see ReadOnlyFile): a file truncated or
// rewritten in place under them gives an error, not a SIGBUS.
// Readers validate everything they touch: a corrupt, truncated, wrong-version
// or mismatched file raises ScheduleFileError with a specific code and a
// message that names the file and the problem; it never crashes.
//
//   ScheduleReader reader = ScheduleReader::Open("train.sched");
//   reader.CheckDataset(FingerprintDataset("train.h5", "images", rows, row_bytes));
//   RankEpochView part = reader.Part(rank, epoch);   // touches only this part
//   SampleId s = part.sample(position);
#ifndef PRESCIENT_SCHEDULER_CORE_SCHEDULE_FILE_H_
#define PRESCIENT_SCHEDULER_CORE_SCHEDULE_FILE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "scheduler/core/access_schedule.h"

namespace prescient::scheduler {

// What the schedule was made for. Two fingerprints match when every field is
// equal; CheckDataset reports the first field that differs.
struct DatasetFingerprint {
  std::string file_path;     // as given by the user (not canonicalised)
  std::string dataset_name;  // HDF5 path of the dataset inside the file
  std::uint64_t rows = 0;    // extent of dimension 0 (= number of samples)
  std::uint64_t row_bytes = 0;
  std::uint64_t file_size = 0;
  std::int64_t mtime_ns = 0;  // st_mtim of the file, nanoseconds since the epoch

  bool operator==(const DatasetFingerprint&) const = default;
};

// Stats `file_path` for size and mtime; rows and row_bytes come from the
// caller (the scheduler is HDF5-free). Throws ScheduleFileError(kIo).
DatasetFingerprint FingerprintDataset(const std::string& file_path, const std::string& dataset_name,
                                      std::uint64_t rows, std::uint64_t row_bytes);

// How the sample lists are stored.
enum class ScheduleStorage : std::uint32_t {
  kLists = 0,   // explicit per-(rank, epoch) sample lists and step boundaries
  kRecipe = 1,  // only source + parameters; readers regenerate (loader orders)
};

struct ScheduleHeader {
  DatasetFingerprint dataset;
  std::string source;      // e.g. "torch-distributed", "numpy", "plan"
  std::string parameters;  // canonical parameter string of the source
  WorldLayout layout;
  std::uint32_t epochs = 0;
  std::uint64_t num_samples = 0;
  std::uint64_t seed = 0;  // the seed the order came from (also in `parameters` for loaders)
  ScheduleStorage storage = ScheduleStorage::kLists;  // set by the writers
  std::string generator;  // free text: tool and version that wrote the file
};

// Every way a schedule file can be unusable.
enum class ScheduleFileErrorCode {
  kIo,                   // open/stat/read/write failed, or not a regular file
  kTruncated,            // file shorter than its own layout says
  kBadMagic,             // not a schedule file
  kBadVersion,           // a format version this build does not read
  kBadChecksum,          // a CRC-32 does not match
  kCorrupt,              // checksums fine but the contents are inconsistent
  kUnsupported,          // recipe of a source this build cannot regenerate
  kFingerprintMismatch,  // the file was made for another dataset
  kOutOfRange,           // rank / epoch / position outside the schedule
};

const char* ScheduleFileErrorCodeName(ScheduleFileErrorCode code);

class ScheduleFileError : public std::runtime_error {
 public:
  ScheduleFileError(ScheduleFileErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ScheduleFileErrorCode code() const { return code_; }

 private:
  ScheduleFileErrorCode code_;
};

// Writes explicit lists. `header.layout`, `epochs` and `num_samples` must agree
// with `schedule` and every rank of an epoch must have the same number of
// steps (std::invalid_argument otherwise). `header.storage` is ignored.
void WriteScheduleFile(const std::string& path, const ScheduleHeader& header,
                       const AccessSchedule& schedule);

// Writes only the recipe: `header.source` and `header.parameters` must name a
// loader order this library regenerates (see loader_orders.h); validated by
// parsing it (std::invalid_argument otherwise).
void WriteRecipeFile(const std::string& path, const ScheduleHeader& header);

// A read-only view of one rank's epoch. Cheap to copy; keeps the lists read (or
// the regenerated lists) alive.
class RankEpochView {
 public:
  RankEpochView() = default;
  RankEpochView(std::span<const SampleId> samples, std::span<const std::uint64_t> step_begin,
                std::shared_ptr<const void> keep_alive)
      : samples_(samples), step_begin_(step_begin), keep_alive_(std::move(keep_alive)) {}

  std::size_t size() const { return samples_.size(); }
  std::size_t steps() const { return step_begin_.empty() ? 0 : step_begin_.size() - 1; }
  // REQUIRES: position < size(). Unchecked; use At() for a checked lookup.
  SampleId sample(std::size_t position) const { return samples_[position]; }
  SampleId At(std::size_t position) const;
  std::span<const SampleId> samples() const { return samples_; }
  std::span<const std::uint64_t> step_begin() const { return step_begin_; }
  std::span<const SampleId> Step(std::size_t s) const {
    return samples_.subspan(step_begin_[s], step_begin_[s + 1] - step_begin_[s]);
  }
  RankEpoch ToRankEpoch() const;

 private:
  std::span<const SampleId> samples_;
  std::span<const std::uint64_t> step_begin_;
  std::shared_ptr<const void> keep_alive_;
};

// Which fields CheckDataset compares. File size and mtime catch an edited
// file; a copy of the file to another path keeps rows/row_bytes/size.
struct FingerprintCheck {
  bool path = false;  // off by default: the same file is often reached by several paths
  bool dataset_name = true;
  bool shape = true;      // rows and row_bytes
  bool file_stat = true;  // file_size and mtime_ns
};

class ScheduleReader {
 public:
  // Maps the file, validates preamble, header and index (magic, version,
  // CRC-32s, sizes, offsets). Sample lists are verified lazily: the first
  // Part() of a (rank, epoch) checks that part's CRC-32.
  static ScheduleReader Open(const std::string& path);

  const ScheduleHeader& header() const;
  const std::string& path() const;
  // The file's identity for files derived from it (the next-use index): the
  // preamble's CRC-32, which covers the header's and the index's CRC-32s and
  // so, through the index entries, every part's.
  std::uint32_t checksum() const;

  // Throws kFingerprintMismatch naming the first differing field.
  void CheckDataset(const DatasetFingerprint& actual, const FingerprintCheck& check = {}) const;

  // Steps of epoch `epoch` (the same for every rank) and the global step of
  // its first step: global = EpochFirstStep(e) + step (= e * steps when every
  // epoch has the same number of steps).
  std::uint64_t StepsInEpoch(std::uint32_t epoch) const;
  std::uint64_t EpochFirstStep(std::uint32_t epoch) const;

  // One rank's epoch. Lists: read with pread on first use (only this part's
  // bytes) and CRC-checked; a short read (the file shrank) is kTruncated. Recipe:
  // regenerated in O(num_samples) time; the last epoch's global order is
  // cached (4 bytes per sample), so the ranks of one epoch share the work.
  // Thread-safe.
  RankEpochView Part(std::uint32_t rank, std::uint32_t epoch) const;

  // Verifies every part's checksum now (inspect uses it).
  void VerifyAll() const;

  // The whole schedule in memory.
  AccessSchedule Materialize() const;

  // Parses a schedule file held in memory (the fuzzer's entry point; Open
  // runs the same code on bytes read from the file). The bytes must outlive
  // the reader.
  static ScheduleReader OpenBytes(std::span<const std::byte> bytes, const std::string& name);

  ScheduleReader(ScheduleReader&&) noexcept;
  ScheduleReader& operator=(ScheduleReader&&) noexcept;
  ~ScheduleReader();

 private:
  struct Impl;
  explicit ScheduleReader(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace prescient::scheduler

#endif  // PRESCIENT_SCHEDULER_CORE_SCHEDULE_FILE_H_
