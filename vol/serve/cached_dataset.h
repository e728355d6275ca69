// A dataset as the node cache knows it: its slot in the shared segment, how
// its rows map to cache entries and how to load them on a miss.
//
// Prepared once per process per dataset identity (not per handle, so h5py's
// per-sample f['x'][i] reopening finds it again). Rows load raw when the layout
// allows (pread + deflate/shuffle decoding, coalesced, no HDF5 call),
// otherwise through the connector underneath, one hyperslab read per run of
// consecutive rows.
//
// Small rows are cached in groups. The cache allocates whole blocks (4 KiB by
// default), so an 8-byte label would occupy 512 times its size, and every miss
// would be a storage read of one row. A dataset whose rows are at most half a
// block is cached in entries of `rows_per_entry` consecutive rows, up to 64
// KiB, when all of it is at most 1/16 of the cache (labels, per-sample
// metadata, a sample stored as a dataset of its own) or its rows would not
// fit the cache a block each (a time series of 64-byte steps): a miss loads
// the entry's rows in one read (HDF5's own sieve buffer reads as much for
// small contiguous reads), and a hit copies only the rows asked for. The
// entries of the first kind stay resident while the dataset is in use (see
// ScheduleOracle); those of the second are cached as if no schedule were
// given, since an entry holds rows of many samples, whose next uses the
// schedule cannot key it by cheaply (`entries_stay_resident`). Every other
// dataset has one row per entry.
#ifndef PRESCIENT_VOL_SERVE_CACHED_DATASET_H_
#define PRESCIENT_VOL_SERVE_CACHED_DATASET_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/base/mutex.h"
#include "cache/core/node_cache.h"
#include "cache/io/coalescing_options.h"
#include "cache/io/random_access_file.h"
#include "cache/io/raw_layout.h"
#include "vol/objects/dataset_queries.h"
#include "vol/objects/dataset_state.h"
#include "vol/objects/file_state.h"
#include "vol/objects/object.h"
#include "vol/runtime/options.h"
#include "vol/serve/row_part_evidence.h"
#include "vol/serve/virtual_sources.h"

namespace prescient::vol {

struct LoadCounters {
  std::uint64_t reads = 0;
  std::uint64_t bytes = 0;
};

class CachedDataset {
 public:
  // Works out how to load the dataset's rows (raw layout) and records its
  // identity. Runs on the caller's thread inside a VOL callback: all the HDF5
  // work happens here. Throws std::runtime_error when it cannot. Null for a
  // dataset whose bytes live in files that are not watched or whose storage
  // cannot be told (StoredRows::bytes_elsewhere; `why_not` then says why):
  // never cached, its reads forwarded. A virtual dataset is cached as
  // `cache_virtual` (Options::cache_virtual) says, keyed by its source files
  // too (virtual_sources.h).
  static std::shared_ptr<CachedDataset> Prepare(const VolObject& dataset, const DatasetState& state,
                                                VirtualCaching cache_virtual,
                                                std::string* why_not = nullptr);
  // The same from any source of answers (dataset_queries.h): the prefetch
  // thread prepares files the application has not opened through the public API.
  static std::shared_ptr<CachedDataset> Prepare(const DatasetQueries& dataset,
                                                const std::shared_ptr<FileState>& file,
                                                const DatasetState& state,
                                                VirtualCaching cache_virtual,
                                                std::string* why_not = nullptr);

  // What Prepare found out, free of HDF5: enough to prepare the dataset again
  // without opening it, in this process or another (resolution_memo.h).
  struct Facts {
    cache::DatasetKey key;
    std::string description;
    std::string name;
    std::uint64_t row_bytes = 0;
    std::uint64_t chunk_rows = 0;
    std::vector<hsize_t> dims;
    std::shared_ptr<const cache::io::RawLayout> layout;  // null: rows load through HDF5
    // What the layout's offsets point into when not the dataset's own file
    // (a virtual dataset's sources, spliced): a process's open descriptors,
    // so never in the resolution memo. Null: the file.
    std::shared_ptr<const cache::io::RandomAccessSource> source;
  };
  Facts facts() const;
  // The dataset `facts` describe in `file`, whose identity is the one they
  // were found under: what Prepare returns, without asking HDF5.
  static std::shared_ptr<CachedDataset> FromFacts(Facts facts,
                                                  const std::shared_ptr<FileState>& file);

  // Registers the prepared dataset in the node cache, choosing its grouping
  // from the segment's capacity and `block_bytes`. `fixed_gap` is the
  // coalescing gap when set (PRESCIENT_COALESCE_GAP), `miss_window_bytes` the
  // window a miss reads around itself (MissReadWindowBytes). Calls no HDF5
  // function, so it may run at fork time. Idempotent; not thread-safe (the
  // caller's lock).
  cache::Status Register(cache::NodeCache& cache, std::uint64_t block_bytes,
                         std::optional<std::uint64_t> fixed_gap,
                         std::uint64_t miss_window_bytes = kHdf5DefaultSieveBytes);
  bool registered() const { return slot_ != cache::kInvalidDatasetSlot; }

  // The dataset's identity, for the log and the schedule binding.
  const std::string& description() const { return description_; }
  const std::string& path() const { return path_; }
  // The dataset's path in its file ("/images").
  const std::string& name() const { return name_; }
  // The identity the cache knows the dataset by (before the grouping).
  const cache::DatasetKey& key() const { return key_; }
  const FileIdentity& file_identity() const { return file_identity_; }

  cache::DatasetSlot slot() const { return slot_; }
  std::uint64_t row_bytes() const { return row_bytes_; }
  std::uint64_t num_rows() const { return num_rows_; }

  // Cache entries: entry e holds rows [e * rows_per_entry, (e+1) * rows_per_entry).
  std::uint64_t rows_per_entry() const { return rows_per_entry_; }
  std::uint64_t entry_bytes() const { return rows_per_entry_ * row_bytes_; }
  std::uint64_t num_entries() const { return (num_rows_ + rows_per_entry_ - 1) / rows_per_entry_; }
  bool grouped() const { return rows_per_entry_ > 1; }
  // Grouped and at most 1/16 of the cache: its entries are kept as needed
  // right away, and read ahead by a schedule's prefetcher. A larger grouped
  // dataset is neither: its reads key its entries as least recently used.
  bool entries_stay_resident() const { return entries_stay_resident_; }
  // Grouped and too large to stay resident: the schedule does not key its
  // entries (an entry holds rows of many samples), so its reads are cached as
  // without one and a prefetcher leaves it to the readers' misses.
  bool unkeyed_by_schedule() const { return grouped() && !entries_stay_resident_; }

  // Null when rows must be loaded through HDF5; raw_reason() says why.
  const std::shared_ptr<const cache::io::RawLayout>& raw_layout() const { return layout_; }
  const std::shared_ptr<const cache::io::RandomAccessSource>& source() const { return source_; }
  const std::string& raw_reason() const { return raw_reason_; }
  // Rows per chunk along dimension 0 (0: not chunked). A miss loads whole
  // chunks' rows, so each chunk is decoded once.
  std::uint64_t chunk_rows() const { return chunk_rows_; }
  // Rows per slab: the rows a miss or a prefetch reads with a row when the
  // cache admits them (read-around), slab s being rows [s * n, (s + 1) * n).
  // Chunked data: the rows of a chunk (decoded whole anyway). Contiguous data
  // read raw: kContiguousSlabBytes of consecutive rows, one storage request
  // where a shuffled epoch would make one small random read per row. 1: none.
  static constexpr std::uint64_t kContiguousSlabBytes = 256 * 1024;
  std::uint64_t slab_rows() const {
    if (chunk_rows_ > 0) return chunk_rows_;
    if (!layout_ || row_bytes_ == 0) return 1;
    return std::max<std::uint64_t>(1, kContiguousSlabBytes / row_bytes_);
  }
  // Whether reading around pays now, given the node cache's `stats` and
  // whether a schedule keys the rows. Grouped datasets: never (their entries
  // are their read-around). Chunked data (decoded whole anyway): with a
  // schedule (the oracle admits only rows due before what they displace), or
  // when the dataset fits the cache. Contiguous data, whose extra rows are
  // extra bytes read: only while the dataset fits the cache and the cache has
  // never evicted. A cache smaller than the job's data would drop such rows
  // unused (with a schedule too: a cache with free blocks admits any row), so
  // what is read in vain is bounded by one cache's worth.
  bool ReadAroundPays(const cache::CacheStats& stats, bool scheduled) const {
    if (grouped() || slab_rows() <= 1) return false;
    if (chunk_rows_ > 0) return scheduled || FitsCache(stats);
    return RowsStayCached(stats);
  }
  // Whether the whole dataset fits the cache.
  bool FitsCache(const cache::CacheStats& stats) const {
    return num_rows_ * row_bytes_ <= stats.capacity_bytes;
  }
  // Whether rows loaded beyond what a read asks for stay until they are
  // read: the dataset fits the cache and the cache has never evicted. A cache
  // smaller than the job's data would drop them unused, so what is read in
  // vain is bounded by one cache's worth.
  bool RowsStayCached(const cache::CacheStats& stats) const {
    return FitsCache(stats) && stats.evictions == 0;
  }
  // Whether a read of `part_bytes` of each of `rows`, under half a row, may
  // load whole rows on a miss: this process's narrow reads of the dataset
  // have asked for as many bytes as the rows they touched hold
  // (row_part_evidence.h, which notes this read), and the rows stay until
  // the other parts are read (RowsStayCached, as for reading around
  // contiguous data). Thread-safe.
  bool NarrowPartsPay(std::span<const std::uint64_t> rows, std::uint64_t part_bytes,
                      const cache::CacheStats& stats) const;
  // True for this process's first narrow read of the dataset (the caller
  // then tells the node: cache::DatasetHint::kReadInParts).
  bool FirstNarrowRead() const noexcept { return !narrow_read_.exchange(true); }
  // Reads through HDF5 what `file_space` (a read's hyperslab selection of
  // this dataset) selects of rows [first_row, last_row], `elements` elements
  // of the stored type, into `out` in transfer order. On the caller's thread,
  // inside its read callback: the parts of a narrow read's rows the cache
  // does not hold (CacheClient::TryServe). Never throws.
  cache::Status ReadSelectedRowsThroughHdf5(const VolObject& dataset, hid_t file_space,
                                            std::uint64_t first_row, std::uint64_t last_row,
                                            std::uint64_t elements, void* out) const noexcept;
  // How the rows the prefetcher reads ahead are merged into reads: windows of
  // HDF5's sieve size around rows read ahead of their use.
  const cache::io::CoalescingOptions& coalescing() const { return coalescing_; }
  // How a miss's rows are read: the same, in windows of the miss window.
  const cache::io::CoalescingOptions& miss_coalescing() const { return miss_coalescing_; }

  // Loads cache entries `entries` (ascending, distinct) into dest[i]
  // (entry_bytes() each; the part of the last entry past the dataset's end is
  // zeroed). Raw when possible, else through `dataset`'s connector underneath.
  // `dataset` is given only on the caller's thread, inside a callback on it:
  // raw reads then borrow HDF5's own descriptor of the file (BorrowedFile).
  // Never throws.
  cache::Status LoadEntries(const VolObject* dataset, std::span<const std::uint64_t> entries,
                            std::span<std::byte* const> dest,
                            LoadCounters* counters) const noexcept;

  // True once the file was found changed since the dataset was prepared
  // (size, modification or status-change time), or one of a virtual dataset's
  // source files: its rows must never be served again. Re-checks the file
  // (and up to VirtualSources::kCheckedPerCall sources) at most once per
  // kChangeCheckInterval, so a file rewritten under an open handle is noticed
  // within that time. Thread-safe.
  static constexpr std::chrono::milliseconds kChangeCheckInterval{1000};
  // H5Pset_sieve_buf_size's default: what a native read of contiguous data reads at least.
  static constexpr std::uint64_t kHdf5DefaultSieveBytes = 64 * 1024;
  // `dataset` as for LoadEntries: the check is then an fstat of HDF5's own
  // descriptor (the file HDF5 reads), else of the pool's.
  bool FileChanged(const VolObject* dataset = nullptr) const noexcept;
  // For a virtual dataset: true once a source file of the rows
  // [first_row, last_row] changed, looked at once per open of the dataset
  // (VirtualSources::ChangedForRows); FileChanged() is then true too. False
  // for every other dataset.
  bool SourcesChanged(std::uint64_t open_serial, std::uint64_t first_row,
                      std::uint64_t last_row) const noexcept;
  bool virtual_dataset() const { return sources_ != nullptr; }
  // The file found changed, once FileChanged() returned true: path(), or a
  // virtual dataset's source.
  std::string changed_file() const EXCLUDES(changed_file_mutex_);
  // The file was found unchanged at `checked_ns` (steady_clock): a dataset of
  // it opened then, whose identity (which hashes the file's size and times)
  // is this dataset's. Its next re-check is due kChangeCheckInterval after
  // that, so a dataset opened, read once and closed (a file per sample) costs
  // no stat at its read.
  void FileUnchangedAt(std::int64_t checked_ns) const noexcept;
  // From now on FileChanged() looks at the file at every call, not once per
  // kChangeCheckInterval: for a dataset of a file opened for SWMR reading,
  // whose writer may change rows at any time (an fstat, ~0.5 us, per read).
  // Monotonic: a dataset also opened through a read-only handle keeps it.
  void CheckEveryRead() const noexcept { check_every_read_.store(true, std::memory_order_relaxed); }
  bool checks_every_read() const noexcept {
    return check_every_read_.load(std::memory_order_relaxed);
  }
  // True for the one caller that should drop the dataset's rows from the
  // cache after FileChanged() (later callers get false).
  bool MarkDropped() const noexcept { return !dropped_.exchange(true); }

 private:
  // HDF5's descriptor of this dataset's file, reached through `dataset`
  // (FileState::hdf5_file) while it is the file this dataset was identified
  // in; else null, and reads go through the pool (source_).
  const cache::io::PosixFile* BorrowedFile(const VolObject* dataset) const noexcept;
  // Records what changed (the first report wins) and sets changed_.
  void NoteChanged(const std::string& file) const noexcept EXCLUDES(changed_file_mutex_);
  cache::Status LoadRaw(const cache::io::RawLayout& layout,
                        const cache::io::RandomAccessSource& source,
                        std::span<const std::uint64_t> rows, std::span<std::byte* const> dest,
                        LoadCounters* counters) const;
  cache::Status LoadThroughHdf5(const VolObject& dataset, std::span<const std::uint64_t> rows,
                                std::span<std::byte* const> dest, LoadCounters* counters) const;
  cache::Status ReadRunsThroughHdf5(const VolObject& dataset, hid_t mem_type,
                                    std::span<const std::uint64_t> rows,
                                    std::span<std::byte* const> dest, LoadCounters* counters) const;

  cache::DatasetKey key_;
  std::string description_;
  std::string path_;
  std::string name_;
  FileIdentity file_identity_;
  cache::DatasetSlot slot_ = cache::kInvalidDatasetSlot;
  std::uint64_t row_bytes_ = 0;
  std::uint64_t num_rows_ = 0;
  std::uint64_t rows_per_entry_ = 1;
  bool entries_stay_resident_ = false;
  std::vector<hsize_t> dims_;
  std::shared_ptr<const cache::io::RawLayout> layout_;
  // Grouped contiguous data: the dataset's whole entries as rows of
  // entry_bytes() (the last entry, when the dataset does not fill it, is
  // not one of them). Set by Register.
  std::shared_ptr<const cache::io::RawLayout> entry_layout_;
  std::shared_ptr<const cache::io::RandomAccessSource> source_;
  // Rows are read from other files than the dataset's (Facts::source): never
  // through the descriptor HDF5 has of the dataset's file.
  bool rows_elsewhere_ = false;
  std::string raw_reason_;
  std::uint64_t chunk_rows_ = 0;
  // Contiguous rows read ahead bring in the window of HDF5's sieve size (64
  // KiB of whole rows, counted from row 0) they are in, as native's sieve
  // read brings the 64 KiB after a row. A miss brings its window of
  // miss_window_bytes (Register), twice that where the job's nodes read half
  // the rows or more: a reader waits on a miss's request, whereas no one
  // waits on the prefetch thread's, so the wider window only costs the
  // read-ahead CPU (measured: half the requests, no epoch faster).
  cache::io::CoalescingOptions coalescing_ = [] {
    cache::io::CoalescingOptions o = cache::io::kDefaultLocalDiskCoalescing;
    o.read_window_bytes = kHdf5DefaultSieveBytes;
    return o;
  }();
  cache::io::CoalescingOptions miss_coalescing_ = coalescing_;
  mutable std::atomic<std::int64_t> next_check_ns_{0};
  // A virtual dataset's source files (null for other layouts).
  std::shared_ptr<const VirtualSources> sources_;
  mutable cache::Mutex changed_file_mutex_;
  mutable std::string changed_file_ GUARDED_BY(changed_file_mutex_);
  mutable std::atomic<bool> changed_{false};
  mutable std::atomic<bool> check_every_read_{false};
  mutable std::atomic<bool> dropped_{false};
  mutable std::atomic<bool> narrow_read_{false};
  mutable cache::Mutex evidence_mutex_;
  mutable std::optional<RowPartEvidence> evidence_ GUARDED_BY(evidence_mutex_);
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SERVE_CACHED_DATASET_H_
