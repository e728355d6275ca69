// A dataset as the node cache knows it: its slot in the shared segment and
// how to load its rows on a miss.
//
// Registered once per process per dataset identity (not per handle, so
// h5py's per-sample f['x'][i] reopening finds it again). Rows load raw when
// the layout allows (pread + deflate/shuffle decoding, coalesced, no HDF5
// call), otherwise through the connector underneath, one hyperslab read per
// run of consecutive rows.
#ifndef PRESCIENT_VOL_SERVE_CACHED_DATASET_H_
#define PRESCIENT_VOL_SERVE_CACHED_DATASET_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "cache/core/node_cache.h"
#include "cache/io/coalescing_options.h"
#include "cache/io/random_access_file.h"
#include "cache/io/raw_layout.h"
#include "vol/objects/dataset_state.h"
#include "vol/objects/object.h"

namespace prescient::vol {

struct LoadCounters {
  std::uint64_t reads = 0;
  std::uint64_t bytes = 0;
};

class CachedDataset {
 public:
  // Works out how to load the dataset's rows (raw layout, file) and records
  // its identity. Runs on the caller's thread inside a VOL callback: all the
  // HDF5 work happens here. Throws std::runtime_error when it cannot.
  static std::shared_ptr<CachedDataset> Prepare(const VolObject& dataset,
                                                const DatasetState& state);

  // Registers the prepared dataset in the node cache and sets its coalescing
  // gap (`fixed_gap`, or a short storage calibration). Calls no HDF5
  // function, so it may run at fork time. Idempotent.
  cache::Status Register(cache::NodeCache& cache, std::optional<std::uint64_t> fixed_gap);
  bool registered() const { return slot_ != cache::kInvalidDatasetSlot; }

  // The dataset's identity, for the log and the schedule's fingerprint check.
  const std::string& description() const { return description_; }
  std::uint64_t file_size() const { return file_size_; }
  std::int64_t file_mtime_ns() const { return file_mtime_ns_; }

  cache::DatasetSlot slot() const { return slot_; }
  std::uint64_t row_bytes() const { return row_bytes_; }
  std::uint64_t num_rows() const { return num_rows_; }
  // Null when rows must be loaded through HDF5; raw_reason() says why.
  const std::shared_ptr<const cache::io::RawLayout>& raw_layout() const { return layout_; }
  const std::shared_ptr<const cache::io::RandomAccessSource>& source() const { return source_; }
  const std::string& raw_reason() const { return raw_reason_; }
  // Rows per chunk along dimension 0 (0: not chunked). A miss loads whole
  // chunks' rows, so each chunk is decoded once.
  std::uint64_t chunk_rows() const { return chunk_rows_; }
  // How misses of this dataset are merged into reads.
  const cache::io::CoalescingOptions& coalescing() const { return coalescing_; }
  // What calibration found (empty with a fixed gap or no raw layout).
  const std::string& storage_profile() const { return storage_profile_; }

  // Loads `rows` (ascending, distinct) into dest[i]. Raw when possible, else
  // through `dataset`'s under connector (REQUIRES: caller's thread, inside a
  // callback, for that path). Never throws.
  cache::Status Load(const VolObject* dataset, std::span<const std::uint64_t> rows,
                     std::span<std::byte* const> dest,
                     const cache::io::CoalescingOptions& coalescing,
                     LoadCounters* counters) const noexcept;

 private:
  cache::Status LoadRaw(std::span<const std::uint64_t> rows, std::span<std::byte* const> dest,
                        const cache::io::CoalescingOptions& coalescing,
                        LoadCounters* counters) const;
  cache::Status LoadThroughHdf5(const VolObject& dataset, std::span<const std::uint64_t> rows,
                                std::span<std::byte* const> dest, LoadCounters* counters) const;
  cache::Status ReadRunsThroughHdf5(const VolObject& dataset, hid_t mem_type,
                                    std::span<const std::uint64_t> rows,
                                    std::span<std::byte* const> dest, LoadCounters* counters) const;

  cache::DatasetKey key_;
  std::string description_;
  std::string path_;
  std::uint64_t file_size_ = 0;
  std::int64_t file_mtime_ns_ = 0;
  cache::DatasetSlot slot_ = cache::kInvalidDatasetSlot;
  std::uint64_t row_bytes_ = 0;
  std::uint64_t num_rows_ = 0;
  std::vector<hsize_t> dims_;
  std::shared_ptr<const cache::io::RawLayout> layout_;
  std::shared_ptr<const cache::io::RandomAccessSource> source_;
  std::string raw_reason_;
  std::uint64_t chunk_rows_ = 0;
  cache::io::CoalescingOptions coalescing_ = cache::io::kDefaultLocalDiskCoalescing;
  std::string storage_profile_;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SERVE_CACHED_DATASET_H_
